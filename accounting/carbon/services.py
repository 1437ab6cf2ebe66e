"""Writes of energy and carbon: a cluster's grid intensity series, loaded from CSV."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import transaction

from accounting.carbon.footprint import IntensityStep
from accounting.carbon.series_csv import intensity_csv_parse
from accounting.models import Cluster, GridIntensity


@dataclass(frozen=True)
class IntensityLoad:
    """What loading a series changed: steps new, with a new value, the same, removed."""

    created: int
    updated: int
    unchanged: int
    deleted: int

    def __str__(self) -> str:
        return (
            f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged,"
            f" {self.deleted} deleted"
        )


@transaction.atomic
def grid_intensity_load(
    *, cluster: Cluster, steps: Sequence[IntensityStep], replace: bool = False
) -> IntensityLoad:
    """Add the steps to the cluster's series, keyed on their start: loading a file again
    changes nothing; a start already known takes the file's value. ``replace`` also removes
    the steps the file does not have. All or nothing (one transaction)."""
    known = dict(
        GridIntensity.objects.select_for_update()
        .filter(cluster=cluster)
        .values_list("starts_at", "g_per_kwh")
    )
    created = [step for step in steps if step.starts_at not in known]
    changed = [
        step
        for step in steps
        if step.starts_at in known and known[step.starts_at] != step.g_per_kwh
    ]
    GridIntensity.objects.bulk_create(
        [
            GridIntensity(cluster=cluster, starts_at=step.starts_at, g_per_kwh=step.g_per_kwh)
            for step in [*created, *changed]
        ],
        update_conflicts=True,
        unique_fields=["cluster", "starts_at"],
        update_fields=["g_per_kwh"],
        batch_size=2000,
    )
    deleted = 0
    if replace:
        in_file = {step.starts_at for step in steps}
        gone = sorted(start for start in known if start not in in_file)
        for first in range(0, len(gone), 500):  # SQLite bounds a statement's parameters
            chunk = gone[first : first + 500]
            deleted += GridIntensity.objects.filter(cluster=cluster, starts_at__in=chunk).delete()[
                0
            ]
    return IntensityLoad(
        created=len(created),
        updated=len(changed),
        unchanged=len(steps) - len(created) - len(changed),
        deleted=deleted,
    )


def grid_intensity_csv_load(
    *, cluster: Cluster, lines: Iterable[str], replace: bool = False
) -> IntensityLoad:
    """Read a series CSV (``start``, ``g_per_kwh``; times without an offset in the cluster's
    zone) and load it: the one contract of the command and the staff page. A bad line raises
    ``IntensityCsvError`` naming it, and nothing is saved."""
    steps = intensity_csv_parse(lines, zone=cluster.zoneinfo)
    return grid_intensity_load(cluster=cluster, steps=steps, replace=replace)

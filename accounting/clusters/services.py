"""Write-side operations on clusters, partitions and their append-only rate versions.
Views, admin, commands and tasks call these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounting.clusters import charging
from accounting.clusters.hardware import HARDWARE_NAMES
from accounting.clusters.specs import ClusterDefinition, PartitionDefinition
from accounting.models import Cluster, Partition, PartitionVersion
from accounting.quarantine import quarantine_retry_enqueue
from kit.errors import ApplicationError

# The start of a partition's first version when no date is given: before any job.
BEGINNING = datetime(1970, 1, 1, tzinfo=UTC)


class VersionConflict(ApplicationError):
    """A new version would not be the newest one, or would start at an existing version's time."""


def version_start_problem(*, partition: Partition, effective_from: datetime) -> str | None:
    """Why a new version of ``partition`` cannot start at ``effective_from``, or None.

    Versions append after the newest one, and start on the hour of the cluster's clock: the
    import keeps utilisation per hour (docs/utilisation.md), and an hour is priced with the
    one hardware in force during all of it.
    """
    local = effective_from.astimezone(partition.cluster.zoneinfo)
    on_the_hour = (local.minute, local.second, local.microsecond) == (0, 0, 0)
    if not on_the_hour and effective_from != BEGINNING:
        return (
            f"{partition}: a version starts on the hour of the cluster's clock "
            f"({partition.cluster.timezone}), not at {local.isoformat()}"
        )
    latest = partition.versions.order_by("-effective_from").first()
    if latest is not None and effective_from <= latest.effective_from:
        return (
            f"{partition}: a new version must start after version {latest.number} "
            f"({latest.effective_from.isoformat()}), not at {effective_from.isoformat()}"
        )
    return None


def next_hour(*, cluster: Cluster, after: datetime) -> datetime:
    """The first instant on the hour of the cluster's clock at or after ``after``."""
    local = after.astimezone(cluster.zoneinfo)
    floor = local.replace(minute=0, second=0, microsecond=0)
    return floor if floor == local else floor + timedelta(hours=1)


@dataclass
class ClusterApplyResult:
    """What ``cluster_apply`` did, partition by partition."""

    cluster: Cluster
    cluster_created: bool = False
    cluster_updated: bool = False
    created: list[str] = field(default_factory=list)  # partitions new to the portal
    versioned: list[str] = field(default_factory=list)  # partitions that got a new version
    unchanged: list[str] = field(default_factory=list)
    not_in_file: list[str] = field(default_factory=list)  # kept: jobs may still refer to them

    @property
    def changed(self) -> bool:
        return bool(self.cluster_created or self.cluster_updated or self.created or self.versioned)


def _version_fields(definition: PartitionDefinition) -> dict[str, Any]:
    """The columns of a ``PartitionVersion`` that a spec file determines."""
    spec = definition.charging
    cpu_peak, gpu_peak = definition.cpu_peak, definition.gpu_peak
    return {
        "nodelist": definition.nodelist,
        "node_count": definition.node_count,
        **{name: getattr(spec, name) for name in HARDWARE_NAMES},
        "cpu_peak_n_stream": cpu_peak.n_stream if cpu_peak else None,
        "cpu_peak_n_unit": cpu_peak.n_unit if cpu_peak else None,
        "cpu_peak_frequency_hz": cpu_peak.frequency_hz if cpu_peak else None,
        "gpu_peak_n_cuda": gpu_peak.n_cuda if gpu_peak else None,
        "gpu_peak_n_tensor": gpu_peak.n_tensor if gpu_peak else None,
        "gpu_peak_matrix_order": gpu_peak.matrix_order if gpu_peak else None,
        "gpu_peak_frequency_hz": gpu_peak.frequency_hz if gpu_peak else None,
        "node_local": {name: str(value) for name, value in sorted(spec.node_local.items())},
        "weight_override": spec.weight_override,
        "weight_override_reason": definition.weight_override_reason,
    }


def _same(stored: Any, wanted: Any) -> bool:
    if isinstance(stored, Decimal) or isinstance(wanted, Decimal):
        if stored is None or wanted is None:
            return stored is wanted
        return Decimal(stored) == Decimal(wanted)
    if isinstance(wanted, dict):
        return {k: Decimal(str(v)) for k, v in (stored or {}).items()} == {
            k: Decimal(str(v)) for k, v in wanted.items()
        }
    return bool(stored == wanted)


@transaction.atomic
def partition_version_create(
    *,
    partition: Partition,
    definition: PartitionDefinition,
    effective_from: datetime,
    created_by: User | None = None,
    note: str = "",
) -> PartitionVersion:
    """Add a rate version to ``partition``, effective from ``effective_from``.

    Versions only ever append: the new one must start after every existing version, so a
    charge made under an older version keeps meaning what it meant.
    """
    latest = (
        PartitionVersion.objects.select_for_update()
        .filter(partition=partition)
        .order_by("-effective_from")
        .first()
    )
    problem = version_start_problem(partition=partition, effective_from=effective_from)
    if problem:
        raise VersionConflict(problem)
    return PartitionVersion.objects.create(
        partition=partition,
        number=(latest.number + 1) if latest else 1,
        effective_from=effective_from,
        derived_weight=charging.energy_weight(definition.charging),
        created_by=created_by if created_by and created_by.pk else None,
        change_note=note,
        **_version_fields(definition),
    )


@transaction.atomic
def cluster_apply(
    *,
    definition: ClusterDefinition,
    effective_from: datetime | None = None,
    applied_by: User | None = None,
    note: str = "",
) -> ClusterApplyResult:
    """Create or update a cluster from a validated spec file, idempotently.

    A partition whose spec differs from its newest version gets a new version effective from
    ``effective_from`` (default: the next hour of the cluster's clock, see
    :func:`version_start_problem`); an identical spec changes nothing. A partition's first
    version covers its whole past unless ``effective_from`` is given, so jobs that ran before
    the portal knew the cluster can be charged. Partitions missing
    from the file are reported, never deleted. All or nothing: one transaction.
    """
    cluster, cluster_created = Cluster.objects.select_for_update().get_or_create(
        name=definition.name,
        defaults={
            "description": definition.description,
            "timezone": definition.timezone,
            "slurm_cluster_name": definition.slurm_cluster_name,
        },
    )
    result = ClusterApplyResult(cluster=cluster, cluster_created=cluster_created)
    described = ("description", "timezone", "slurm_cluster_name")
    if not cluster_created and any(
        getattr(cluster, name) != getattr(definition, name) for name in described
    ):
        for name in described:
            setattr(cluster, name, getattr(definition, name))
        cluster.save(update_fields=[*described, "updated_at"])
        result.cluster_updated = True
    intensity = definition.grid_intensity_g_per_kwh
    if intensity is not None and cluster.grid_intensity_g_per_kwh != intensity:
        cluster.grid_intensity_g_per_kwh = intensity
        cluster.save(update_fields=["grid_intensity_g_per_kwh", "updated_at"])
        result.cluster_updated = True
    when = effective_from or next_hour(cluster=cluster, after=timezone.now())

    for item in definition.partitions:
        partition, created = Partition.objects.get_or_create(
            cluster=cluster, name=item.name, defaults={"description": item.description}
        )
        if not created and partition.description != item.description:
            partition.description = item.description
            partition.save(update_fields=["description"])
        latest = partition.versions.order_by("-effective_from").first()
        wanted = _version_fields(item)
        if latest is not None and all(_same(getattr(latest, k), v) for k, v in wanted.items()):
            result.unchanged.append(item.name)
            continue
        partition_version_create(
            partition=partition,
            definition=item,
            effective_from=when if (latest is not None or effective_from) else BEGINNING,
            created_by=applied_by,
            note=note or "cluster_apply",
        )
        (result.created if latest is None else result.versioned).append(item.name)

    cluster_import_schedule_sync(cluster=cluster)
    if result.created or result.versioned:
        quarantine_retry_enqueue(cluster=cluster)
    in_file = {item.name for item in definition.partitions}
    result.not_in_file = sorted(
        cluster.partitions.exclude(name__in=in_file).values_list("name", flat=True)
    )
    return result


def cluster_import_schedule_sync(*, cluster: Cluster) -> None:
    """Keep the cluster's beat entry (django-celery-beat) in step with its import settings."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    interval, _ = IntervalSchedule.objects.get_or_create(
        every=max(cluster.import_interval_minutes, 1), period=IntervalSchedule.MINUTES
    )
    PeriodicTask.objects.update_or_create(
        name=f"sacct import: {cluster.name}",
        defaults={
            "task": "accounting.tasks.import_sacct_window",
            "interval": interval,
            "args": json.dumps([cluster.pk]),
            "queue": "imports",
            "enabled": cluster.imports_enabled,
            "description": "Imports the next sacct window of this cluster (accounting.ledger).",
        },
    )

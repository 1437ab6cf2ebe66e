"""A ledger row's usage columns and the efficiency inputs read from them: one home for the
names, the rounding and the conversion, for the import, the roll-ups and the pages alike."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from accounting.clusters.efficiency import Held, JobUsage

# Job columns, in JobUsage's order; values are kept to the columns' three decimal places so
# that a job read again compares equal to its stored row.
USAGE_COLUMNS: Final = (
    "cpu_seconds_used",
    "memory_peak_mb",
    "gpu_utilisation",
    "gpu_memory_peak_mb",
)
_PLACES: Final = Decimal("0.001")


def usage_values(usage: JobUsage | None) -> dict[str, Decimal | None]:
    """The usage columns of a job that used ``usage`` (all None when nothing was recorded)."""
    if usage is None:
        return dict.fromkeys(USAGE_COLUMNS)
    measured = (
        usage.cpu_seconds, usage.memory_peak_mb, usage.gpu_utilisation, usage.gpu_memory_peak_mb
    )  # fmt: skip
    return {
        name: None if value is None else _kept(value)
        for name, value in zip(USAGE_COLUMNS, measured, strict=True)
    }


def _kept(value: Decimal) -> Decimal:
    try:
        return value.quantize(_PLACES)
    except InvalidOperation:
        # Too many digits for three places (a junk "99999999999999999999T"): kept as it is,
        # for the column limits (accounting.ledger.limits) to leave out with a warning.
        return value


def usage_of(values: Mapping[str, Any]) -> JobUsage:
    """What a ledger row (a dict of its columns, or a Job's ``__dict__``) says the job used."""
    return JobUsage(*(values[name] for name in USAGE_COLUMNS))


def held_of(values: Mapping[str, Any]) -> Held:
    """What a ledger row says the job held."""
    return Held(
        nnodes=values["nnodes"], cpus=values["cpus"], memory_mb=Decimal(values["memory_mb"]),
        gpus=values["gpus"], elapsed_seconds=values["elapsed_seconds"],
        timelimit_minutes=values["timelimit_minutes"],
    )  # fmt: skip

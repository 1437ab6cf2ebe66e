"""A ledger row's usage columns and the efficiency inputs read from them: one home for the
names, the rounding and the conversion, for the import, the roll-ups and the pages alike."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from accounting.clusters import efficiency
from accounting.clusters.charging import PartitionSpec
from accounting.clusters.efficiency import MEMORY_ONE_TASK, MEMORY_TIMES_TASKS, Held, JobUsage

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


# How a job's memory use was measured, said on the job page (in its warnings) when it is not
# the sum over tasks of each one's peak (TRESUsageInTot): no stored column holds it.
MEMORY_BASIS_NOTES: Final = {
    MEMORY_TIMES_TASKS: (
        "Memory used: one task's peak (MaxRSS) x the step's tasks (NTasks); sacct gave no"
        " TRESUsageInTot, the sum over tasks"
    ),
    MEMORY_ONE_TASK: (
        "Memory used: one task's peak (MaxRSS) alone; sacct gave neither TRESUsageInTot nor"
        " NTasks, so a job of several tasks used up to that many times more"
    ),
}


def memory_basis_notes(usage: JobUsage | None) -> list[str]:
    """What the job page says of how the memory used was measured ([] for the sum over
    tasks, or when nothing was)."""
    note = MEMORY_BASIS_NOTES.get(usage.memory_basis or "") if usage is not None else None
    return [note] if note else []


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


def right_sized_of(
    spec: PartitionSpec, values: Mapping[str, Any], *, service_units: Decimal
) -> Decimal | None:
    """The right-sized SU of a finished job's row (its usage columns as kept, and what it
    held), of the ``service_units`` it was booked; None without its CPU time. The one rule
    the per-line rows and the frame's both follow."""
    if values["cpu_seconds_used"] is None:
        return None
    return efficiency.right_sized_service_units(
        spec, held_of(values), usage_of(values), service_units=service_units
    )

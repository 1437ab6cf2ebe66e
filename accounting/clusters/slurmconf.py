"""slurm.conf lines under which Slurm's own ``billing`` TRES follows the portal's weights.
Pure module.

Each term of eq 1 on one node is linear in one resource: ``w·c/C = (w/C)·c``,
``w·g/G = (w/G)·g`` and, without the memory ceiling, ``w·m/M = (w/M)·m``. With
``PriorityFlags=MAX_TRES`` Slurm takes the largest weighted TRES, so
``TRESBillingWeights="CPU=w/C,Mem=w/M,GRES/gpu=w/G"`` reproduces the rate, with two differences:
MAX_TRES takes the maximum over the job's totals (not per node, then summed), and Slurm
truncates where eq 9 rounds memory up to whole core-equivalents.

Under these weights a job's ``billing`` is the portal's hourly rate of the job in SU, so a job
that runs ``t`` minutes adds ``billing·t`` to Slurm's billing-minutes while the portal charges
``billing·t/60`` SU: one SU is 60 billing-minutes (:func:`billing_minutes`), whatever the
partition, which is what lets one ``GrpTRESMins=billing=N`` hold a project's SU.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal
from typing import Final

from accounting.clusters.charging import PartitionSpec, energy_weight

NOTE = (
    "# Slurm's billing = floor(max over the job's TOTALS of cpu*CPU, mem_MB*Mem, gpus*GRES/gpu).\n"
    "# The portal charges sum over nodes of max(...) with memory rounded UP to whole\n"
    "# core-equivalents (eq 9), so: equal when cores or GPUs dominate on every node; the portal\n"
    "# is higher by up to w/C per node when memory dominates, or when nodes differ in shape.\n"
    "# The Mem weight is rounded up in its last digit: the exact value times a whole node's\n"
    "# memory can land a hair under the node's rate in floating point (127.99999999999999)."
)


BILLING_MINUTES_PER_SERVICE_UNIT: Final = 60
"""Slurm billing-minutes in one SU: billing is SU per hour (the weights above)."""


def billing_minutes(service_units: Decimal) -> int:
    """``GrpTRESMins=billing=N`` for ``service_units`` SU left: rounded down, so Slurm never
    lets a project run past its balance by rounding, and 0 (every job held) when none is left."""
    minutes = (service_units * BILLING_MINUTES_PER_SERVICE_UNIT).to_integral_value(ROUND_FLOOR)
    return max(int(minutes), 0)


def _weight_text(value: Decimal, digits: int = 16) -> str:
    """A weight as Slurm reads it: plain decimal, rounded up in the last printed digit."""
    quantum = Decimal(1).scaleb(-digits)
    rounded = value.quantize(quantum, rounding="ROUND_CEILING").normalize()
    return format(rounded, "f")


def tres_billing_weights(spec: PartitionSpec) -> str:
    """``TRESBillingWeights`` value for one partition (memory weight per MB)."""
    weight = spec.weight_override if spec.weight_override is not None else energy_weight(spec)
    parts = [
        f"CPU={_weight_text(weight / spec.cores)}",
        f"Mem={_weight_text(weight / spec.memory_mb)}",
    ]
    if spec.gpus:
        parts.append(f"GRES/gpu={_weight_text(weight / spec.gpus)}")
    return ",".join(parts)


def slurm_conf_lines(specs: list[tuple[str, PartitionSpec]]) -> str:
    """The lines to put in slurm.conf: the priority flag and one line per partition."""
    lines = [NOTE, "PriorityFlags=MAX_TRES"]
    for name, spec in specs:
        lines.append(f'PartitionName={name} TRESBillingWeights="{tres_billing_weights(spec)}"')
    return "\n".join(lines) + "\n"

"""What a draft of a cluster's rates does to each project, from per-shape sums. Pure module.

A shape is the size a charged job held (nodes, cores, GPUs, memory, as the import priced it:
``split_evenly``) with the summed jobs, seconds and SU of one project's jobs of that size
(``UsageShapeDaily`` / ``UsageShapeMonthly``). Every charging model is linear in the elapsed
seconds (:func:`accounting.clusters.charging.charge_rate`), so a shape's summed seconds times
its exact rate is the exact sum of its jobs' unrounded charges; the re-priced SU of a group
are that exact sum rounded once (docs/costs.md, "A rate change seen before it ships").

Money is re-priced the same way: the time rates of a cost model per node-second of the
partition's nodes, times the node-seconds the model charges (whole nodes, or under a shared
model each shape's share of them: ``CostModel.charged_share``, the cost pages' one rule).
Energy rates need each job's energy, which the shape sums do not carry, so they are left out
of both sides of the comparison.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple

from accounting.clusters import charging
from accounting.clusters.slurmconf import tres_billing_weights
from accounting.costs.costmodels import CostModel, nodelist_node_set_counts

_QUANTUM_SCALE = 10**6  # SU and money kept to 6 places, as the ledger keeps them


class Shape(NamedTuple):
    """One project's charged jobs of one size on one partition, summed over a period (a
    tuple: a cluster's year is ~10^5 of them, made in a tight loop)."""

    project_id: int
    partition: str
    nnodes: int
    cpus: int
    gpus: int
    memory_mb: Decimal
    jobs: int
    elapsed_seconds: int
    service_units: Decimal  # what the jobs were charged


@dataclass
class Repriced:
    """A project's jobs on one partition: charged, and re-priced under the draft."""

    jobs: int = 0
    elapsed_seconds: int = 0
    node_seconds: int = 0
    # The node-seconds by the share of each node the jobs held (eq 1's max fraction on the
    # hardware they ran on; None where it cannot be derived): what a cost model's one rule
    # (``CostModel.charged_share``) prices, whole nodes or shares.
    node_seconds_by_share: dict[Fraction | None, int] = field(default_factory=dict)
    charged_su: Decimal = Decimal(0)
    unpriced_jobs: int = 0  # shapes the draft cannot price (more GPUs than its nodes have)
    problems: set[str] = field(default_factory=set)
    # The draft's SU as exact sums of integers: per rate denominator, the sum of the rate
    # numerators times seconds (integer arithmetic per shape; one division per denominator).
    numerators: dict[int, int] = field(default_factory=dict)

    def paid_node_seconds(self, model: CostModel) -> Fraction:
        """The node-seconds ``model`` charges time rates for: whole nodes under an exclusive
        model, each job's share of them under a shared one."""
        return sum(
            (
                model.charged_share(share) * seconds
                for share, seconds in self.node_seconds_by_share.items()
            ),
            Fraction(0),
        )

    @property
    def draft_su_exact(self) -> Fraction:
        return sum(
            (
                Fraction(numerator, denominator)
                for denominator, numerator in self.numerators.items()
            ),
            Fraction(0),
        )

    @property
    def draft_su(self) -> Decimal:
        return rounded(self.draft_su_exact)


def rounded(amount: Fraction) -> Decimal:
    """An exact amount rounded half-even to 6 places once, as the charging engine rounds."""
    quanta, remainder = divmod(amount.numerator * _QUANTUM_SCALE, amount.denominator)
    twice = remainder + remainder
    if twice > amount.denominator or (twice == amount.denominator and quanta & 1):
        quanta += 1
    return Decimal(quanta).scaleb(-6)


def shape_rate(spec: charging.PartitionSpec, shape: Shape) -> tuple[int, int]:
    """SU per second of a job of ``shape`` on ``spec``, exactly (eq 1 at t = 1 s), as
    (numerator, denominator)."""
    usage = charging.split_evenly(
        nodes=shape.nnodes, cores=shape.cpus, memory_mb=shape.memory_mb, gpus=shape.gpus
    )
    return charging.charge_rate(spec, usage).service_units_per_second


def shapes_repriced(
    shapes: Iterable[Shape],
    specs: Mapping[str, charging.PartitionSpec],
    held_on: Mapping[str, charging.PartitionSpec] | None = None,
) -> dict[tuple[int, str], Repriced]:
    """Per (project, partition), the shapes' charged SU and their SU under ``specs`` (the
    draft's partition specs by name; a partition the draft leaves out keeps ``specs``' entry
    for it, which the caller fills with the version in force). Each distinct size is priced
    once; a size the spec cannot hold is counted in ``unpriced_jobs`` with the reason.
    ``held_on``: the specs the jobs ran on, for the share of each node they held (by default
    ``specs``)."""
    held_on = specs if held_on is None else held_on
    rates: dict[tuple[str, int, int, int, Decimal], tuple[int, int] | str] = {}
    shares: dict[tuple[str, int, int, int, Decimal], Fraction | None] = {}
    result: dict[tuple[int, str], Repriced] = {}
    for shape in shapes:
        group = result.get((shape.project_id, shape.partition))
        if group is None:
            group = result[(shape.project_id, shape.partition)] = Repriced()
        group.jobs += shape.jobs
        group.elapsed_seconds += shape.elapsed_seconds
        group.node_seconds += shape.nnodes * shape.elapsed_seconds
        group.charged_su += shape.service_units
        size = shape[1:6]  # partition, nnodes, cpus, gpus, memory_mb
        if size not in shares:
            shares[size] = _share_held(held_on.get(shape.partition), shape)
        by_share = group.node_seconds_by_share
        share = shares[size]
        by_share[share] = by_share.get(share, 0) + shape.nnodes * shape.elapsed_seconds
        rate = rates.get(size)
        if rate is None:
            spec = specs.get(shape.partition)
            try:
                if spec is None:
                    raise charging.SpecError(f"{shape.partition}: no rate version")
                rate = shape_rate(spec, shape)
            except (charging.ChargeError, charging.SpecError) as error:
                rate = str(error)
            rates[size] = rate
        if isinstance(rate, str):
            group.unpriced_jobs += shape.jobs
            group.problems.add(rate)
        else:
            numerator, denominator = rate
            sums = group.numerators
            sums[denominator] = sums.get(denominator, 0) + numerator * shape.elapsed_seconds
    return result


def _share_held(spec: charging.PartitionSpec | None, shape: Shape) -> Fraction | None:
    if spec is None:
        return None
    try:
        return charging.node_share_even(
            spec, nodes=shape.nnodes, cores=shape.cpus, memory_mb=shape.memory_mb, gpus=shape.gpus
        )
    except (charging.ChargeError, charging.SpecError):
        return None  # priced as whole nodes, as the cost pages price such a job


def node_second_cost(model: CostModel, nodelist: str) -> Fraction:
    """A cost model's time rates per node-second of a partition's nodes, on average: the
    rates of every node set a node is in (ch. 3.3), over the partition's node list. Raises
    the model's ``NodelistError`` for a node list that is not a hostlist."""
    node_count, counts, _ = nodelist_node_set_counts(model, nodelist)
    if node_count == 0:
        return Fraction(0)
    total = sum(
        (
            count * node_set.time_unit_cost
            for count, node_set in zip(counts, model.node_sets, strict=True)
        ),
        Fraction(0),
    )
    return total / node_count


@dataclass(frozen=True)
class WeightsLine:
    """One partition's ``TRESBillingWeights`` line in slurm.conf, before and after."""

    partition: str
    before: str | None  # None: a partition new in the draft
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def weights_line(partition: str, spec: charging.PartitionSpec) -> str:
    """The slurm.conf line of one partition (as ``slurm_conf_lines`` writes it)."""
    return f'PartitionName={partition} TRESBillingWeights="{tres_billing_weights(spec)}"'


def weights_diff(
    current: Mapping[str, charging.PartitionSpec], draft: Mapping[str, charging.PartitionSpec]
) -> list[WeightsLine]:
    """The ``TRESBillingWeights`` lines the draft changes or adds, by partition name."""
    lines = []
    for name in sorted(draft):
        before = weights_line(name, current[name]) if name in current else None
        line = WeightsLine(partition=name, before=before, after=weights_line(name, draft[name]))
        if line.changed:
            lines.append(line)
    return lines

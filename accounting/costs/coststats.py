"""Cost statistics over many jobs: the batch cost analyser of the PeCoH report (DESIGN section 6).

Pure: no Django, no settings, no ORM. Chapters ("ch.") and listings are those of "Modelling HPC
Usage Costs", PeCoH D3.1 & D3.3 (Huebbe, 2018).

A batch of jobs (:class:`JobRecord`: node list, runtime, energy) is priced with a cost model into
a columnar :class:`CostTable`, and :func:`cost_statistics` gives, for every column of Listings 7
and 8 -- Size (nodes), Runtime (h), Energy (J), each node set (the job's nodes in it), each rate,
and the Total -- the statistics of ch. 5.2:

* quantiles at a chosen increment, each with the share of the column's sum that the jobs up to
  and including that quantile hold ("1 nodes (13.9%)");
* ``sum``; ``count``, the jobs with data in the column; ``total count``, all jobs;
* ``mean`` and ``std-dev`` over the jobs with data; ``total mean`` and ``total dev`` over all
  jobs, a job without data counting as 0 ("how many jobs actually used GPU nodes", ch. 5.2).

A job lacks data in a column when the column does not apply to it: a node set (and its rates)
that holds none of its nodes, or energy (and energy rates) without an energy record. Size,
Runtime and Total always have data.

Definitions, chosen to reproduce Listings 7-8 and stated for the tests that compare with numpy:

* Quantile ``p`` is the sorted value at index ``floor(p/100 * (N - 1))`` over all ``N`` jobs,
  with the jobs lacking data sorted first and shown empty: numpy's ``method="lower"``, no
  interpolation. Listing 7 fits it and no other common definition:
  the 75 % row's share, 58.8 %, needs index 355 of 475 jobs; its Energy column is empty at 0 %
  because 26 jobs had no energy record. The index is computed exactly, not in floating point.
* Standard deviations are population deviations (divide by the count; numpy's ``ddof=0``).
  Listing 7 prints ``std-dev`` 0.0100 h and ``total dev`` 0.0162 h for the same 475 runtimes:
  the report's tool as published (batch-cost-analyser.sh) computes the former with bc at
  ``scale = 2``, two decimal digits; here both are exact, so they agree when no job lacks data.
* The cumulative cost distribution (ch. 6, Figures 6.4-6.5): the most expensive ``p`` % of jobs
  are the ``ceil(p/100 * N)`` jobs with the highest total, and their share of the summed cost.

Exactness: sizes, runtimes, energies and node counts are integers, and a time rate's column is
its cost per node-second times the job's node-seconds in the set, so those statistics are
computed on integers and scaled once. Money stays ``Decimal``; only the renderers round.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from itertools import repeat
from math import lcm
from operator import mul
from typing import Final, Literal, NamedTuple, cast

from accounting.costs.costmodels import (
    SECONDS_PER_HOUR,
    WHOLE_NODE,
    CostModel,
    NodelistError,
    nodelist_node_set_counts,
    rate_cost,
)

DEFAULT_INCREMENT: Final = Decimal(25)
"""Quantiles every 25 %: min, quartiles, max, as in Listing 7 (the report's tool's default)."""

TOP_PERCENTS: Final = (Decimal(1), Decimal(5), Decimal(10), Decimal(25), Decimal(50))
"""The shares of the cost distribution that ``coststats`` reports ("the most costly 1 %")."""

_NODELIST_CACHE_LIMIT: Final = 200_000
_ZERO: Final = Decimal(0)
_HUNDRED: Final = Decimal(100)
_PER_HOUR: Final = Fraction(1, SECONDS_PER_HOUR)
_WIDE_PRECISION: Final = 60  # sums of squares of 28-digit figures, without loss
_MAX_DENOMINATOR: Final = 10**30  # beyond it, exact integers would cost more than decimals

ColumnKind = Literal["size", "runtime", "energy", "node_set", "rate", "total"]


class JobRecord(NamedTuple):
    """What the statistics need of a job (sacct's NodeList, ElapsedRaw, ConsumedEnergyRaw, and
    its share of each node, eq 1's max fraction: None for unknown, priced as whole nodes)."""

    job_id: str
    nodelist: str
    runtime_seconds: int
    energy_joules: int | None
    node_share: Fraction | None = None


@dataclass(frozen=True)
class Column:
    """A column of the tables of Listings 7-8."""

    key: str
    header: str
    unit: str
    places: int
    kind: ColumnKind
    node_set: str | None = None

    @property
    def qualified(self) -> str:
        """A unique name: rates of different node sets may share a name (Listing 2)."""
        return f"{self.node_set}/{self.header}" if self.kind == "rate" else self.header


@dataclass(frozen=True)
class Quantile:
    percent: Decimal
    value: Decimal | None
    """None when the job at this quantile lacks data (an empty cell in Listing 7)."""
    share_percent: Decimal | None
    """Share of the column's sum held by the jobs up to and including this one."""


@dataclass(frozen=True)
class ColumnStatistics:
    """The rows of Listing 7 for one column, in the column's unit."""

    quantiles: tuple[Quantile, ...]
    sum: Decimal
    count: int
    total_count: int
    mean: Decimal | None
    std_dev: Decimal | None
    total_mean: Decimal | None
    total_dev: Decimal | None


@dataclass(frozen=True)
class Concentration:
    """The most expensive ``top_percent`` % of jobs (``jobs`` of them) hold ``share_percent``."""

    top_percent: Decimal
    jobs: int
    share_percent: Decimal | None


@dataclass(frozen=True)
class CostRow:
    """One job of the details table (``--details``)."""

    job_id: str
    size: int
    runtime_seconds: int
    energy_joules: int | None
    node_set_counts: tuple[int, ...]
    rate_costs: tuple[Decimal | None, ...]
    """One per rate of the model, in file order; None where the job lacks data."""
    total: Decimal
    node_share: Fraction = WHOLE_NODE
    """The part of each node its time rates were charged for (1 under an exclusive model)."""


@dataclass(frozen=True)
class NodeSignature:
    """What the cost of a job takes from its node list: its size and its nodes per node set,
    and the part of each node it pays time rates for (:meth:`CostModel.charged_share`).

    Jobs share signatures (every single-node job on a lean node has the same one), so the table
    stores a signature number per job and prices each signature once.
    """

    size: int
    node_set_counts: tuple[int, ...]
    has_unknown_nodes: bool
    node_share: Fraction = WHOLE_NODE


@dataclass
class CostTable:
    """The priced batch in columns of integers (about 24 bytes a job, whatever the model).

    Built by :func:`cost_table_build`; costs are derived from these columns on demand.
    """

    model: CostModel
    signatures: list[NodeSignature] = field(default_factory=list)
    signature_ids: array[int] = field(default_factory=lambda: array("q"))
    runtimes: array[int] = field(default_factory=lambda: array("q"))
    energies: array[int] = field(default_factory=lambda: array("q"))  # 0: no energy record
    dropped_long_jobs: int = 0

    def __len__(self) -> int:
        return len(self.signature_ids)

    @property
    def sizes(self) -> list[int]:
        by_signature = [signature.size for signature in self.signatures]
        return [by_signature[index] for index in self.signature_ids]

    def node_set_counts(self, node_set_index: int) -> list[int]:
        by_signature = [signature.node_set_counts[node_set_index] for signature in self.signatures]
        return [by_signature[index] for index in self.signature_ids]

    @property
    def jobs_with_unknown_nodes(self) -> int:
        unknown = {i for i, signature in enumerate(self.signatures) if signature.has_unknown_nodes}
        if not unknown:
            return 0
        return sum(1 for index in self.signature_ids if index in unknown)


@dataclass(frozen=True)
class CostStatistics:
    """Everything ``coststats --statistics`` prints."""

    currency: str
    columns: tuple[Column, ...]
    statistics: tuple[ColumnStatistics, ...]
    concentration: tuple[Concentration, ...]
    job_count: int
    dropped_long_jobs: int
    jobs_with_unknown_nodes: int


# -- building the table -------------------------------------------------------------------------


def cost_table_build(
    model: CostModel,
    jobs: Iterable[tuple[str, str, int, int | None, Fraction | None]],
    *,
    max_runtime_seconds: Decimal | int | None = None,
    on_row: Callable[[CostRow], None] | None = None,
) -> CostTable:
    """Price a stream of jobs (:class:`JobRecord` or plain tuples in its order) into a table.

    Under a shared model a job pays time rates for its ``node_share`` of each node, so jobs of
    one node list and different shares have different signatures; an exclusive model ignores
    the shares (a signature per node list, as fast as before).

    Jobs that ran longer than ``max_runtime_seconds`` are left out and counted (``--max-runtime``,
    ch. 5.2: one ghost job "run" for half a year would skew every total). ``on_row`` receives
    each priced job, for a details table printed while the jobs stream in.
    """
    table = CostTable(model=model)
    signatures = table.signatures
    append_signature = table.signature_ids.append
    append_runtime = table.runtimes.append
    append_energy = table.energies.append
    numbers: dict[NodeSignature, int] = {}
    shared = model.nodes_are == "shared"
    # Node lists repeat (every single-node job on the same node): expand each once. Under a
    # shared model the key is (node list, share).
    by_nodelist: dict[str | tuple[str, Fraction | None], int] = {}

    def signature_number(job_id: str, nodelist: str, share: Fraction | None) -> int:
        try:
            size, counts, unknown = nodelist_node_set_counts(model, nodelist)
            charged = model.charged_share(share)
        except (NodelistError, ValueError) as error:
            raise error.__class__(f"job {job_id}: {error}") from None
        signature = NodeSignature(size, counts, unknown, charged)
        number = numbers.setdefault(signature, len(numbers))
        if number == len(signatures):
            signatures.append(signature)
        if len(by_nodelist) >= _NODELIST_CACHE_LIMIT:
            by_nodelist.clear()
        by_nodelist[(nodelist, share) if shared else nodelist] = number
        return number

    dropped = 0
    for job_id, nodelist, runtime, energy, share in jobs:
        if max_runtime_seconds is not None and runtime > max_runtime_seconds:
            dropped += 1
            continue
        try:
            number = by_nodelist[(nodelist, share) if shared else nodelist]
        except KeyError:
            number = signature_number(job_id, nodelist, share)
        append_signature(number)
        append_runtime(runtime)
        append_energy(energy or 0)
        if on_row is not None:
            on_row(_cost_row(model, job_id, signatures[number], runtime, energy or None))
    table.dropped_long_jobs = dropped
    return table


def _cost_row(
    model: CostModel,
    job_id: str,
    signature: NodeSignature,
    runtime: int,
    energy: int | None,
) -> CostRow:
    costs: list[Decimal | None] = []
    for node_set, count in zip(model.node_sets, signature.node_set_counts, strict=True):
        for rate in node_set.rates:
            costs.append(
                rate_cost(
                    rate,
                    nodes_in_set=count,
                    node_count=signature.size,
                    runtime_seconds=runtime,
                    energy_joules=energy,
                    node_share=signature.node_share,
                )
                if count
                else None
            )
    return CostRow(
        job_id=job_id,
        size=signature.size,
        runtime_seconds=runtime,
        energy_joules=energy,
        node_set_counts=signature.node_set_counts,
        rate_costs=tuple(costs),
        total=sum((cost for cost in costs if cost is not None), _ZERO),
        node_share=signature.node_share,
    )


# -- statistics ---------------------------------------------------------------------------------


def table_columns(model: CostModel, *, totals_only: bool = False) -> tuple[Column, ...]:
    """The columns of Listings 7-8: Size, Runtime, Energy, per node set its nodes and its rates,
    Total; only Total with ``totals_only`` (``--quiet``)."""
    total = Column("total", "Total", model.currency, 2, "total")
    if totals_only:
        return (total,)
    columns = [
        Column("size", "Size", "nodes", 0, "size"),
        Column("runtime", "Runtime", "h", 4, "runtime"),
        Column("energy", "Energy", "J", 0, "energy"),
    ]
    for node_set in model.node_sets:
        columns.append(
            Column(f"nodes:{node_set.name}", node_set.name, "nodes", 0, "node_set", node_set.name)
        )
        for rate in node_set.rates:
            columns.append(
                Column(
                    f"rate:{node_set.name}:{rate.name}",
                    rate.name,
                    model.currency,
                    2,
                    "rate",
                    node_set.name,
                )
            )
    columns.append(total)
    return tuple(columns)


def cost_statistics(
    table: CostTable,
    *,
    increment: Decimal | int = DEFAULT_INCREMENT,
    totals_only: bool = False,
    top_percents: Sequence[Decimal] = TOP_PERCENTS,
) -> CostStatistics:
    """The statistics table of Listings 7-8 and the cost distribution of ch. 6."""
    model = table.model
    increment = Decimal(increment)
    columns = table_columns(model, totals_only=totals_only)
    ids, runtimes, energies = table.signature_ids, table.runtimes, table.energies
    jobs_per_signature = Counter(ids)
    by_key: dict[str, ColumnStatistics] = {}
    if not totals_only:
        by_key["size"] = _signature_column(
            jobs_per_signature, [signature.size for signature in table.signatures], increment
        )
        by_key["runtime"] = _statistics_of_sorted(
            sorted(runtimes), 0, increment=increment, scale=_PER_HOUR
        )
        by_key["energy"] = column_statistics(
            [energy or None for energy in energies], increment=increment
        )
        for index, node_set in enumerate(model.node_sets):
            counts = [signature.node_set_counts[index] for signature in table.signatures]
            by_key[f"nodes:{node_set.name}"] = _signature_column(
                jobs_per_signature, [count or None for count in counts], increment
            )
            time_rates = [rate for rate in node_set.rates if rate.kind == "time"]
            energy_rates = [rate for rate in node_set.rates if rate.kind == "energy"]
            if time_rates:
                # A time rate costs (its exact cost per node-second) x (the job's node-seconds in
                # the set, times its share of each node): one column, integers over the common
                # denominator of the shares, sorted once, serves every time rate of the set.
                charged = [
                    count * signature.node_share
                    for count, signature in zip(counts, table.signatures, strict=True)
                ]
                values, scale = _charged_node_seconds(charged, ids, runtimes)
                node_seconds = _raw_statistics(*values, increment)
                for rate in time_rates:
                    by_key[f"rate:{node_set.name}:{rate.name}"] = _scaled_statistics(
                        node_seconds, rate.exact_unit_cost * scale
                    )
            if energy_rates:
                # Likewise (cost per joule) x (the job's joules shared out to the set by node
                # count), over the common denominator of the shares when it is small.
                shares = [
                    Fraction(count, signature.size) if count else None
                    for count, signature in zip(counts, table.signatures, strict=True)
                ]
                joules, scale = _energy_shares(shares, ids, energies)
                raw = _raw_statistics(*joules, increment)
                for rate in energy_rates:
                    by_key[f"rate:{node_set.name}:{rate.name}"] = _scaled_statistics(
                        raw, rate.exact_unit_cost * scale
                    )
    totals, scale = _totals(table)
    totals.sort()
    by_key["total"] = _statistics_of_sorted(totals, 0, increment=increment, scale=scale)
    return CostStatistics(
        currency=model.currency,
        columns=columns,
        statistics=tuple(by_key[column.key] for column in columns),
        concentration=_concentration_of_sorted(totals, scale, top_percents),
        job_count=len(table),
        dropped_long_jobs=table.dropped_long_jobs,
        jobs_with_unknown_nodes=table.jobs_with_unknown_nodes,
    )


def _charged_node_seconds(
    charged: Sequence[Fraction], ids: Sequence[int], runtimes: Sequence[int]
) -> tuple[tuple[list[int | Decimal], int], Fraction]:
    """Each job's node-seconds in a node set times its share of each node (``charged`` per
    signature), sorted, as values times a scale: integers when the shares have a small common
    denominator (always under an exclusive model), decimals otherwise."""
    denominator = _common_denominator(charged)
    if denominator is not None:
        factors = [int(ratio * denominator) for ratio in charged]
        return _node_seconds(factors, ids, runtimes), Fraction(1, denominator)
    values: list[int | Decimal | None] = [
        _decimal(charged[number] * runtime) if charged[number] else None
        for number, runtime in zip(ids, runtimes, strict=True)
    ]
    return _sorted_with_missing(values), Fraction(1)


def _node_seconds(
    counts: Sequence[int], ids: Sequence[int], runtimes: Sequence[int]
) -> tuple[list[int | Decimal], int]:
    if all(counts):
        present: list[int | Decimal] = list(map(mul, map(counts.__getitem__, ids), runtimes))
        present.sort()
        return present, 0
    if not any(counts):
        return [], len(ids)
    return _sorted_with_missing(
        [
            counts[number] * runtime if counts[number] else None
            for number, runtime in zip(ids, runtimes, strict=True)
        ]
    )


def _energy_shares(
    shares: Sequence[Fraction | None], ids: Sequence[int], energies: Sequence[int]
) -> tuple[tuple[list[int | Decimal], int], Fraction]:
    """The joules of each job that fall to a node set (None where it has none), sorted, as
    values times a scale."""
    denominator = _common_denominator(share for share in shares if share is not None)
    if denominator is not None:
        factors = [None if share is None else int(share * denominator) for share in shares]
        values: list[int | Decimal | None] = []
        for number, energy in zip(ids, energies, strict=True):
            factor = factors[number]
            values.append(factor * energy if factor is not None and energy else None)
        return _sorted_with_missing(values), Fraction(1, denominator)
    decimals: list[int | Decimal | None] = []
    for number, energy in zip(ids, energies, strict=True):
        share = shares[number]
        decimals.append(_decimal(share * energy) if share is not None and energy else None)
    return _sorted_with_missing(decimals), Fraction(1)


def _signature_column(
    jobs_per_signature: Counter[int], by_signature: Sequence[int | None], increment: Decimal
) -> ColumnStatistics:
    """Statistics of a column that depends on the node list only: sorted by counting."""
    histogram: Counter[int] = Counter()
    missing = 0
    for number, jobs in jobs_per_signature.items():
        value = by_signature[number]
        if value is None:
            missing += jobs
        else:
            histogram[value] += jobs
    present: list[int | Decimal] = []
    for value in sorted(histogram):
        present.extend(repeat(value, histogram[value]))
    return _statistics_of_sorted(present, missing, increment=increment, scale=None)


def job_totals(table: CostTable) -> list[Decimal]:
    """Each job's total cost, in table order (the Total column)."""
    totals, scale = _totals(table)
    return [_scaled(total, scale) for total in totals]


def _totals(table: CostTable) -> tuple[list[int | Decimal], Fraction]:
    """Each job's total as ``value * scale``, the values in table order.

    Per node signature a job costs ``per_second * runtime + per_joule * energy`` (exact ratios).
    Over a common denominator both factors are integers, so the totals are exact integers and
    sort fast; if the denominators have no small common multiple (energy rates on node sets
    that hold parts of jobs of many different sizes), each total is one decimal division.
    """
    model, ids, runtimes, energies = (
        table.model,
        table.signature_ids,
        table.runtimes,
        table.energies,
    )
    per_second = [_time_cost_per_second(model, signature) for signature in table.signatures]
    per_joule = [_energy_cost_per_joule(model, signature) for signature in table.signatures]
    with_energy = any(per_joule)
    denominator = _common_denominator([*per_second, *per_joule])
    if denominator is not None:
        seconds = [int(ratio * denominator) for ratio in per_second]
        totals: list[int | Decimal] = list(map(mul, map(seconds.__getitem__, ids), runtimes))
        if with_energy:
            joules = [int(ratio * denominator) for ratio in per_joule]
            totals = [
                total + joules[number] * energy
                for total, number, energy in zip(totals, ids, energies, strict=True)
            ]
        return totals, Fraction(1, denominator)
    return [
        _decimal(per_second[number] * runtime + per_joule[number] * energy)
        for number, runtime, energy in zip(ids, runtimes, energies, strict=True)
    ], Fraction(1)


def _common_denominator(ratios: Iterable[Fraction]) -> int | None:
    """The least common denominator, or None when it passes :data:`_MAX_DENOMINATOR`."""
    denominator = 1
    for ratio in ratios:
        denominator = lcm(denominator, ratio.denominator)
        if denominator > _MAX_DENOMINATOR:
            return None
    return denominator


def _decimal(ratio: Fraction) -> Decimal:
    return Decimal(ratio.numerator) / ratio.denominator


def _time_cost_per_second(model: CostModel, signature: NodeSignature) -> Fraction:
    """What a second of a job with these nodes costs in time rates, exactly."""
    pairs = zip(model.node_sets, signature.node_set_counts, strict=True)
    per_node = sum((node_set.time_unit_cost * count for node_set, count in pairs), Fraction(0))
    return per_node * signature.node_share


def _energy_cost_per_joule(model: CostModel, signature: NodeSignature) -> Fraction:
    """What a joule of a job with these nodes costs in energy rates (shared by node count)."""
    pairs = zip(model.node_sets, signature.node_set_counts, strict=True)
    return sum(
        (node_set.energy_unit_cost * Fraction(count, signature.size) for node_set, count in pairs),
        Fraction(0),
    )


def column_statistics(
    values: Sequence[int | Decimal | None],
    *,
    increment: Decimal | int = DEFAULT_INCREMENT,
    scale: Fraction | None = None,
) -> ColumnStatistics:
    """The rows of Listing 7 for one column; None marks a job lacking data.

    With ``scale`` (>= 0) every figure is of ``scale * value``, computed on the values and
    scaled once (exact for integer values up to the final division).
    """
    return _statistics_of_sorted(
        *_sorted_with_missing(values), increment=Decimal(increment), scale=scale
    )


def quantile_percents(increment: Decimal | int) -> tuple[Decimal, ...]:
    """0, increment, 2 x increment, ... up to 100 %, and 100 % itself (the maximum)."""
    step = Decimal(increment)
    if not 0 < step <= _HUNDRED:
        raise ValueError(f"the quantile increment must be in (0, 100], got {increment}")
    percents: list[Decimal] = []
    index = 0
    while index * step <= _HUNDRED:
        percents.append(index * step)
        index += 1
    if percents[-1] != _HUNDRED:
        percents.append(_HUNDRED)
    return tuple(percents)


def cost_concentration(
    totals: Iterable[Decimal], *, top_percents: Sequence[Decimal] = TOP_PERCENTS
) -> tuple[Concentration, ...]:
    """Share of the summed cost held by the most expensive ``p`` % of jobs, for each ``p``."""
    return _concentration_of_sorted(sorted(totals), None, top_percents)


def _concentration_of_sorted(
    totals: Sequence[int | Decimal], scale: Fraction | None, top_percents: Sequence[Decimal]
) -> tuple[Concentration, ...]:
    count = len(totals)
    with localcontext(prec=_WIDE_PRECISION):
        grand_total = sum(totals, 0)
    result = []
    summed = 0  # the most expensive `summed` jobs are in `top`
    top: int | Decimal = 0
    for percent in sorted(Decimal(p) for p in top_percents):
        jobs = int((percent * count / 100).to_integral_value(rounding=ROUND_CEILING))
        jobs = min(max(jobs, 1 if count else 0), count)
        with localcontext(prec=_WIDE_PRECISION):
            top += sum(totals[count - jobs : count - summed], 0)
        summed = jobs
        share = Decimal(top) / Decimal(grand_total) * _HUNDRED if grand_total else None
        result.append(Concentration(top_percent=percent, jobs=jobs, share_percent=share))
    return tuple(result)


def _sorted_with_missing(
    values: Sequence[int | Decimal | None],
) -> tuple[list[int | Decimal], int]:
    present = [value for value in values if value is not None]
    present.sort()
    return present, len(values) - len(present)


def _statistics_of_sorted(
    present: Sequence[int | Decimal],
    missing: int,
    *,
    increment: Decimal,
    scale: Fraction | None,
) -> ColumnStatistics:
    return _scaled_statistics(_raw_statistics(present, missing, increment), scale)


@dataclass(frozen=True)
class _RawStatistics:
    """Sums and quantiles of one sorted column before its scale is applied."""

    quantiles: list[tuple[Decimal, int | Decimal | None, Decimal | None]]
    column_sum: int | Decimal
    squares: int | Decimal
    count: int
    total_count: int


def _raw_statistics(
    present: Sequence[int | Decimal], missing: int, increment: Decimal
) -> _RawStatistics:
    column_sum, squares = _moments(present)
    return _RawStatistics(
        quantiles=_quantiles(present, missing, column_sum, increment),
        column_sum=column_sum,
        squares=squares,
        count=len(present),
        total_count=len(present) + missing,
    )


def _scaled_statistics(raw: _RawStatistics, scale: Fraction | None) -> ColumnStatistics:
    mean = std_dev = total_mean = total_dev = None
    if raw.count:
        mean = _scaled(_ratio(raw.column_sum, raw.count), scale)
        total_mean = _scaled(_ratio(raw.column_sum, raw.total_count), scale)
        # Population variances, (n * sum(x^2) - sum(x)^2) / n^2: exact for integers.
        std_dev = _scaled(_variance(raw.count, raw.column_sum, raw.squares).sqrt(), scale)
        total_dev = _scaled(_variance(raw.total_count, raw.column_sum, raw.squares).sqrt(), scale)
    return ColumnStatistics(
        quantiles=tuple(
            Quantile(
                percent=percent,
                value=None if value is None else _scaled(value, scale),
                share_percent=share,
            )
            for percent, value, share in raw.quantiles
        ),
        sum=_scaled(raw.column_sum, scale),
        count=raw.count,
        total_count=raw.total_count,
        mean=mean,
        std_dev=std_dev,
        total_mean=total_mean,
        total_dev=total_dev,
    )


def _ratio(value: int | Decimal, count: int) -> Fraction | Decimal:
    return Fraction(value, count) if isinstance(value, int) else value / count


def _scaled(value: int | Decimal | Fraction, scale: Fraction | None) -> Decimal:
    """``value * scale`` as a decimal; exact inputs meet one division."""
    if isinstance(value, Decimal):
        if scale is None or scale == 1:
            return +value
        return value * scale.numerator / scale.denominator
    exact = Fraction(value) * (scale if scale is not None else 1)
    return Decimal(exact.numerator) / exact.denominator


def _moments(present: Sequence[int | Decimal]) -> tuple[int | Decimal, int | Decimal]:
    """Sum and sum of squares: exact for integers; for decimals at twice the usual digits, so
    that the variance formula loses nothing to cancellation."""
    if not present or isinstance(present[0], int):
        integers = cast("Sequence[int]", present)
        return sum(integers), sum(map(mul, integers, integers))
    with localcontext(prec=_WIDE_PRECISION):
        decimals = cast("Sequence[Decimal]", present)
        return sum(decimals, _ZERO), sum(map(mul, decimals, decimals), _ZERO)


def _variance(count: int, column_sum: int | Decimal, squares: int | Decimal) -> Decimal:
    if isinstance(column_sum, int) and isinstance(squares, int):
        return Decimal(count * squares - column_sum * column_sum) / (count * count)
    with localcontext(prec=_WIDE_PRECISION):
        spread = count * Decimal(squares) - Decimal(column_sum) * Decimal(column_sum)
    return max(spread, _ZERO) / (count * count)


def _quantiles(
    present: Sequence[int | Decimal],
    missing: int,
    column_sum: int | Decimal,
    increment: Decimal,
) -> list[tuple[Decimal, int | Decimal | None, Decimal | None]]:
    total_count = len(present) + missing
    rows: list[tuple[Decimal, int | Decimal | None, Decimal | None]] = []
    prefix: int | Decimal = 0
    summed = 0  # present[:summed] are in prefix
    for percent in quantile_percents(increment):
        if not total_count:
            rows.append((percent, None, None))
            continue
        # floor(p/100 * (N - 1)), exactly: numpy's method="lower".
        index = int((percent * (total_count - 1)) // 100) - missing
        if index < 0:
            rows.append((percent, None, None))
            continue
        with localcontext(prec=_WIDE_PRECISION):
            prefix += sum(present[summed : index + 1], 0)
        summed = index + 1
        share = Decimal(prefix) / Decimal(column_sum) * _HUNDRED if column_sum else None
        rows.append((percent, present[index], share))
    return rows


# -- rendering ----------------------------------------------------------------------------------

STATISTIC_LABELS: Final = (
    "sum", "count", "total count", "mean", "std-dev", "total mean", "total dev",
)  # fmt: skip


def format_value(value: Decimal | int, column: Column) -> str:
    """A figure in the column's unit and precision, rounded half up ("0.0016 h", "2 nodes")."""
    quantum = Decimal(1).scaleb(-column.places)
    return f"{Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP)} {column.unit}"


def format_share(share: Decimal) -> str:
    return f"({share.quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}%)"


def format_percent(percent: Decimal) -> str:
    return f"{percent.normalize():f}%"


def statistics_table(stats: CostStatistics) -> list[str]:
    """The statistics table of Listings 7-8 as lines of text."""
    header = ["statistics", *(column.header for column in stats.columns)]
    rows: list[list[str]] = []
    percents = [quantile.percent for quantile in stats.statistics[0].quantiles]
    for row, percent in enumerate(percents):
        cells = [format_percent(percent)]
        for column, column_stats in zip(stats.columns, stats.statistics, strict=True):
            quantile = column_stats.quantiles[row]
            if quantile.value is None:
                cells.append("")
            elif quantile.share_percent is None:
                cells.append(format_value(quantile.value, column))
            else:
                cells.append(
                    f"{format_value(quantile.value, column)} {format_share(quantile.share_percent)}"
                )
        rows.append(cells)
    quantile_rows = len(rows)
    for label in STATISTIC_LABELS:
        cells = [label]
        for column, column_stats in zip(stats.columns, stats.statistics, strict=True):
            cells.append(_statistic_cell(label, column, column_stats))
        rows.append(cells)
    widths = [max(len(cells[i]) for cells in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = f"{cells[0]:<{widths[0]}}"
        return "  ".join(
            [first, *(f"{c:>{w}}" for c, w in zip(cells[1:], widths[1:], strict=True))]
        ).rstrip()

    width = len(line(header))
    lines = [line(header), "=" * width]
    lines += [line(cells) for cells in rows[:quantile_rows]]
    lines.append("-" * width)
    lines += [line(cells) for cells in rows[quantile_rows:]]
    return lines


def _statistic_cell(label: str, column: Column, column_stats: ColumnStatistics) -> str:
    if label == "count":
        return str(column_stats.count)
    if label == "total count":
        return str(column_stats.total_count)
    value = {
        "sum": column_stats.sum,
        "mean": column_stats.mean,
        "std-dev": column_stats.std_dev,
        "total mean": column_stats.total_mean,
        "total dev": column_stats.total_dev,
    }[label]
    return "" if value is None else format_value(value, column)


def concentration_lines(stats: CostStatistics) -> list[str]:
    """The cumulative cost distribution in words (ch. 6, Figures 6.4-6.5)."""
    lines = []
    for item in stats.concentration:
        if item.share_percent is None:
            continue
        lines.append(
            f"the most expensive {format_percent(item.top_percent)} of jobs ({item.jobs:,}) "
            f"account for {item.share_percent.quantize(Decimal('0.1'), ROUND_HALF_UP)}% "
            "of the cost"
        )
    return lines


def details_header(columns: Sequence[Column]) -> list[str]:
    """The header cells of the details table (``--details``)."""
    return ["job", *(column.header for column in columns)]


def details_cells(row: CostRow, model: CostModel, columns: Sequence[Column]) -> list[str]:
    """One job's cells in the details table (``columns`` from :func:`table_columns`)."""
    values = _row_values(row, model, totals_only=len(columns) == 1)
    return [
        row.job_id,
        *(
            "" if value is None else format_value(value, column)
            for value, column in zip(values, columns, strict=True)
        ),
    ]


def details_csv_header(columns: Sequence[Column]) -> list[str]:
    """CSV header: unique column names with their units."""
    return ["job_id", *(f"{column.qualified} [{column.unit}]" for column in columns)]


def details_csv_cells(row: CostRow, model: CostModel, columns: Sequence[Column]) -> list[str]:
    """One job as CSV cells: exact figures (6 places for decimals), empty where data lacks."""
    values = _row_values(row, model, totals_only=len(columns) == 1)
    return [row.job_id, *(_csv_value(value) for value in values)]


def statistics_csv_rows(stats: CostStatistics) -> Iterator[list[str]]:
    """The statistics in long form: ``column, statistic, value, share_percent``."""
    yield ["column", "statistic", "value", "share_percent"]
    for column, column_stats in zip(stats.columns, stats.statistics, strict=True):
        name = f"{column.qualified} [{column.unit}]"
        for quantile in column_stats.quantiles:
            yield [
                name,
                format_percent(quantile.percent),
                _csv_value(quantile.value),
                _csv_value(quantile.share_percent),
            ]
        figures: dict[str, Decimal | int | None] = {
            "sum": column_stats.sum,
            "count": column_stats.count,
            "total count": column_stats.total_count,
            "mean": column_stats.mean,
            "std-dev": column_stats.std_dev,
            "total mean": column_stats.total_mean,
            "total dev": column_stats.total_dev,
        }
        for label, figure in figures.items():
            yield [name, label, _csv_value(figure), ""]
    for item in stats.concentration:
        yield [
            f"Total [{stats.currency}]",
            f"top {format_percent(item.top_percent)}",
            str(item.jobs),
            _csv_value(item.share_percent),
        ]


def _row_values(row: CostRow, model: CostModel, *, totals_only: bool) -> list[Decimal | int | None]:
    if totals_only:
        return [row.total]
    values: list[Decimal | int | None] = [
        row.size,
        Decimal(row.runtime_seconds) / SECONDS_PER_HOUR,
        row.energy_joules,
    ]
    costs = iter(row.rate_costs)
    for node_set, count in zip(model.node_sets, row.node_set_counts, strict=True):
        values.append(count or None)
        values.extend(next(costs) for _ in node_set.rates)
    values.append(row.total)
    return values


def _csv_value(value: Decimal | int | None) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return f"{value.quantize(Decimal('0.000001'), rounding=ROUND_HALF_UP):f}"

"""True overhead in canonical units and fair billing, canonical-unit paper (DESIGN section 5).

Pure maths over small frozen dataclasses: no Django, no settings, no ORM.

A canonical unit is a set of thresholds per partition (section 4 of the paper: CPU nodes
"1 CPU core and 2 GB of memory", GPU nodes "1 GPU chip"). For one node at one instant::

    true_overhead = min over thresholded resources r of floor(free_r / threshold_r)

(section 3, Figure 2: a node with all its cores or all its memory allocated has 0 units; 3 cores
and 1 GB free give 0, 3 cores and 4 GB give 2, 3 cores and 7 GB give 3.)

Fair billing (section 3.3): the true overhead of a node is never billed; everything else on the
node is billed pro rata to the jobs running there, so each resource is billed at the rate
``(capacity_r - true_overhead * threshold_r) / allocated_r`` (:func:`fair_billing_rates`).

:func:`true_overhead_report` rebuilds node occupancy over a window from the jobs' node lists by
one sweep over their start and end events (sorted once, per-node state in lists, no per-second
loops) and reports, per partition, the true overhead as a time series (unit-seconds per bucket),
a histogram (node-seconds spent at each overhead) and the aggregate fair-billing rates; asked
for, it also reports each job's fair share (:class:`FairShare`: what section 3.3 bills it).
:func:`overhead_reports_combine` joins the reports of consecutive windows (a window cut where a
partition's node list changed).

Conventions:

- Memory is MiB (Slurm's "M"); "2 GB" is Slurm's ``2G`` = 2048 MiB.
- A job's totals are split over its nodes in whole units, the remainder going one unit each to
  the first nodes of its list (10 cores on 3 nodes: 4, 3, 3), unless per-node figures are given.
  Whole units keep ``floor(free / threshold)`` exact and the totals conserved.
- A node listed in several partitions (overlapping Slurm partitions) belongs, for capacity and
  reporting, to the first of them; jobs of any partition occupy it.
- A node with more allocated than it has (bad data) has 0 units of true overhead, never fewer.
- Jobs that cannot be placed (no node list, an unknown node, a malformed list) are not dropped
  silently: they are returned in :attr:`OverheadReport.unplaced` with the reason.
- Fair shares are whole resource-seconds. A job's exact share on a node is rounded down or up
  by cumulative rounding in the order jobs leave the node, so that on every node the shares add
  up exactly to the node's billable total (see :class:`_FairShares`). A resource that is billable
  on a node while no job there holds any of it is split equally among the jobs on the node.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Final

import hostlist

from accounting.clusters.specs import PartitionDefinition
from accounting.utilisation.peak import epoch_seconds, from_epoch_seconds
from accounting.utilisation.quality import Step, bucket_boundaries, collector_paused
from kit.errors import ApplicationError

MIB_PER_GIB: Final = 1024
_UNBOUNDED: Final = 1 << 62
# Fair shares: per-node price integrals in fixed point with this many fraction bits. Each
# interval's increment is rounded down, by less than 2**-64 per unit held; the slack added
# before taking whole units (2**-24) is far above any sum of those errors and far below one unit.
_SHARE_BITS: Final = 64
_SHARE_SLACK: Final = 1 << (_SHARE_BITS - 24)


class CanonicalError(ApplicationError):
    """A canonical unit, node or job that cannot be used; the message says which and why."""


def _non_negative(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CanonicalError(f"{name} must be a non-negative integer, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class NodeResources:
    """Amounts of the resources of one node: capacity, free or allocated (memory in MiB)."""

    cores: int
    memory_mb: int
    gpus: int = 0

    def __post_init__(self) -> None:
        for name in ("cores", "memory_mb", "gpus"):
            _non_negative(name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class CanonicalUnit:
    """The thresholds of one canonical unit; ``None`` leaves a resource out of the unit."""

    cores: int | None = None
    memory_mb: int | None = None
    gpus: int | None = None

    def __post_init__(self) -> None:
        thresholds = (self.cores, self.memory_mb, self.gpus)
        if all(threshold is None for threshold in thresholds):
            raise CanonicalError("a canonical unit needs at least one threshold")
        for name in ("cores", "memory_mb", "gpus"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise CanonicalError(f"threshold {name} must be a positive integer, got {value!r}")

    @property
    def thresholds(self) -> tuple[int, int, int]:
        """(cores, memory_mb, gpus) thresholds with 0 for a resource not in the unit."""
        return (self.cores or 0, self.memory_mb or 0, self.gpus or 0)


CPU_NODE_UNIT: Final = CanonicalUnit(cores=1, memory_mb=2 * MIB_PER_GIB)
"""The paper's unit for CPU-only nodes: 1 CPU core and 2 GB of memory (section 4)."""

GPU_NODE_UNIT: Final = CanonicalUnit(gpus=1)
"""The paper's unit for GPU nodes: 1 GPU chip (section 4)."""


def default_canonical_unit(node: NodeResources) -> CanonicalUnit:
    """The paper's unit for a node: :data:`GPU_NODE_UNIT` if it has GPUs, else CPU_NODE_UNIT."""
    return GPU_NODE_UNIT if node.gpus else CPU_NODE_UNIT


def _overhead(free: tuple[int, int, int], thresholds: tuple[int, int, int]) -> int:
    """min_r floor(free_r / threshold_r) over the thresholds that are set, never below 0."""
    return max(
        0,
        min(
            amount // threshold
            for amount, threshold in zip(free, thresholds, strict=True)
            if threshold
        ),
    )


def true_overhead(*, free: NodeResources, unit: CanonicalUnit) -> int:
    """Canonical units of true overhead of a node with ``free`` unallocated resources.

    ``min_r floor(free_r / threshold_r)`` over the unit's thresholds (section 3): leftovers
    below a threshold are ignored, and counting stops when any resource of the unit runs out.
    """
    return _overhead((free.cores, free.memory_mb, free.gpus), unit.thresholds)


def node_true_overhead(
    *, capacity: NodeResources, allocated: NodeResources, unit: CanonicalUnit
) -> int:
    """True overhead of a node of ``capacity`` on which jobs hold ``allocated`` in total."""
    return _overhead(
        (
            capacity.cores - allocated.cores,
            capacity.memory_mb - allocated.memory_mb,
            capacity.gpus - allocated.gpus,
        ),
        unit.thresholds,
    )


@dataclass(frozen=True, slots=True)
class FairBillingRates:
    """Section 3.3 on one node: what is billable and at what rate each resource is billed.

    A rate is billable / allocated (1 = the jobs pay for what they asked, 10/7 = 143 %); it is
    ``None`` for a resource no job on the node holds (nothing to bill it to).
    """

    true_overhead: int
    billable: NodeResources
    cores: Fraction | None
    memory: Fraction | None
    gpus: Fraction | None


def fair_billing_rates(
    *, capacity: NodeResources, allocated: NodeResources, unit: CanonicalUnit
) -> FairBillingRates:
    """Billing rates of section 3.3 for a node of ``capacity`` with ``allocated`` in total.

    The true overhead (``units * threshold_r`` of each thresholded resource) is the provider's
    loss; the rest of the node is billed pro rata to the jobs on it.
    """
    units = node_true_overhead(capacity=capacity, allocated=allocated, unit=unit)
    threshold_cores, threshold_memory, threshold_gpus = unit.thresholds
    billable = NodeResources(
        cores=max(0, capacity.cores - units * threshold_cores),
        memory_mb=max(0, capacity.memory_mb - units * threshold_memory),
        gpus=max(0, capacity.gpus - units * threshold_gpus),
    )

    def rate(billable_amount: int, allocated_amount: int) -> Fraction | None:
        return Fraction(billable_amount, allocated_amount) if allocated_amount else None

    return FairBillingRates(
        true_overhead=units,
        billable=billable,
        cores=rate(billable.cores, allocated.cores),
        memory=rate(billable.memory_mb, allocated.memory_mb),
        gpus=rate(billable.gpus, allocated.gpus),
    )


# --------------------------------------------------------------------------------------------
# The sweep over a window


@dataclass(frozen=True, slots=True)
class OverheadPartition:
    """A partition for the sweep: its nodes (Slurm hostlist), one node's capacity, its unit.

    ``unit`` defaults to the paper's (:func:`default_canonical_unit`).
    """

    name: str
    nodelist: str
    node: NodeResources
    unit: CanonicalUnit | None = None

    @property
    def canonical_unit(self) -> CanonicalUnit:
        """The unit in use: the one given or the paper's default for this kind of node."""
        return self.unit if self.unit is not None else default_canonical_unit(self.node)


def overhead_partition_from_definition(
    definition: PartitionDefinition, unit: CanonicalUnit | None = None
) -> OverheadPartition:
    """The sweep's view of a partition read from a cluster spec file."""
    spec = definition.charging
    return OverheadPartition(
        name=definition.name,
        nodelist=definition.nodelist,
        node=NodeResources(cores=spec.cores, memory_mb=spec.memory_mb, gpus=spec.gpus),
        unit=unit,
    )


@dataclass(frozen=True, slots=True)
class NodeJob:
    """A job as the sweep sees it: when, on which nodes, holding what.

    ``cores``, ``memory_mb`` and ``gpus`` are totals over the job's nodes (sacct ``AllocTRES``);
    ``per_node``, when known, gives each node's share in the order of the expanded node list.
    """

    job_id: str
    start: datetime
    end: datetime
    nodelist: str
    cores: int
    memory_mb: int
    gpus: int = 0
    per_node: tuple[NodeResources, ...] | None = None
    start_seconds: int = field(init=False, repr=False, compare=False)
    end_seconds: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _non_negative("cores", self.cores)
        _non_negative("memory_mb", self.memory_mb)
        _non_negative("gpus", self.gpus)
        start, end = epoch_seconds(self.start), epoch_seconds(self.end)
        if end < start:
            raise CanonicalError(f"job {self.job_id}: ends before it starts")
        object.__setattr__(self, "start_seconds", start)
        object.__setattr__(self, "end_seconds", end)


@dataclass(frozen=True, slots=True)
class ResourceSeconds:
    """Resource-time: core-seconds, MiB-seconds and GPU-seconds."""

    core_seconds: int
    memory_mb_seconds: int
    gpu_seconds: int


@dataclass(frozen=True, slots=True)
class OverheadBucket:
    """True overhead of a partition during one bucket, in canonical unit-seconds."""

    start: datetime
    end: datetime
    unit_seconds: int

    @property
    def mean_units(self) -> Fraction:
        """The average number of canonical units of true overhead during the bucket."""
        seconds = epoch_seconds(self.end) - epoch_seconds(self.start)
        return Fraction(self.unit_seconds, seconds) if seconds else Fraction(0)


@dataclass(frozen=True, slots=True)
class PartitionOverhead:
    """A partition's true overhead over the window and its fair-billing aggregates.

    ``histogram`` maps units of true overhead to the node-seconds spent there (the paper's
    recommended aggregate, section 3.1); ``buckets`` is the time series. ``allocated`` is what
    the jobs held; ``billable`` is what section 3.3 bills on nodes with at least one job:
    the node's capacity minus its true overhead, integrated over the time it was occupied.
    """

    name: str
    unit: CanonicalUnit
    node_count: int
    buckets: tuple[OverheadBucket, ...]
    histogram: Mapping[int, int]
    occupied_node_seconds: int
    allocated: ResourceSeconds
    billable: ResourceSeconds

    @property
    def unit_seconds(self) -> int:
        """Canonical unit-seconds of true overhead over the whole window."""
        return sum(bucket.unit_seconds for bucket in self.buckets)

    @property
    def fair_rates(self) -> tuple[Fraction | None, Fraction | None, Fraction | None]:
        """Aggregate section 3.3 rates (cores, memory, GPUs): billable over allocated."""
        return (
            _rate(self.billable.core_seconds, self.allocated.core_seconds),
            _rate(self.billable.memory_mb_seconds, self.allocated.memory_mb_seconds),
            _rate(self.billable.gpu_seconds, self.allocated.gpu_seconds),
        )


def _rate(billable: int, allocated: int) -> Fraction | None:
    return Fraction(billable, allocated) if allocated else None


@dataclass(frozen=True, slots=True)
class UnplacedJob:
    """A job the sweep could not place on nodes, and why."""

    job_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class FairShare:
    """What section 3.3 bills one job in the window, against what it held (resource-seconds).

    ``billed_*`` is the job's pro-rata share, on each of its nodes and at each instant, of the
    node's billable amount (capacity minus true overhead): its allocation plus its part of the
    unallocated resources that are not true overhead. Never less than allocated on a node that
    is not over-full.
    """

    job_id: str
    allocated_core_seconds: int
    allocated_memory_mb_seconds: int
    allocated_gpu_seconds: int
    billed_core_seconds: int
    billed_memory_mb_seconds: int
    billed_gpu_seconds: int

    @property
    def allocated(self) -> ResourceSeconds:
        return ResourceSeconds(
            self.allocated_core_seconds,
            self.allocated_memory_mb_seconds,
            self.allocated_gpu_seconds,
        )

    @property
    def billed(self) -> ResourceSeconds:
        return ResourceSeconds(
            self.billed_core_seconds, self.billed_memory_mb_seconds, self.billed_gpu_seconds
        )

    @property
    def factors(self) -> tuple[Fraction | None, Fraction | None, Fraction | None]:
        """Billed over allocated per resource (cores, memory, GPUs): the job's fair-share factor."""
        return (
            _rate(self.billed_core_seconds, self.allocated_core_seconds),
            _rate(self.billed_memory_mb_seconds, self.allocated_memory_mb_seconds),
            _rate(self.billed_gpu_seconds, self.allocated_gpu_seconds),
        )


@dataclass(frozen=True, slots=True)
class OverheadReport:
    """The result of :func:`true_overhead_report`; ``fair_shares`` is empty unless asked for."""

    start: datetime
    end: datetime
    partitions: Mapping[str, PartitionOverhead]
    unplaced: tuple[UnplacedJob, ...]
    fair_shares: tuple[FairShare, ...] = ()


def _split_whole(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` whole shares, the remainder one each to the first shares."""
    share, remainder = divmod(total, parts)
    return [share + 1] * remainder + [share] * (parts - remainder)


class _Nodes:
    """Every node of the partitions, by index, with its partition, capacity and unit."""

    def __init__(self, partitions: Sequence[OverheadPartition]) -> None:
        self.index: dict[str, int] = {}
        self.partition: list[int] = []
        self.capacity: list[tuple[int, int, int]] = []
        self.thresholds: list[tuple[int, int, int]] = []
        self.counts = [0] * len(partitions)
        names: set[str] = set()
        for position, partition in enumerate(partitions):
            if partition.name in names:
                raise CanonicalError(f"partition {partition.name!r} is given twice")
            names.add(partition.name)
            try:
                hosts = hostlist.expand_hostlist(partition.nodelist)
            except hostlist.BadHostlist as error:
                raise CanonicalError(
                    f"partition {partition.name!r}: bad node list ({error})"
                ) from None
            capacity = partition.node
            thresholds = partition.canonical_unit.thresholds
            for host in hosts:
                if host in self.index:
                    continue  # overlapping partitions: the first one owns the node
                self.index[host] = len(self.partition)
                self.partition.append(position)
                self.capacity.append((capacity.cores, capacity.memory_mb, capacity.gpus))
                self.thresholds.append(thresholds)
                self.counts[position] += 1


# A placed job: (node index, cores, memory MiB, GPUs) on each of its nodes
_Placement = tuple[tuple[int, int, int, int], ...]


@dataclass(slots=True)
class _Placed:
    """The jobs of a window put on nodes, before the sweep."""

    placements: list[_Placement]
    spans: list[tuple[int, int]]  # (start, end) of each placed job, clipped to the window
    unplaced: list[UnplacedJob]
    allocated: list[list[int]]  # per partition: core-, MiB- and GPU-seconds held
    job_ids: list[str]  # of each placed job


def _place(jobs: Iterable[NodeJob], nodes: _Nodes, window_start: int, window_end: int) -> _Placed:
    """Expand node lists, split totals over nodes, add up what was allocated in the window."""
    placed = _Placed([], [], [], [[0, 0, 0] for _ in nodes.counts], [])
    expanded: dict[str, tuple[int, ...] | str] = {}  # node list -> indices, or why not
    for job in jobs:
        job_start = max(job.start_seconds, window_start)
        job_end = min(job.end_seconds, window_end)
        if job_start >= job_end:
            continue
        hosts = expanded.get(job.nodelist)
        if hosts is None:
            hosts = _expand(job.nodelist, nodes.index)
            expanded[job.nodelist] = hosts
        if isinstance(hosts, str):
            placed.unplaced.append(UnplacedJob(job.job_id, hosts))
            continue
        count = len(hosts)
        if job.per_node is not None:
            if len(job.per_node) != count:
                reason = f"{len(job.per_node)} per-node figures for {count} nodes"
                placed.unplaced.append(UnplacedJob(job.job_id, reason))
                continue
            shares = [(share.cores, share.memory_mb, share.gpus) for share in job.per_node]
        elif count == 1:
            shares = [(job.cores, job.memory_mb, job.gpus)]
        else:
            shares = list(
                zip(
                    _split_whole(job.cores, count),
                    _split_whole(job.memory_mb, count),
                    _split_whole(job.gpus, count),
                    strict=True,
                )
            )
        seconds = job_end - job_start
        placement = []
        for host, (cores, memory_mb, gpus) in zip(hosts, shares, strict=True):
            placement.append((host, cores, memory_mb, gpus))
            totals = placed.allocated[nodes.partition[host]]
            totals[0] += cores * seconds
            totals[1] += memory_mb * seconds
            totals[2] += gpus * seconds
        placed.placements.append(tuple(placement))
        placed.spans.append((job_start, job_end))
        placed.job_ids.append(job.job_id)
    return placed


def _event_keys(
    spans: list[tuple[int, int]], window_start: int, window_end: int
) -> tuple[list[int], int]:
    """Start and end events as sorted ints: time, then end (0) before start (1), then job.

    Returns the keys and the number of bits that hold the job number. Sorting plain ints is
    several times faster than sorting tuples.
    """
    job_bits = max(1, len(spans).bit_length())
    keys = []
    for job_number, (job_start, job_end) in enumerate(spans):
        keys.append((((job_start - window_start) << 1 | 1) << job_bits) | job_number)
        if job_end < window_end:  # an end at the window's end changes nothing inside it
            keys.append((((job_end - window_start) << 1) << job_bits) | job_number)
    keys.sort()
    return keys, job_bits


@dataclass(slots=True)
class _Swept:
    """Per partition: the series, histogram and occupancy integrals of the sweep."""

    series: list[list[int]]  # unit-seconds per bucket
    histograms: list[list[int]]  # node-seconds at each number of units
    occupied_seconds: list[int]  # node-seconds with at least one job
    occupied_unit_seconds: list[int]  # unit-seconds of true overhead on those nodes


class _FairShares:
    """Section 3.3 per job, integrated along the sweep in O(1) per job-node event.

    On a node whose state (jobs, free resources, true overhead) is constant over ``dt``, resource
    ``r`` has ``billable_r = capacity_r - units * threshold_r`` and a job holding ``a_r`` of the
    node's ``held_r`` is billed ``billable_r * dt * a_r / held_r``. So each node keeps the integral
    of ``billable_r / held_r`` over time (its "price", in fixed point) and a job leaving the node
    is billed ``a_r`` times the growth of the price since it arrived. Where no job on the node
    holds any of ``r`` the billable amount is split equally (a second integral, of
    ``billable_r / jobs``). Shares become whole units by cumulative rounding per node: the node's
    running total of exact shares is rounded, and each job gets the step it adds, so every job
    gets its exact share rounded down or up and the node's shares add up to its billable total.
    """

    __slots__ = (
        "billable", "billed", "capacity", "cumulative", "emitted", "last_job", "marks",
        "prices", "since", "thresholds",
    )  # fmt: skip

    def __init__(self, nodes: _Nodes, job_count: int, window_start: int) -> None:
        count = len(nodes.capacity)
        self.capacity = nodes.capacity
        self.thresholds = nodes.thresholds
        self.since = [window_start] * count  # when each node's integrals were last brought on
        self.prices = [[0] * 6 for _ in range(count)]  # per held unit, then per job (scaled)
        self.billable = [[0, 0, 0] for _ in range(count)]  # billable resource-seconds so far
        self.cumulative = [[0, 0, 0] for _ in range(count)]  # exact shares handed out (scaled)
        self.emitted = [[0, 0, 0] for _ in range(count)]  # whole units handed out
        self.last_job = [-1] * count
        self.marks: dict[int, list[tuple[int, ...]]] = {}  # open job -> prices on arrival
        self.billed = [[0] * job_count for _ in range(3)]  # per resource, per job

    def advance(self, node: int, now: int, free: list[int], units: int, jobs_on: int) -> None:
        """Integrate the node's prices up to ``now`` with the state it had since the last call.

        Written out per resource: it runs once per job-node event.
        """
        since = self.since[node]
        if now <= since:
            return
        self.since[node] = now
        if not jobs_on:
            return  # an idle node bills no one (and its overhead is the provider's)
        seconds = now - since
        capacity_cores, capacity_memory, capacity_gpus = self.capacity[node]
        threshold_cores, threshold_memory, threshold_gpus = self.thresholds[node]
        prices = self.prices[node]
        billable = self.billable[node]
        amount = (capacity_cores - units * threshold_cores) * seconds
        if amount > 0:
            billable[0] += amount
            held = capacity_cores - free[0]
            if held > 0:
                prices[0] += (amount << _SHARE_BITS) // held
            else:  # no job holds this resource: split it equally
                prices[3] += (amount << _SHARE_BITS) // jobs_on
        amount = (capacity_memory - units * threshold_memory) * seconds
        if amount > 0:
            billable[1] += amount
            held = capacity_memory - free[1]
            if held > 0:
                prices[1] += (amount << _SHARE_BITS) // held
            else:
                prices[4] += (amount << _SHARE_BITS) // jobs_on
        amount = (capacity_gpus - units * threshold_gpus) * seconds
        if amount > 0:
            billable[2] += amount
            held = capacity_gpus - free[2]
            if held > 0:
                prices[2] += (amount << _SHARE_BITS) // held
            else:
                prices[5] += (amount << _SHARE_BITS) // jobs_on

    def leave(
        self, job: int, node: int, held: tuple[int, int, int], arrived: tuple[int, ...]
    ) -> None:
        """Bill ``job`` for its time on ``node``, holding ``held`` since prices were ``arrived``."""
        prices = self.prices[node]
        cumulative = self.cumulative[node]
        emitted = self.emitted[node]
        for resource in 0, 1, 2:
            share = held[resource] * (prices[resource] - arrived[resource]) + (
                prices[resource + 3] - arrived[resource + 3]
            )
            if share:
                total = cumulative[resource] + share
                cumulative[resource] = total
                whole = (total + _SHARE_SLACK) >> _SHARE_BITS
                self.billed[resource][job] += whole - emitted[resource]
                emitted[resource] = whole
        self.last_job[node] = job

    def finish(
        self, placements: list[_Placement], window_end: int, free: list[list[int]],
        overhead: list[int], jobs_on: list[int],
    ) -> None:  # fmt: skip
        """Bill the jobs still running at the window's end; make every node's sum exact."""
        for node, state in enumerate(free):
            self.advance(node, window_end, state, overhead[node], jobs_on[node])
        for job in sorted(self.marks):
            for (node, *held), arrived in zip(placements[job], self.marks[job], strict=True):
                self.leave(job, node, (held[0], held[1], held[2]), arrived)
        self.marks.clear()
        for node, billable in enumerate(self.billable):
            # The fixed point's slack makes this 0; it is kept as a guarantee, not a fix-up.
            for resource in 0, 1, 2:
                missing = billable[resource] - self.emitted[node][resource]
                if missing:
                    self.billed[resource][self.last_job[node]] += missing
                    self.emitted[node][resource] += missing

    def shares(self, placed: _Placed) -> tuple[FairShare, ...]:
        cores, memory, gpus = self.billed
        result = []
        for job, (placement, (job_start, job_end)) in enumerate(
            zip(placed.placements, placed.spans, strict=True)
        ):
            if len(placement) == 1:
                _, held_cores, held_memory, held_gpus = placement[0]
            else:
                held_cores = held_memory = held_gpus = 0
                for _, node_cores, node_memory, node_gpus in placement:
                    held_cores += node_cores
                    held_memory += node_memory
                    held_gpus += node_gpus
            seconds = job_end - job_start
            result.append(
                FairShare(
                    placed.job_ids[job], held_cores * seconds, held_memory * seconds,
                    held_gpus * seconds, cores[job], memory[job], gpus[job],
                )
            )  # fmt: skip
        return tuple(result)


def _sweep(
    nodes: _Nodes,
    placed: _Placed,
    edges: list[int],
    window_start: int,
    window_end: int,
    fair: _FairShares | None = None,
) -> _Swept:
    """Replay the events in time order, keeping each node's free resources and overhead."""
    keys, job_bits = _event_keys(placed.spans, window_start, window_end)
    job_mask = (1 << job_bits) - 1
    placements = placed.placements
    node_partition = nodes.partition
    thresholds = nodes.thresholds
    partition_count = len(nodes.counts)
    free = [list(capacity) for capacity in nodes.capacity]
    jobs_on = [0] * len(free)
    overhead = [
        _overhead(capacity, t) for capacity, t in zip(nodes.capacity, thresholds, strict=True)
    ]
    # Accumulators are "anchored": a change at time t adds (new - old) * (anchor - t), so that
    # nothing needs the time of the previous change. Histogram and occupancy anchor at the
    # window's end, the series at the current bucket's end.
    swept = _Swept(
        series=[[] for _ in range(partition_count)],
        histograms=[[0] * (1 + max(overhead, default=0)) for _ in range(partition_count)],
        occupied_seconds=[0] * partition_count,
        occupied_unit_seconds=[0] * partition_count,
    )
    histograms = swept.histograms
    occupied_seconds = swept.occupied_seconds
    occupied_unit_seconds = swept.occupied_unit_seconds
    total_units = [0] * partition_count
    for node, units in enumerate(overhead):
        histograms[node_partition[node]][units] += window_end - window_start
        total_units[node_partition[node]] += units
    bucket = 0
    bucket_end = edges[1]
    bucket_units = [units * (bucket_end - edges[0]) for units in total_units]

    for key in keys:
        job_number = key & job_mask
        rest = key >> job_bits
        starting = rest & 1
        now = (rest >> 1) + window_start
        while now >= bucket_end:
            for position in range(partition_count):
                swept.series[position].append(bucket_units[position])
            bucket += 1
            bucket_start, bucket_end = bucket_end, edges[bucket + 1]
            bucket_units = [units * (bucket_end - bucket_start) for units in total_units]
        to_window_end = window_end - now
        to_bucket_end = bucket_end - now
        if fair is not None:
            arrivals = [] if starting else fair.marks.pop(job_number)
        for index, (node, cores, memory_mb, gpus) in enumerate(placements[job_number]):
            state = free[node]
            if fair is not None:
                fair.advance(node, now, state, overhead[node], jobs_on[node])
                if starting:
                    arrivals.append(tuple(fair.prices[node]))
                else:
                    fair.leave(job_number, node, (cores, memory_mb, gpus), arrivals[index])
            if starting:
                state[0] -= cores
                state[1] -= memory_mb
                state[2] -= gpus
                was_occupied = jobs_on[node] > 0
                jobs_on[node] += 1
                is_occupied = True
            else:
                state[0] += cores
                state[1] += memory_mb
                state[2] += gpus
                was_occupied = True
                jobs_on[node] -= 1
                is_occupied = jobs_on[node] > 0
            # true overhead = min_r floor(free_r / threshold_r), never below 0; this is
            # _overhead() written out, because it runs once per job-node event
            threshold_cores, threshold_memory, threshold_gpus = thresholds[node]
            units = _UNBOUNDED  # every unit has a threshold, so this never survives
            if threshold_cores:
                units = state[0] // threshold_cores
            if threshold_memory:
                count = state[1] // threshold_memory
                if count < units:
                    units = count
            if threshold_gpus:
                count = state[2] // threshold_gpus
                if count < units:
                    units = count
            if units < 0:
                units = 0
            before = overhead[node]
            position = node_partition[node]
            if units != before:
                overhead[node] = units
                histogram = histograms[position]
                histogram[before] -= to_window_end
                histogram[units] += to_window_end
                total_units[position] += units - before
                bucket_units[position] += (units - before) * to_bucket_end
            if was_occupied != is_occupied or units != before:
                occupied_unit_seconds[position] += (
                    (units if is_occupied else 0) - (before if was_occupied else 0)
                ) * to_window_end
                occupied_seconds[position] += (is_occupied - was_occupied) * to_window_end
        if fair is not None and starting:
            fair.marks[job_number] = arrivals

    if fair is not None:
        fair.finish(placements, window_end, free, overhead, jobs_on)
    while bucket < len(edges) - 1:
        for position in range(partition_count):
            swept.series[position].append(bucket_units[position])
        bucket += 1
        if bucket < len(edges) - 1:
            bucket_units = [units * (edges[bucket + 1] - edges[bucket]) for units in total_units]
    return swept


def true_overhead_report(
    *,
    jobs: Iterable[NodeJob],
    partitions: Sequence[OverheadPartition],
    start: datetime,
    end: datetime,
    step: Step | str = Step.HOUR,
    timezone: str | tzinfo = "UTC",
    fair_shares: bool = False,
) -> OverheadReport:
    """True overhead per partition over ``[start, end)``: series, histogram, fair billing.

    Node occupancy is rebuilt from the jobs' node lists (expanded with ``python-hostlist``) by
    one sweep over start and end events, ends before starts at the same second. Buckets are
    those of :func:`accounting.utilisation.quality.bucket_boundaries` (``step`` in ``timezone``).
    With ``fair_shares``, the report also bills every placed job its section 3.3 share
    (:class:`FairShare`, in the order the jobs came); the aggregates are the same either way.
    Cost: O(E log E) for E job events, plus O(job-node pairs + nodes + buckets * partitions).
    """
    window_start, window_end = epoch_seconds(start), epoch_seconds(end)
    if window_end <= window_start:
        raise CanonicalError("a window must end after it starts")
    edges = [
        epoch_seconds(edge)
        for edge in bucket_boundaries(start=start, end=end, step=step, timezone=timezone)
    ]
    nodes = _Nodes(partitions)
    with collector_paused():
        placed = _place(jobs, nodes, window_start, window_end)
        fair = _FairShares(nodes, len(placed.placements), window_start) if fair_shares else None
        swept = _sweep(nodes, placed, edges, window_start, window_end, fair)
        shares = fair.shares(placed) if fair is not None else ()

    report: dict[str, PartitionOverhead] = {}
    for position, partition in enumerate(partitions):
        unit = partition.canonical_unit
        threshold_cores, threshold_memory, threshold_gpus = unit.thresholds
        capacity = partition.node
        occupied = swept.occupied_seconds[position]
        occupied_units = swept.occupied_unit_seconds[position]
        report[partition.name] = PartitionOverhead(
            name=partition.name,
            unit=unit,
            node_count=nodes.counts[position],
            buckets=tuple(
                OverheadBucket(
                    from_epoch_seconds(edges[index]),
                    from_epoch_seconds(edges[index + 1]),
                    unit_seconds,
                )
                for index, unit_seconds in enumerate(swept.series[position])
            ),
            histogram=MappingProxyType(
                {
                    units: seconds
                    for units, seconds in enumerate(swept.histograms[position])
                    if seconds
                }
            ),
            occupied_node_seconds=occupied,
            allocated=ResourceSeconds(*placed.allocated[position]),
            # section 3.3: capacity minus true overhead, on occupied nodes only
            billable=ResourceSeconds(
                capacity.cores * occupied - threshold_cores * occupied_units,
                capacity.memory_mb * occupied - threshold_memory * occupied_units,
                capacity.gpus * occupied - threshold_gpus * occupied_units,
            ),
        )
    return OverheadReport(
        start=from_epoch_seconds(window_start),
        end=from_epoch_seconds(window_end),
        partitions=MappingProxyType(report),
        unplaced=tuple(placed.unplaced),
        fair_shares=shares,
    )


def overhead_reports_combine(
    *, reports: Sequence[OverheadReport], step: Step | str = Step.HOUR,
    timezone: str | tzinfo = "UTC",
) -> OverheadReport:  # fmt: skip
    """One report over consecutive windows, e.g. a window cut where a partition's nodes changed.

    Series, histograms and resource-seconds add up; a cut inside a bucket adds both parts to
    that bucket (buckets are aligned to ``step`` in ``timezone`` whatever the window's start).
    A partition's unit and node count are those of the last window it appears in. A job's fair
    shares add up over the windows, each rounded on its own (so within one unit per window of
    a single sweep over the whole). A job unplaced in any window is reported once.
    """
    if not reports:
        raise CanonicalError("nothing to combine")
    for before, after in itertools.pairwise(reports):
        if before.end != after.start:
            raise CanonicalError("the windows to combine must follow each other")
    start, end = reports[0].start, reports[-1].end
    edges = [
        epoch_seconds(edge)
        for edge in bucket_boundaries(start=start, end=end, step=step, timezone=timezone)
    ]
    combined: dict[str, dict[str, Any]] = {}
    for report in reports:
        for name, part in report.partitions.items():
            into = combined.setdefault(
                name,
                {"series": [0] * (len(edges) - 1), "histogram": {}, "occupied": 0,
                 "allocated": [0, 0, 0], "billable": [0, 0, 0]},
            )  # fmt: skip
            into["unit"], into["node_count"] = part.unit, part.node_count
            for bucket in part.buckets:
                index = bisect.bisect_right(edges, epoch_seconds(bucket.start)) - 1
                into["series"][index] += bucket.unit_seconds
            for units, seconds in part.histogram.items():
                into["histogram"][units] = into["histogram"].get(units, 0) + seconds
            into["occupied"] += part.occupied_node_seconds
            for totals, amounts in (
                (into["allocated"], part.allocated),
                (into["billable"], part.billable),
            ):
                totals[0] += amounts.core_seconds
                totals[1] += amounts.memory_mb_seconds
                totals[2] += amounts.gpu_seconds
    partitions = {
        name: PartitionOverhead(
            name=name,
            unit=values["unit"],
            node_count=values["node_count"],
            buckets=tuple(
                OverheadBucket(
                    from_epoch_seconds(edges[index]), from_epoch_seconds(edges[index + 1]), units
                )
                for index, units in enumerate(values["series"])
            ),
            histogram=MappingProxyType(dict(sorted(values["histogram"].items()))),
            occupied_node_seconds=values["occupied"],
            allocated=ResourceSeconds(*values["allocated"]),
            billable=ResourceSeconds(*values["billable"]),
        )
        for name, values in combined.items()
    }
    shares: dict[str, list[int]] = {}
    for report in reports:
        for share in report.fair_shares:
            totals = shares.setdefault(share.job_id, [0] * 6)
            for index, amount in enumerate(
                (*dataclasses.astuple(share.allocated), *dataclasses.astuple(share.billed))
            ):
                totals[index] += amount
    unplaced: dict[str, UnplacedJob] = {}
    for report in reports:
        for job in report.unplaced:
            unplaced.setdefault(job.job_id, job)
    return OverheadReport(
        start=start,
        end=end,
        partitions=MappingProxyType(partitions),
        unplaced=tuple(unplaced.values()),
        fair_shares=tuple(FairShare(job_id, *totals) for job_id, totals in shares.items()),
    )


def _expand(nodelist: str, node_index: Mapping[str, int]) -> tuple[int, ...] | str:
    """Node indices of a Slurm node list, or the reason it cannot be placed."""
    if not nodelist or nodelist in {"None", "None assigned", "(null)"}:
        return "no node list"
    try:
        hosts = hostlist.expand_hostlist(nodelist)
    except hostlist.BadHostlist as error:
        return f"bad node list {nodelist!r} ({error})"
    indices = []
    for host in hosts:
        index = node_index.get(host)
        if index is None:
            return f"node {host!r} is in no partition"
        indices.append(index)
    if len(set(indices)) != len(indices):
        return f"node list {nodelist!r} names a node twice"
    return tuple(indices)

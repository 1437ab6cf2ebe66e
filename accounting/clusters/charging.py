"""The charging engine: service units (SU) for jobs, energy paper section IV (DESIGN section 3).

Pure maths over small frozen dataclasses: no Django, no settings, no ORM.

A partition is described by a :class:`PartitionSpec`; a job by what it holds on each of its nodes
(:class:`NodeUsage`, or :func:`split_evenly` for sacct's job totals) and its elapsed seconds.
:func:`charge` prices the job with one of the :data:`MODELS`; the default is the energy-based
max-fraction model, ``SU = w * t * sum_i max(f_c, f_g, f_m, ...)`` (eq 1).

Exactness: no floats anywhere. Shares are counted in whole units of ``1 / (C * max(G, 1))`` of a
node (eq 9 makes memory a whole number of core-equivalents), so every model's charge is one ratio
of integers, divided once and rounded half-even to :data:`SU_QUANTUM` (no intermediate rounding).
Integer and decimal inputs are used as given; only shares that are themselves non-terminating
decimals (10 cores split over 3 nodes) meet the decimal context's 28 digits. The fractions shown in
:class:`NodeFractions` are for display, at the context's precision.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, Context, Decimal, InvalidOperation
from fractions import Fraction
from functools import cached_property, lru_cache
from operator import itemgetter
from types import MappingProxyType
from typing import ClassVar, Final, NoReturn

from kit.errors import ApplicationError

SU_QUANTUM: Final = Decimal("0.000001")
"""Ledger precision: SU are stored with 6 decimal places; round only here and for display."""

SECONDS_PER_HOUR: Final = 3600
MIB_PER_GIB: Final = 1024

_QUANTUM_SCALE: Final = 10**6  # 1 / SU_QUANTUM
_ZERO: Final = Decimal(0)
_ONE: Final = Decimal(1)
_EXACT_TYPES: Final = frozenset({int, Decimal})
_BUILT_IN_RESOURCES: Final = ("gpus", "cores", "memory")  # also the tie order of `dominant`

# Per-node shares of a job split over nodes (10 cores on 3 nodes) rarely terminate; rounding them
# down keeps a share that is exactly on a memory boundary from spilling into the next
# core-equivalent (eq 9), and 28 digits keep the error far below SU_QUANTUM.
_SPLIT_CONTEXT: Final = Context(prec=28, rounding=ROUND_DOWN)


class SpecError(ApplicationError):
    """A partition spec that cannot be charged against; the message names the field."""


class ChargeError(ApplicationError):
    """A job (or its usage) that cannot be charged on that partition; the message says why."""


class _FrozenMap(Mapping[str, Decimal]):
    """A read-only, hashable mapping, so that frozen specs can key a cache."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Decimal] | None = None) -> None:
        self._items: dict[str, Decimal] = dict(items) if items else {}

    def __getitem__(self, key: str) -> Decimal:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)


_EMPTY: Final[Mapping[str, Decimal]] = _FrozenMap()


def _spec_decimal(field_name: str, value: object) -> Decimal:
    # Floats would make charges inexact; ints are exact, so they are accepted and converted.
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    raise SpecError(f"{field_name} must be a Decimal or an int, got {value!r}")


@dataclass(frozen=True)
class PartitionSpec:
    """The hardware of one node of a partition (all nodes of a partition are identical).

    ``memory_mb`` is MiB per node (Slurm's "MB"); TDP and peak FLOP/s are per socket and per GPU
    device. ``node_local`` holds the per-node capacity of further node-local resources (IV-E),
    e.g. ``{"nvme_gb": Decimal(3500)}``: a job's use of them becomes one more share in eq 1.
    """

    name: str
    sockets: int
    cores_per_socket: int
    memory_mb: int
    gpus: int = 0
    cpu_tdp_watts: Decimal = _ZERO
    gpu_tdp_watts: Decimal = _ZERO
    gpu_streaming_multiprocessors: int = 0
    cpu_peak_flops: Decimal | None = None
    gpu_peak_flops: Decimal | None = None
    node_local: Mapping[str, Decimal] = _EMPTY
    weight_override: Decimal | None = None

    def __post_init__(self) -> None:
        # Normalise so that equal specs hash equal and a caller's dict cannot change under us.
        for name in ("cpu_tdp_watts", "gpu_tdp_watts"):
            object.__setattr__(self, name, _spec_decimal(name, getattr(self, name)))
        for name in ("cpu_peak_flops", "gpu_peak_flops", "weight_override"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _spec_decimal(name, value))
        if not isinstance(self.node_local, Mapping):
            raise SpecError(
                f"node_local must be a mapping of resource name to capacity, got "
                f"{self.node_local!r}"
            )
        capacities = {
            name: _spec_decimal(f"node_local[{name!r}]", capacity)
            for name, capacity in self.node_local.items()
        }
        object.__setattr__(self, "node_local", _FrozenMap(capacities) if capacities else _EMPTY)

    @cached_property
    def _charging_constants(self) -> _Partition:
        # Validated constants, kept on the (immutable) spec after the first charge.
        return _partition_for(self)

    @property
    def cores(self) -> int:
        """C: cores per node, summed over sockets (eq 16)."""
        return self.sockets * self.cores_per_socket

    @property
    def memory_per_core_mb(self) -> Decimal:
        """M / C (eq 8): the memory that one core-equivalent of charge buys."""
        return Decimal(self.memory_mb) / self.cores

    @property
    def is_gpu(self) -> bool:
        """Whether the partition's nodes have GPUs (and so the eq 15 weight)."""
        return self.gpus > 0

    @property
    def node_cpu_tdp_watts(self) -> Decimal:
        """Sum of the CPU TDPs of one node (sum_i E_c^i)."""
        return self.sockets * self.cpu_tdp_watts

    @property
    def node_gpu_tdp_watts(self) -> Decimal:
        """Sum of the GPU TDPs of one node (sum_j E_g^j)."""
        return self.gpus * self.gpu_tdp_watts

    def validate(self) -> None:
        """Raise :class:`SpecError`, naming the field, unless every model can charge on this spec.

        Model-specific data (SM counts, peak FLOP/s) is checked by the model that needs it.
        """
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpecError(f"name must be a non-empty string, got {self.name!r}")
        for name in ("sockets", "cores_per_socket", "memory_mb"):
            _require_int(name, getattr(self, name), minimum=1)
        for name in ("gpus", "gpu_streaming_multiprocessors"):
            _require_int(name, getattr(self, name), minimum=0)
        for name in ("cpu_tdp_watts", "gpu_tdp_watts"):
            _require_decimal(name, getattr(self, name), positive=False)
        if self.gpus > 0:
            # eq 15 divides by the CPU TDP and a GPU node must cost more than nothing.
            if self.gpu_tdp_watts <= 0:
                raise SpecError("gpu_tdp_watts must be positive on a GPU partition (eq 15)")
            if self.cpu_tdp_watts <= 0:
                raise SpecError("cpu_tdp_watts must be positive on a GPU partition (eq 15)")
        for name in ("cpu_peak_flops", "gpu_peak_flops", "weight_override"):
            value = getattr(self, name)
            if value is not None:
                _require_decimal(name, value, positive=True)
        for resource, capacity in self.node_local.items():
            if not isinstance(resource, str) or not resource.strip():
                raise SpecError(f"node_local names must be non-empty strings, got {resource!r}")
            if resource in _BUILT_IN_RESOURCES:
                raise SpecError(f"node_local[{resource!r}] clashes with a built-in resource")
            _require_decimal(f"node_local[{resource!r}]", capacity, positive=True)


def _require_int(field_name: str, value: object, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
        raise SpecError(f"{field_name} must be {kind}, got {value!r}")


def _require_decimal(field_name: str, value: Decimal, *, positive: bool) -> None:
    if not value.is_finite() or value < 0 or (positive and value == 0):
        bound = "positive" if positive else "non-negative"
        raise SpecError(f"{field_name} must be a finite {bound} number, got {value}")


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """What a job holds on ONE node: cores, memory (MiB), GPUs and node-local resources."""

    cores: Decimal | int
    memory_mb: Decimal | int
    gpus: Decimal | int = 0
    node_local: Mapping[str, Decimal] = _EMPTY


MAX_JOB_NODES = 1_000_000
"""More nodes than any job can hold: the largest machines have about 10^5. A count above it (a
crafted sacct line, a typed-in quote) is refused here, before a tuple of that many nodes is
built (two billion of them exhausted the memory of the process)."""


def split_evenly(
    *,
    nodes: int,
    cores: Decimal | int,
    memory_mb: Decimal | int,
    gpus: Decimal | int = 0,
    node_local: Mapping[str, Decimal] | None = None,
) -> tuple[NodeUsage, ...]:
    """Spread a job's totals (sacct ``AllocTRES``) evenly over its ``nodes``.

    Shares that do not divide evenly become decimals, rounded down at 28 significant digits.
    """
    if nodes.__class__ is not int or nodes < 1:
        raise ChargeError(f"a job must hold at least one node, got nodes={nodes!r}")
    if nodes > MAX_JOB_NODES:
        raise ChargeError(
            f"a job of {nodes:,} nodes is more than any cluster has (at most {MAX_JOB_NODES:,})"
        )
    if nodes == 1:
        return (
            NodeUsage(cores, memory_mb, gpus, _FrozenMap(node_local) if node_local else _EMPTY),
        )
    per_node = NodeUsage(
        cores=_split("cores", cores, nodes),
        memory_mb=_split("memory_mb", memory_mb, nodes),
        gpus=_split("gpus", gpus, nodes),
        node_local=(
            _FrozenMap(
                {name: Decimal(_split(name, used, nodes)) for name, used in node_local.items()}
            )
            if node_local
            else _EMPTY
        ),
    )
    return (per_node,) * nodes


def _split(name: str, total: Decimal | int, nodes: int) -> Decimal | int:
    if total.__class__ is int:
        if total % nodes == 0:
            return total // nodes
    elif total.__class__ is not Decimal:
        raise ChargeError(f"{name} must be an int or a Decimal, got {total!r}")
    return _SPLIT_CONTEXT.divide(total, nodes)


@dataclass(frozen=True, slots=True)
class NodeFractions:
    """The fraction of one node's cores, memory, GPUs and node-local resources a job held."""

    cores: Decimal
    memory: Decimal
    gpus: Decimal
    node_local: Mapping[str, Decimal]

    @property
    def share(self) -> Decimal:
        """max(f_c, f_g, f_m, ...): how much of the node the job took from others (eq 1)."""
        return max(self.cores, self.memory, self.gpus, *self.node_local.values())

    @property
    def dominant(self) -> str:
        """The resource that set :attr:`share` (ties: gpus, cores, memory, node-local by name)."""
        candidates = [
            ("gpus", self.gpus),
            ("cores", self.cores),
            ("memory", self.memory),
            *sorted(self.node_local.items()),
        ]
        return max(candidates, key=itemgetter(1))[0]


@dataclass(frozen=True, slots=True)
class Charge:
    """The price of a job under one model, with the breakdown shown to users.

    ``weight`` is the model's SU per node-hour on this partition (for the linear model: the SU of
    one whole node for an hour). ``energy_wh`` is the TDP-share estimate of eq 29, the same for
    every model: ``hours * sum(node share) * node TDP`` where the node TDP is the GPUs' on a GPU
    partition and the CPUs' on a CPU partition; rounded to 6 decimal places like SU.
    """

    model: str
    service_units: Decimal
    weight: Decimal
    hours: Decimal
    nodes: tuple[NodeFractions, ...]
    dominant_resource: str
    energy_wh: Decimal


# --------------------------------------------------------------------------------------------
# Per-partition constants, computed once per spec


@dataclass(frozen=True, slots=True)
class _Partition:
    spec: PartitionSpec
    cores: int  # C
    gpus: int  # G
    gpu_scale: int  # max(G, 1)
    memory_mb: int  # M
    # Shares are counted in units of 1 / (C * max(G, 1)) of a node: f_c, f_g and the ceiling
    # fractions of eq 9 are all whole multiples of it (for whole cores and GPUs).
    share_scale: int
    node_local: Mapping[str, Decimal]
    node_local_names: tuple[str, ...]
    # k / C and g / G for every whole k and g, so that fractions need no division per job
    core_fractions: tuple[Decimal, ...]
    gpu_fractions: tuple[Decimal, ...]
    tdp_watts: tuple[int, int]  # the node TDP that eq 29 counts, as an integer ratio
    energy_weight: tuple[Decimal, Decimal]
    energy_weight_ints: tuple[int, int]
    energy_weight_value: Decimal


def _ratio_ints(numerator: Decimal | int, denominator: Decimal | int) -> tuple[int, int]:
    """numerator / denominator as a pair of ints, exactly."""
    top_numerator, top_denominator = numerator.as_integer_ratio()
    bottom_numerator, bottom_denominator = denominator.as_integer_ratio()
    return top_numerator * bottom_denominator, top_denominator * bottom_numerator


@lru_cache(maxsize=1024)
def _partition_for(spec: PartitionSpec) -> _Partition:
    # Shared between equal specs (a spec rebuilt from the database for every job).
    spec.validate()
    cores, gpus = spec.cores, spec.gpus
    if gpus:
        # eq 15: w = (sum_j E_g^j / sum_i E_c^i) * C, kept as a ratio so it stays exact.
        weight = (spec.node_gpu_tdp_watts * cores, spec.node_cpu_tdp_watts)
        tdp_watts = spec.node_gpu_tdp_watts
    else:
        weight = (Decimal(cores), _ONE)  # IV-B: one core-hour, one SU
        tdp_watts = spec.node_cpu_tdp_watts
    gpu_scale = max(gpus, 1)
    return _Partition(
        spec=spec,
        cores=cores,
        gpus=gpus,
        gpu_scale=gpu_scale,
        memory_mb=spec.memory_mb,
        share_scale=cores * gpu_scale,
        node_local=spec.node_local,
        node_local_names=tuple(sorted(spec.node_local)),
        core_fractions=tuple(Decimal(k) / cores for k in range(cores + 1)),
        gpu_fractions=tuple(Decimal(g) / gpus for g in range(gpus + 1)) if gpus else (_ZERO,),
        tdp_watts=tdp_watts.as_integer_ratio(),
        energy_weight=weight,
        energy_weight_ints=_ratio_ints(*weight),
        energy_weight_value=weight[0] / weight[1],
    )


def _partition(spec: PartitionSpec) -> _Partition:
    return spec._charging_constants


def energy_weight(spec: PartitionSpec) -> Decimal:
    """The derived energy-model weight w in SU per node-hour, ignoring any staff override.

    CPU partition: ``w = C`` (IV-B). GPU partition: ``w = (sum_j E_g^j / sum_i E_c^i) * C``
    (eq 15); e.g. Setonix GPU node ``8 * 280 W / 280 W * 64 = 512``.
    """
    return _partition(spec).energy_weight_value


# --------------------------------------------------------------------------------------------
# Measuring a job: the fractions of eq 1, counted exactly


# A job measured: the fractions of each node, sum_i max(f^i) * C * max(G, 1) as an integer ratio,
# and the dominant resource.
_Measurement = tuple[tuple[NodeFractions, ...], tuple[int, int], str]

# What one node contributes: units of cores, GPUs, memory and each node-local resource (in the
# partition's name order), the largest of them (eq 1), and the fractions shown to users.
_NodeMeasure = tuple[
    Decimal | int, Decimal | int, int, tuple[int, ...], Decimal | int, NodeFractions
]


def _measure(partition: _Partition, nodes: Sequence[NodeUsage]) -> _Measurement:
    if not nodes:
        raise ChargeError("a job must hold at least one node; the node list is empty")
    if len(nodes) == 1:  # most jobs
        core_units, gpu_units, memory_units, local_units, share_units, fractions = _measure_node(
            1, partition, nodes[0]
        )
        dominant = _dominant(partition, gpu_units, core_units, memory_units, local_units)
        return (fractions,), share_units.as_integer_ratio(), dominant
    core_units_total: Decimal | int = 0
    gpu_units_total: Decimal | int = 0
    memory_units_total = 0
    local_units_total = [0] * len(partition.node_local_names)
    share_units_total: Decimal | int = 0
    node_fractions = []
    previous = None
    for index, node in enumerate(nodes, start=1):
        # split_evenly repeats one NodeUsage for every node: measure it once.
        if node is not previous:
            measured = _measure_node(index, partition, node)
            previous = node
        core_units, gpu_units, memory_units, local_units, share_units, fractions = measured
        core_units_total += core_units
        gpu_units_total += gpu_units
        memory_units_total += memory_units
        share_units_total += share_units
        for position, units in enumerate(local_units):
            local_units_total[position] += units
        node_fractions.append(fractions)
    dominant = _dominant(
        partition, gpu_units_total, core_units_total, memory_units_total, local_units_total
    )
    return tuple(node_fractions), share_units_total.as_integer_ratio(), dominant


def _dominant(
    partition: _Partition,
    gpu_units: Decimal | int,
    core_units: Decimal | int,
    memory_units: int,
    local_units: Sequence[int],
) -> str:
    """The resource with the largest (summed) share; ties: gpus, cores, memory, node-local."""
    dominant, largest = "gpus", gpu_units
    if core_units > largest:
        dominant, largest = "cores", core_units
    if memory_units > largest:
        dominant, largest = "memory", memory_units
    for name, units in zip(partition.node_local_names, local_units, strict=True):
        if units > largest:
            dominant, largest = name, units
    return dominant


def _measure_node(index: int, partition: _Partition, node: NodeUsage) -> _NodeMeasure:
    cores, memory_mb, gpus = node.cores, node.memory_mb, node.gpus
    if (
        cores.__class__ not in _EXACT_TYPES
        or memory_mb.__class__ not in _EXACT_TYPES
        or gpus.__class__ not in _EXACT_TYPES
    ):
        # Floats would make the charge inexact (and bools are no counts).
        for field_name, value in (("cores", cores), ("memory_mb", memory_mb), ("gpus", gpus)):
            if value.__class__ not in _EXACT_TYPES:
                raise ChargeError(
                    f"node {index}: {field_name} must be an int or a Decimal, got {value!r}"
                )
    cores_per_node, gpu_scale = partition.cores, partition.gpu_scale
    try:
        if not (
            0 < cores <= cores_per_node
            and 0 <= memory_mb <= partition.memory_mb
            and 0 <= gpus <= partition.gpus
        ):
            _refuse_node(index, partition, cores, memory_mb, gpus)
        # eqs 8-9: memory is charged in whole core-equivalents of M / C, i.e.
        # ceil(mem / (M / C)) = ceil(mem * C / M); f_m is that over C. (Decimal's divmod is exact.)
        quotient, remainder = divmod(memory_mb * cores_per_node, partition.memory_mb)
        memory_equivalents = int(quotient) + 1 if remainder else int(quotient)
        core_units = cores * gpu_scale
        gpu_units = gpus * cores_per_node
        memory_units = memory_equivalents * gpu_scale
        share_units = max(core_units, gpu_units, memory_units)
        local_units: tuple[int, ...] = ()
        local_fractions = _EMPTY
        if partition.node_local_names or (node.node_local is not _EMPTY and node.node_local):
            # IV-E: further node-local resources are more arguments of max in eq 1, charged in
            # core-equivalents like memory.
            local_equivalents = _node_local_equivalents(index, partition, node.node_local)
            local_units = tuple(equivalents * gpu_scale for equivalents in local_equivalents)
            share_units = max(share_units, *local_units)
            local_fractions = _FrozenMap(
                {
                    name: partition.core_fractions[equivalents]
                    for name, equivalents in zip(
                        partition.node_local_names, local_equivalents, strict=True
                    )
                }
            )
    except InvalidOperation:
        raise ChargeError(f"node {index}: usage must be finite numbers, got {node!r}") from None
    fractions = NodeFractions(
        cores=(
            partition.core_fractions[cores] if isinstance(cores, int) else cores / cores_per_node
        ),
        memory=partition.core_fractions[memory_equivalents],
        gpus=(
            partition.gpu_fractions[gpus]
            if isinstance(gpus, int)
            else (gpus / partition.gpus if partition.gpus else _ZERO)
        ),
        node_local=local_fractions,
    )
    return core_units, gpu_units, memory_units, local_units, share_units, fractions


def _refuse_node(
    index: int,
    partition: _Partition,
    cores: Decimal | int,
    memory_mb: Decimal | int,
    gpus: Decimal | int,
) -> NoReturn:
    """Raise the ChargeError that says what is wrong with a node's usage."""
    name = partition.spec.name
    if not cores > 0:
        raise ChargeError(f"node {index}: cores must be positive, got {cores}")
    if cores > partition.cores:
        raise ChargeError(
            f"node {index}: {cores} cores requested but a node of partition {name!r} "
            f"has {partition.cores}"
        )
    if memory_mb < 0:
        raise ChargeError(f"node {index}: memory_mb must not be negative, got {memory_mb}")
    if memory_mb > partition.memory_mb:
        raise ChargeError(
            f"node {index}: {memory_mb} MB of memory requested but a node of partition "
            f"{name!r} has {partition.memory_mb} MB"
        )
    if gpus < 0:
        raise ChargeError(f"node {index}: gpus must not be negative, got {gpus}")
    if not partition.gpus:
        raise ChargeError(
            f"node {index}: {gpus} GPUs requested on partition {name!r}, which has no GPUs"
        )
    raise ChargeError(
        f"node {index}: {gpus} GPUs requested but a node of partition {name!r} has {partition.gpus}"
    )


def _node_local_equivalents(
    index: int, partition: _Partition, used: Mapping[str, Decimal]
) -> list[int]:
    """Core-equivalents of each node-local resource, in the partition's name order."""
    capacities = partition.node_local
    unknown = sorted(set(used) - set(capacities))
    if unknown:
        known = ", ".join(partition.node_local_names) or "none"
        raise ChargeError(
            f"node {index}: unknown node-local resource {unknown[0]!r} on partition "
            f"{partition.spec.name!r} (known: {known})"
        )
    equivalents = []
    for name in partition.node_local_names:
        amount = used.get(name, 0)
        if amount.__class__ not in _EXACT_TYPES:
            raise ChargeError(f"node {index}: {name} must be an int or a Decimal, got {amount!r}")
        if amount < 0:
            raise ChargeError(f"node {index}: {name} must not be negative, got {amount}")
        capacity = capacities[name]
        if amount > capacity:
            raise ChargeError(
                f"node {index}: {amount} {name} requested but a node of partition "
                f"{partition.spec.name!r} has {capacity}"
            )
        # ceil(used / (capacity / C)), as for memory (eq 9)
        quotient, remainder = divmod(amount * partition.cores, capacity)
        equivalents.append(int(quotient) + 1 if remainder else int(quotient))
    return equivalents


def _check_elapsed(elapsed_seconds: int) -> None:
    if elapsed_seconds.__class__ is not int:
        raise ChargeError(f"elapsed_seconds must be an int, got {elapsed_seconds!r}")
    if elapsed_seconds < 0:
        raise ChargeError(f"elapsed_seconds must not be negative, got {elapsed_seconds}")


def _round_to_quantum(numerator: int, denominator: int) -> Decimal:
    """numerator / denominator rounded half-even to SU_QUANTUM: exact, no double rounding."""
    quanta, remainder = divmod(numerator * _QUANTUM_SCALE, denominator)
    twice = remainder + remainder
    if twice > denominator or (twice == denominator and quanta & 1):
        quanta += 1
    return Decimal(quanta).scaleb(-6)


# --------------------------------------------------------------------------------------------
# Charging models


class ChargingModel(ABC):
    """One way of pricing a job; every model takes the same inputs (spec, nodes, time)."""

    name: ClassVar[str]

    def weight_ratio(self, spec: PartitionSpec) -> tuple[Decimal, Decimal]:
        """This model's SU per node-hour on ``spec`` as (numerator, denominator), exactly."""
        return self._weight(_partition(spec))

    def weight(self, spec: PartitionSpec) -> Decimal:
        """This model's SU per node-hour on ``spec``."""
        return self._weight_value(_partition(spec))

    def charge(
        self, spec: PartitionSpec, nodes: Sequence[NodeUsage], elapsed_seconds: int
    ) -> Charge:
        """Price a job that held ``nodes`` of partition ``spec`` for ``elapsed_seconds``."""
        partition = _partition(spec)
        _check_elapsed(elapsed_seconds)
        fractions, share_units, dominant_resource = _measure(partition, nodes)
        numerator, denominator = self._service_units_ratio(
            partition, nodes, share_units, elapsed_seconds
        )
        # eq 29 for the share of the node the job held: hours * sum(share) * node TDP
        share_numerator, share_denominator = share_units
        tdp_numerator, tdp_denominator = partition.tdp_watts
        energy_wh = _round_to_quantum(
            tdp_numerator * elapsed_seconds * share_numerator,
            tdp_denominator * SECONDS_PER_HOUR * partition.share_scale * share_denominator,
        )
        return Charge(
            model=self.name,
            service_units=_round_to_quantum(numerator, denominator),
            weight=self._weight_value(partition),
            hours=Decimal(elapsed_seconds) / SECONDS_PER_HOUR,
            nodes=fractions,
            dominant_resource=dominant_resource,
            energy_wh=energy_wh,
        )

    def service_units(
        self, spec: PartitionSpec, nodes: Sequence[NodeUsage], elapsed_seconds: int
    ) -> Decimal:
        """:meth:`charge`'s ``service_units`` alone, to the last place, without the breakdown
        (a second pricing of a job, as for its right-sized request, needs only the SU)."""
        partition = _partition(spec)
        _check_elapsed(elapsed_seconds)
        _, share_units, _ = _measure(partition, nodes)
        return _round_to_quantum(
            *self._service_units_ratio(partition, nodes, share_units, elapsed_seconds)
        )

    @abstractmethod
    def _weight(self, partition: _Partition) -> tuple[Decimal, Decimal]:
        """SU per node-hour as (numerator, denominator)."""

    def _weight_value(self, partition: _Partition) -> Decimal:
        numerator, denominator = self._weight(partition)
        return numerator if denominator == 1 else numerator / denominator

    def _weight_ints(self, partition: _Partition) -> tuple[int, int]:
        return _ratio_ints(*self._weight(partition))

    @abstractmethod
    def _service_units_ratio(
        self,
        partition: _Partition,
        nodes: Sequence[NodeUsage],
        share_units: tuple[int, int],
        elapsed_seconds: int,
    ) -> tuple[int, int]:
        """The job's SU as an exact ratio of ints."""


class MaxFractionModel(ChargingModel):
    """Models of the form ``SU = w * t * sum_i max(f_c, f_g, f_m, ...)`` (eq 1); only w differs."""

    def _service_units_ratio(
        self,
        partition: _Partition,
        nodes: Sequence[NodeUsage],
        share_units: tuple[int, int],
        elapsed_seconds: int,
    ) -> tuple[int, int]:
        weight_numerator, weight_denominator = self._weight_ints(partition)
        share_numerator, share_denominator = share_units
        return (
            weight_numerator * elapsed_seconds * share_numerator,
            weight_denominator * SECONDS_PER_HOUR * partition.share_scale * share_denominator,
        )


class EnergyModel(MaxFractionModel):
    """The energy-based model (section IV): w = C on CPU nodes, eq 15 on GPU nodes.

    A staff override of w, when the spec has one, replaces the derived weight.
    """

    name = "energy"

    def _weight(self, partition: _Partition) -> tuple[Decimal, Decimal]:
        override = partition.spec.weight_override
        if override is not None:
            return override, _ONE
        return partition.energy_weight

    def _weight_value(self, partition: _Partition) -> Decimal:
        override = partition.spec.weight_override
        return partition.energy_weight_value if override is None else override

    def _weight_ints(self, partition: _Partition) -> tuple[int, int]:
        override = partition.spec.weight_override
        return partition.energy_weight_ints if override is None else override.as_integer_ratio()


class SMModel(MaxFractionModel):
    """Titan's model (III-B2, eq 17): 1 SU per core and per GPU streaming multiprocessor.

    CPU partition: w = C. GPU partition: w = gpus * SMs per GPU (the paper's GPU node weight,
    432 for 4 x A100, does not add the node's cores).
    """

    name = "sm"

    def _weight(self, partition: _Partition) -> tuple[Decimal, Decimal]:
        if not partition.gpus:
            return Decimal(partition.cores), _ONE
        streaming_multiprocessors = partition.spec.gpu_streaming_multiprocessors
        if streaming_multiprocessors <= 0:
            raise SpecError(
                "gpu_streaming_multiprocessors must be positive for the SM model (eq 17)"
            )
        return Decimal(partition.gpus * streaming_multiprocessors), _ONE  # eq 17


class PeakModel(MaxFractionModel):
    """Peak-performance model (eq 22): CPU partition w = C; GPU partition w = T_g / T_c * C.

    T_g = gpus * GPU peak and T_c = sockets * CPU peak are node peaks (eqs 18-21).
    """

    name = "peak"

    def _weight(self, partition: _Partition) -> tuple[Decimal, Decimal]:
        if not partition.gpus:
            return Decimal(partition.cores), _ONE
        spec = partition.spec
        cpu_peak, gpu_peak = spec.cpu_peak_flops, spec.gpu_peak_flops
        if cpu_peak is None:
            raise SpecError("cpu_peak_flops is required for the peak model (eq 22)")
        if gpu_peak is None:
            raise SpecError("gpu_peak_flops is required for the peak model (eq 22)")
        # eq 22, multiplied out before the one division so that 465.6 stays 465.6
        return partition.gpus * gpu_peak * partition.cores, spec.sockets * cpu_peak


class CoreHourModel(ChargingModel):
    """Cores times hours and nothing else: 1 SU per core-hour (reported weight: C per node-hour)."""

    name = "core-hour"

    def _weight(self, partition: _Partition) -> tuple[Decimal, Decimal]:
        return Decimal(partition.cores), _ONE

    def _service_units_ratio(
        self,
        partition: _Partition,
        nodes: Sequence[NodeUsage],
        share_units: tuple[int, int],
        elapsed_seconds: int,
    ) -> tuple[int, int]:
        core_numerator, core_denominator = sum(node.cores for node in nodes).as_integer_ratio()
        return core_numerator * elapsed_seconds, core_denominator * SECONDS_PER_HOUR


class WholeNodeModel(ChargingModel):
    """Exclusive nodes (III-A1): every node of the job is charged whole, ``SU = w * t * n``.

    Magnus charged core-hours of whole nodes, w = C, the default. Archer2's CU is one node-hour:
    ``WholeNodeModel(node_weight=Decimal(1))``.
    """

    name = "whole-node"

    def __init__(self, node_weight: Decimal | None = None) -> None:
        if node_weight is not None:
            node_weight = _spec_decimal("node_weight", node_weight)
            _require_decimal("node_weight", node_weight, positive=True)
        self.node_weight = node_weight

    def _weight(self, partition: _Partition) -> tuple[Decimal, Decimal]:
        if self.node_weight is not None:
            return self.node_weight, _ONE
        return Decimal(partition.cores), _ONE

    def _service_units_ratio(
        self,
        partition: _Partition,
        nodes: Sequence[NodeUsage],
        share_units: tuple[int, int],
        elapsed_seconds: int,
    ) -> tuple[int, int]:
        weight_numerator, weight_denominator = self._weight_ints(partition)
        return (
            weight_numerator * elapsed_seconds * len(nodes),
            weight_denominator * SECONDS_PER_HOUR,
        )


class LinearModel(ChargingModel):
    """CSC Puhti's billing units (III-A2): a rate per hour for each resource, summed over nodes.

    ``SU/h = core_rate * cores + memory_gib_rate * memory_GiB + nvme_gib_rate * nvme_GiB
    + gpu_rate * GPUs`` with memory_GiB = memory_mb / 1024 and the NVMe amount read (as GiB) from
    ``node_local[nvme_resource]`` when the job has it. The reported weight is the SU of one whole
    node for an hour, the model's equivalent of a node-hour weight.
    """

    name = "linear"

    def __init__(
        self,
        *,
        core_rate: Decimal = Decimal(1),
        memory_gib_rate: Decimal = Decimal("0.1"),
        nvme_gib_rate: Decimal = Decimal("0.006"),
        gpu_rate: Decimal = Decimal(60),
        nvme_resource: str = "nvme_gb",
    ) -> None:
        rates = {}
        for name, rate in (
            ("core_rate", core_rate),
            ("memory_gib_rate", memory_gib_rate),
            ("nvme_gib_rate", nvme_gib_rate),
            ("gpu_rate", gpu_rate),
        ):
            rates[name] = _spec_decimal(name, rate)
            _require_decimal(name, rates[name], positive=False)
        self.core_rate = rates["core_rate"]
        self.memory_gib_rate = rates["memory_gib_rate"]
        self.nvme_gib_rate = rates["nvme_gib_rate"]
        self.gpu_rate = rates["gpu_rate"]
        self.nvme_resource = nvme_resource

    def _hourly_times_1024(
        self,
        cores: Decimal | int,
        memory_mb: Decimal | int,
        gpus: Decimal | int,
        nvme_gib: Decimal | int,
    ) -> Decimal:
        # SU per hour times 1024, so that memory in MiB needs no division.
        return (
            self.core_rate * cores + self.nvme_gib_rate * nvme_gib + self.gpu_rate * gpus
        ) * MIB_PER_GIB + self.memory_gib_rate * memory_mb

    def _weight(self, partition: _Partition) -> tuple[Decimal, Decimal]:
        nvme_gib = partition.node_local.get(self.nvme_resource, _ZERO)
        whole_node = self._hourly_times_1024(
            partition.cores, partition.memory_mb, partition.gpus, nvme_gib
        )
        return whole_node, Decimal(MIB_PER_GIB)

    def _service_units_ratio(
        self,
        partition: _Partition,
        nodes: Sequence[NodeUsage],
        share_units: tuple[int, int],
        elapsed_seconds: int,
    ) -> tuple[int, int]:
        hourly_times_1024 = sum(
            (
                self._hourly_times_1024(
                    node.cores,
                    node.memory_mb,
                    node.gpus,
                    node.node_local.get(self.nvme_resource, 0),
                )
                for node in nodes
            ),
            start=_ZERO,
        )
        hourly_numerator, hourly_denominator = hourly_times_1024.as_integer_ratio()
        return (
            hourly_numerator * elapsed_seconds,
            hourly_denominator * SECONDS_PER_HOUR * MIB_PER_GIB,
        )


MODELS: Final[Mapping[str, ChargingModel]] = MappingProxyType(
    {
        model.name: model
        for model in (
            EnergyModel(),
            CoreHourModel(),
            WholeNodeModel(),
            SMModel(),
            PeakModel(),
            LinearModel(),
        )
    }
)
"""The charging models by name; "energy" is the one the ledger uses."""


def charge(
    spec: PartitionSpec,
    nodes: Sequence[NodeUsage],
    *,
    elapsed_seconds: int,
    model: str | ChargingModel = "energy",
) -> Charge:
    """Price a job that held ``nodes`` of partition ``spec`` for ``elapsed_seconds``.

    ``model`` is a name in :data:`MODELS` or a configured model (``WholeNodeModel(node_weight=1)``).
    Raises :class:`ChargeError` for usage the partition cannot have given and
    :class:`SpecError` for a spec that cannot be charged against.
    """
    return _model(model).charge(spec, nodes, elapsed_seconds)


@dataclass(frozen=True, slots=True)
class ChargeRate:
    """What a job of one shape costs per second: exact rationals, so that
    :meth:`at` gives ``charge(...)`` to the last place for any elapsed time.

    ``service_units_per_second`` and ``energy_wh_per_second`` are ``(numerator, denominator)``
    pairs of ints; the rest is ``charge``'s breakdown, which does not depend on the time.
    """

    model: str
    service_units_per_second: tuple[int, int]
    energy_wh_per_second: tuple[int, int]
    weight: Decimal
    nodes: tuple[NodeFractions, ...]
    dominant_resource: str

    def at(self, elapsed_seconds: int) -> tuple[Decimal, Decimal]:
        """(service units, energy in Wh) of ``elapsed_seconds``, rounded half-even to
        :data:`SU_QUANTUM` once, as :func:`charge` rounds them."""
        _check_elapsed(elapsed_seconds)
        su_numerator, su_denominator = self.service_units_per_second
        wh_numerator, wh_denominator = self.energy_wh_per_second
        return (
            _round_to_quantum(su_numerator * elapsed_seconds, su_denominator),
            _round_to_quantum(wh_numerator * elapsed_seconds, wh_denominator),
        )


def charge_rate(
    spec: PartitionSpec, nodes: Sequence[NodeUsage], *, model: str | ChargingModel = "energy"
) -> ChargeRate:
    """The exact "SU per second" and "Wh per second" of a job holding ``nodes`` of ``spec``.

    Every model's charge is a ratio of ints proportional to the elapsed seconds (eq 1: SU =
    w * t * sum max(f)), so its value at one second is the rate; ``rate.at(t)`` equals
    ``charge(spec, nodes, elapsed_seconds=t)`` for every t (the columnar import prices each
    distinct shape once with this and multiplies per row). Raises as :func:`charge` does.
    """
    engine = _model(model)
    partition = _partition(spec)
    fractions, share_units, dominant_resource = _measure(partition, nodes)
    share_numerator, share_denominator = share_units
    tdp_numerator, tdp_denominator = partition.tdp_watts
    return ChargeRate(
        model=engine.name,
        service_units_per_second=engine._service_units_ratio(partition, nodes, share_units, 1),
        energy_wh_per_second=(
            tdp_numerator * share_numerator,
            tdp_denominator * SECONDS_PER_HOUR * partition.share_scale * share_denominator,
        ),
        weight=engine._weight_value(partition),
        nodes=fractions,
        dominant_resource=dominant_resource,
    )


def node_fractions_even(
    spec: PartitionSpec,
    *,
    nodes: int,
    cores: Decimal | int,
    memory_mb: Decimal | int,
    gpus: Decimal | int = 0,
) -> tuple[NodeFractions, ...]:
    """The fractions of each node a job held whose totals (sacct's ``AllocTRES``) are split
    evenly over its ``nodes``: the figures :func:`charge` shows for that job, so the ledger
    derives them from the job's shape instead of storing them.

    Raises :class:`ChargeError` for a shape the partition cannot have given.
    """
    usage = split_evenly(nodes=nodes, cores=cores, memory_mb=memory_mb, gpus=gpus)
    return charge(spec, usage, elapsed_seconds=0).nodes


def node_share_even(
    spec: PartitionSpec,
    *,
    nodes: int,
    cores: Decimal | int,
    memory_mb: Decimal | int,
    gpus: Decimal | int = 0,
) -> Fraction:
    """The share of each of its ``nodes`` that a job whose totals are split evenly held: eq 1's
    ``max(f_c, f_g, f_m)`` of one node, exactly (:attr:`NodeFractions.share` shows the same
    figure to 28 digits). ``nodes`` times it is the ``sum_i max(f^i)`` that :func:`charge`
    multiplies by ``w * t``; a job that holds its nodes whole has 1.

    Raises :class:`ChargeError` for a shape the partition cannot have given.
    """
    partition = _partition(spec)
    usage = split_evenly(nodes=nodes, cores=cores, memory_mb=memory_mb, gpus=gpus)
    _, (numerator, denominator), _ = _measure(partition, usage)
    return Fraction(numerator, denominator * partition.share_scale * nodes)


def node_fractions_folded(fractions: Sequence[NodeFractions]) -> list[dict[str, str]]:
    """Per-node fractions as text, identical consecutive nodes folded into one entry whose
    ``nodes`` counts them (the job API's ``node_fractions`` and the job page's chart)."""
    first = fractions[0] if fractions else None
    if first is not None and not first.node_local and all(n == first for n in fractions):
        # The usual case: sacct gives totals, split evenly, so every node holds the same.
        return [
            {
                "nodes": str(len(fractions)),
                "cores": str(first.cores),
                "memory": str(first.memory),
                "gpus": str(first.gpus),
            }
        ]
    folded: list[dict[str, str]] = []
    for node in fractions:
        entry = {
            "cores": str(node.cores),
            "memory": str(node.memory),
            "gpus": str(node.gpus),
            **{name: str(value) for name, value in sorted(node.node_local.items())},
        }
        if folded and {k: v for k, v in folded[-1].items() if k != "nodes"} == entry:
            folded[-1]["nodes"] = str(int(folded[-1]["nodes"]) + 1)
        else:
            folded.append({"nodes": "1", **entry})
    return folded


def service_units(
    spec: PartitionSpec,
    nodes: Sequence[NodeUsage],
    *,
    elapsed_seconds: int,
    model: str | ChargingModel = "energy",
) -> Decimal:
    """``charge(...).service_units``, the same to the last place, without the breakdown."""
    return _model(model).service_units(spec, nodes, elapsed_seconds)


def _model(model: str | ChargingModel) -> ChargingModel:
    if not isinstance(model, str):
        return model
    try:
        return MODELS[model]
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise ChargeError(f"unknown charging model {model!r} (known: {known})") from None

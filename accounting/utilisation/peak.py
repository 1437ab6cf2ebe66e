"""Peak performance of nodes and clusters, Q(T) paper section 2, eqs 1-8 (DESIGN section 4).

Pure maths over small frozen dataclasses: no Django, no settings, no ORM.

- eq 3: ``P_cpu = n_core * n_stream * n_unit * F_cpu`` per CPU (socket).
- eq 7: ``P_gpu = (n_cuda + n_tensor * r^2 (2r - 1)) * F_gpu`` per accelerator.
- eqs 2, 8: ``P_host = N_cpu * P_cpu + N_gpu * P_gpu``. Eq 8 as printed drops ``N_gpu``; eq 2
  has it, and a node with 8 GPUs has eight times the GPU peak, so eq 2 is the one implemented.
- eq 1: ``P_peak = sum of P_host`` over the nodes.

A device's peak comes either from the parameters (eq 3 or 7) or from a vendor figure that staff
entered instead; when both exist the vendor figure wins (DESIGN: staff "may instead enter" it)
and every :class:`DevicePeak` records which one was used (:class:`PeakSource`).

Nodes come and go: a partition's peak over time is a step function built from
:class:`PeakPeriod` rows, each in force from its ``effective_from`` until the next
(:class:`PeakTimeline`). Before the first period the partition has no nodes.

Exactness: FLOP/s are ``Decimal``, as in the spec files and the database (the inputs are whole
numbers of Hz and units, or vendor figures with a few significant digits). Products are taken in
a 60-digit context that traps ``Inexact``, so a peak is either exact or an error, never silently
rounded. Amounts of work (FLOP/s times seconds) are returned as ``Fraction``: eq 10 divides a
socket's peak by its cores (1.5e12 / 18), which no decimal represents, and Q(T) must add up
exactly however a window is cut into buckets.

Time: instants are timezone-aware ``datetime``s at the edges and whole epoch seconds inside
(Slurm's resolution); :func:`epoch_seconds` drops any fraction of a second.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal, Inexact
from enum import StrEnum
from fractions import Fraction
from typing import Final

from accounting.clusters.specs import CpuPeak, GpuPeak, PartitionDefinition
from kit.errors import ApplicationError

_EXACT: Final = Context(prec=60, traps=[Inexact])
_ZERO: Final = Decimal(0)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_SECOND: Final = timedelta(seconds=1)


class PeakError(ApplicationError):
    """A peak that cannot be worked out (missing or impossible parameters); says which."""


class PeakSource(StrEnum):
    """Where a device's peak FLOP/s came from."""

    FORMULA = "formula"  # eq 3 (CPU) or eq 7 (GPU) from the device's parameters
    VENDOR = "vendor"  # the vendor's peak FLOP/s per device, entered by staff


# --------------------------------------------------------------------------------------------
# Time helpers shared by the utilisation and canonical-unit modules


def epoch_seconds(when: datetime) -> int:
    """Whole seconds since the Unix epoch of an aware ``datetime`` (fractions are dropped)."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"a timezone-aware datetime is required, got naive {when!r}")
    return (when - _EPOCH) // _ONE_SECOND


def from_epoch_seconds(seconds: int) -> datetime:
    """The UTC ``datetime`` of whole epoch seconds (inverse of :func:`epoch_seconds`)."""
    return _EPOCH + timedelta(seconds=seconds)


# --------------------------------------------------------------------------------------------
# Devices: eqs 3 and 7


def _number(name: str, value: Decimal | int) -> Decimal:
    # Floats would make peaks inexact; ints and Decimals are exact.
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise PeakError(f"{name} must be a Decimal or an int, got {value!r}")
    number = Decimal(value)
    if not number.is_finite() or number <= 0:
        raise PeakError(f"{name} must be a positive finite number, got {value!r}")
    return number


def _count(name: str, value: int, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PeakError(f"{name} must be an integer of at least {minimum}, got {value!r}")
    return value


def cpu_peak_flops(
    *, cores: int, n_stream: int, n_unit: int, frequency_hz: Decimal | int
) -> Decimal:
    """Peak FLOP/s of one CPU, eq 3: ``P_cpu = n_core * n_stream * n_unit * F_cpu``.

    ``cores`` is n_core (the cores of this one CPU), ``n_stream`` the threads per core,
    ``n_unit`` the floating-point operations per thread per cycle, ``frequency_hz`` F_cpu.
    E.g. AMD EPYC 7763: 64 * 1 * 16 * 2.45e9 = 2.5088e12.
    """
    _count("cores", cores, minimum=1)
    _count("n_stream", n_stream, minimum=1)
    _count("n_unit", n_unit, minimum=1)
    frequency = _number("frequency_hz", frequency_hz)
    return _EXACT.multiply(Decimal(cores * n_stream * n_unit), frequency)  # eq 3


def gpu_peak_flops(
    *, n_cuda: int, n_tensor: int, matrix_order: int, frequency_hz: Decimal | int
) -> Decimal:
    """Peak FLOP/s of one accelerator, eq 7: ``(n_cuda + n_tensor * r^2 (2r - 1)) * F_gpu``.

    A CUDA core does one operation per cycle (eq 5); a tensor core multiplies two r x r
    matrices per cycle, r^2 (2r - 1) operations (eq 6). E.g. V100: 5120 CUDA and 640 tensor
    cores, r = 4, 1.53 GHz: (5120 + 640 * 112) * 1.53e9 = 1.17504e14.
    """
    _count("n_cuda", n_cuda, minimum=0)
    _count("n_tensor", n_tensor, minimum=0)
    _count("matrix_order", matrix_order, minimum=0)
    if n_tensor and not matrix_order:
        raise PeakError("matrix_order (r) must be positive when there are tensor cores (eq 6)")
    if not n_cuda and not n_tensor:
        raise PeakError("an accelerator needs CUDA cores or tensor cores (eq 7)")
    frequency = _number("frequency_hz", frequency_hz)
    operations_per_cycle = n_cuda + n_tensor * matrix_order**2 * (2 * matrix_order - 1)  # eq 7
    return _EXACT.multiply(Decimal(operations_per_cycle), frequency)


@dataclass(frozen=True, slots=True)
class DevicePeak:
    """The peak FLOP/s of one device (a CPU socket or an accelerator) and where it came from."""

    flops: Decimal
    source: PeakSource


def cpu_device_peak(
    *,
    cores_per_socket: int,
    parameters: CpuPeak | None = None,
    vendor_flops: Decimal | int | None = None,
) -> DevicePeak:
    """The peak of one CPU: the vendor figure when given, else eq 3 from ``parameters``."""
    if vendor_flops is not None:
        return DevicePeak(_number("cpu vendor peak FLOP/s", vendor_flops), PeakSource.VENDOR)
    if parameters is None:
        raise PeakError("no CPU peak: give the eq 3 parameters or the vendor peak FLOP/s")
    flops = cpu_peak_flops(
        cores=cores_per_socket,
        n_stream=parameters.n_stream,
        n_unit=parameters.n_unit,
        frequency_hz=parameters.frequency_hz,
    )
    return DevicePeak(flops, PeakSource.FORMULA)


def gpu_device_peak(
    *, parameters: GpuPeak | None = None, vendor_flops: Decimal | int | None = None
) -> DevicePeak:
    """The peak of one accelerator: the vendor figure when given, else eq 7 from ``parameters``."""
    if vendor_flops is not None:
        return DevicePeak(_number("gpu vendor peak FLOP/s", vendor_flops), PeakSource.VENDOR)
    if parameters is None:
        raise PeakError("no GPU peak: give the eq 7 parameters or the vendor peak FLOP/s")
    flops = gpu_peak_flops(
        n_cuda=parameters.n_cuda,
        n_tensor=parameters.n_tensor,
        matrix_order=parameters.matrix_order,
        frequency_hz=parameters.frequency_hz,
    )
    return DevicePeak(flops, PeakSource.FORMULA)


# --------------------------------------------------------------------------------------------
# Nodes and clusters: eqs 1, 2, 8


@dataclass(frozen=True, slots=True)
class NodePeak:
    """One node: N_cpu sockets of ``cores_per_socket`` cores (n of eq 10), N_gpu accelerators."""

    sockets: int
    cores_per_socket: int
    cpu: DevicePeak
    gpus: int = 0
    gpu: DevicePeak | None = None

    def __post_init__(self) -> None:
        _count("sockets", self.sockets, minimum=1)
        _count("cores_per_socket", self.cores_per_socket, minimum=1)
        _count("gpus", self.gpus, minimum=0)
        if self.gpus and self.gpu is None:
            raise PeakError(f"a node with {self.gpus} GPUs needs a GPU peak")

    @property
    def cores(self) -> int:
        """Cores of the node, summed over its sockets."""
        return self.sockets * self.cores_per_socket

    @property
    def gpu_flops(self) -> Decimal:
        """P_gpu of one accelerator, 0 when the node has none."""
        return self.gpu.flops if self.gpu is not None and self.gpus else _ZERO

    @property
    def host_flops(self) -> Decimal:
        """P_host = N_cpu * P_cpu + N_gpu * P_gpu (eqs 2, 8)."""
        cpus = _EXACT.multiply(Decimal(self.sockets), self.cpu.flops)
        return _EXACT.add(cpus, _EXACT.multiply(Decimal(self.gpus), self.gpu_flops))

    @property
    def core_flops(self) -> Fraction:
        """P_cpu / n: the peak of one reserved core (eq 10, n = cores of one CPU)."""
        return Fraction(self.cpu.flops) / self.cores_per_socket

    @property
    def sources(self) -> frozenset[PeakSource]:
        """The sources of the peaks this node's figure is made of, for the page to show."""
        used = {self.cpu.source}
        if self.gpus and self.gpu is not None:
            used.add(self.gpu.source)
        return frozenset(used)


def node_peak(
    *,
    sockets: int,
    cores_per_socket: int,
    gpus: int = 0,
    cpu_parameters: CpuPeak | None = None,
    cpu_vendor_flops: Decimal | int | None = None,
    gpu_parameters: GpuPeak | None = None,
    gpu_vendor_flops: Decimal | int | None = None,
) -> NodePeak:
    """A node's peak from its shape and, per device kind, eq 3/7 parameters or a vendor figure."""
    return NodePeak(
        sockets=sockets,
        cores_per_socket=cores_per_socket,
        cpu=cpu_device_peak(
            cores_per_socket=cores_per_socket,
            parameters=cpu_parameters,
            vendor_flops=cpu_vendor_flops,
        ),
        gpus=gpus,
        gpu=(
            gpu_device_peak(parameters=gpu_parameters, vendor_flops=gpu_vendor_flops)
            if gpus
            else None
        ),
    )


def node_peak_from_definition(definition: PartitionDefinition) -> NodePeak:
    """The node peak of a partition read from a cluster spec file
    (``accounting.clusters.specs``)."""
    spec = definition.charging
    try:
        return node_peak(
            sockets=spec.sockets,
            cores_per_socket=spec.cores_per_socket,
            gpus=spec.gpus,
            cpu_parameters=definition.cpu_peak,
            cpu_vendor_flops=spec.cpu_peak_flops,
            gpu_parameters=definition.gpu_peak,
            gpu_vendor_flops=spec.gpu_peak_flops,
        )
    except PeakError as error:
        raise PeakError(f"partition {definition.name!r}: {error}") from None


def cluster_peak_flops(partitions: Iterable[tuple[int, NodePeak]]) -> Decimal:
    """P_peak = sum of P_host over all nodes (eq 1), from (node count, node) pairs."""
    total = _ZERO
    for node_count, node in partitions:
        _count("node_count", node_count, minimum=0)
        total = _EXACT.add(total, _EXACT.multiply(Decimal(node_count), node.host_flops))
    return total


# --------------------------------------------------------------------------------------------
# P_peak over time


@dataclass(frozen=True, slots=True)
class PeakPeriod:
    """From ``effective_from`` on (until the next period) a partition has ``node_count`` nodes."""

    effective_from: datetime
    node_count: int
    node: NodePeak

    def __post_init__(self) -> None:
        _count("node_count", self.node_count, minimum=0)
        epoch_seconds(self.effective_from)  # refuses naive datetimes

    @property
    def peak_flops(self) -> Decimal:
        """The partition's P_peak during this period: node_count * P_host (eq 1)."""
        return _EXACT.multiply(Decimal(self.node_count), self.node.host_flops)


@dataclass(frozen=True, slots=True)
class PeakStep:
    """P_peak is ``peak_flops`` from ``start`` to ``end`` (one step of the step function)."""

    start: datetime
    end: datetime
    peak_flops: Decimal


class PeakTimeline:
    """A partition's P_peak as a step function of time; build it with :func:`peak_timeline`.

    Period ``i`` is in force on ``[effective_from_i, effective_from_{i+1})``; the last one has
    no end. Before the first period there are no nodes (P_peak = 0, no hardware).
    """

    __slots__ = ("_starts", "hardware_changes", "periods")

    def __init__(self, periods: tuple[PeakPeriod, ...]) -> None:
        self.periods = periods
        self._starts = tuple(epoch_seconds(period.effective_from) for period in periods)
        # Instants (epoch seconds) where the node hardware, not just the count, changes.
        self.hardware_changes: tuple[int, ...] = tuple(
            start
            for index, start in enumerate(self._starts)
            if index == 0 or periods[index].node != periods[index - 1].node
        )

    def __repr__(self) -> str:
        return f"PeakTimeline({self.periods!r})"

    def period_index_at(self, seconds: int) -> int:
        """Index of the period in force at epoch ``seconds``, -1 before the first."""
        return bisect.bisect_right(self._starts, seconds) - 1

    def period_at(self, when: datetime) -> PeakPeriod | None:
        """The period in force at ``when``, ``None`` before the first."""
        index = self.period_index_at(epoch_seconds(when))
        return self.periods[index] if index >= 0 else None

    def peak_at(self, when: datetime) -> Decimal:
        """P_peak at ``when`` (eq 1 over the partition's nodes then), 0 before the first period."""
        period = self.period_at(when)
        return period.peak_flops if period is not None else _ZERO

    def segments_seconds(self, start: int, end: int) -> Iterator[tuple[int, int, int]]:
        """Cut ``[start, end)`` (epoch seconds) at period changes: ``(from, to, period index)``.

        The index is -1 for a piece before the first period. Empty pieces are not yielded.
        """
        if start >= end:
            return
        index = self.period_index_at(start)
        starts = self._starts
        while start < end:
            next_change = starts[index + 1] if index + 1 < len(starts) else end
            piece_end = min(end, next_change)
            if piece_end > start:
                yield start, piece_end, index
            start = piece_end
            index += 1

    def steps(self, start: datetime, end: datetime) -> tuple[PeakStep, ...]:
        """P_peak on ``[start, end)`` as steps, for charts (a step per period change)."""
        return tuple(
            PeakStep(
                from_epoch_seconds(piece_start),
                from_epoch_seconds(piece_end),
                self.periods[index].peak_flops if index >= 0 else _ZERO,
            )
            for piece_start, piece_end, index in self.segments_seconds(
                epoch_seconds(start), epoch_seconds(end)
            )
        )

    def operations_seconds(self, start: int, end: int) -> Fraction:
        """Op = integral of P_peak over ``[start, end)`` in epoch seconds (eq 9), in FLOP."""
        total = Fraction(0)
        for piece_start, piece_end, index in self.segments_seconds(start, end):
            if index >= 0:
                total += Fraction(self.periods[index].peak_flops) * (piece_end - piece_start)
        return total

    def operations(self, start: datetime, end: datetime) -> Fraction:
        """Op(T) = P_peak * T (eq 9) with P_peak integrated over the window ``[start, end)``."""
        return self.operations_seconds(epoch_seconds(start), epoch_seconds(end))


def peak_timeline(periods: Iterable[PeakPeriod]) -> PeakTimeline:
    """P_peak of a partition over time from its periods (any order; one per instant)."""
    ordered = tuple(sorted(periods, key=lambda period: epoch_seconds(period.effective_from)))
    if not ordered:
        raise PeakError("a partition needs at least one period")
    for before, after in itertools.pairwise(ordered):
        if epoch_seconds(before.effective_from) == epoch_seconds(after.effective_from):
            raise PeakError(f"two periods start at {after.effective_from.isoformat()}")
    return PeakTimeline(ordered)


def cluster_peak_steps(
    timelines: Iterable[PeakTimeline], start: datetime, end: datetime
) -> tuple[PeakStep, ...]:
    """The cluster's P_peak (eq 1 over all partitions) on ``[start, end)`` as steps."""
    start_seconds, end_seconds = epoch_seconds(start), epoch_seconds(end)
    pieces = [
        (piece_start, piece_end, timeline.periods[index].peak_flops if index >= 0 else _ZERO)
        for timeline in timelines
        for piece_start, piece_end, index in timeline.segments_seconds(start_seconds, end_seconds)
    ]
    cuts = sorted({start_seconds, end_seconds} | {piece[0] for piece in pieces})
    steps = []
    for step_start, step_end in itertools.pairwise(cuts):
        total = _ZERO
        for piece_start, piece_end, flops in pieces:
            if piece_start <= step_start < piece_end:
                total = _EXACT.add(total, flops)
        steps.append(PeakStep(from_epoch_seconds(step_start), from_epoch_seconds(step_end), total))
    return tuple(steps)

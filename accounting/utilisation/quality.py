"""Cluster load quality Q(T), Q(T) paper eqs 9-12 (DESIGN section 4), and classical utilisation.

Pure maths over small frozen dataclasses: no Django, no settings, no ORM.

- eq 9: ``Op(T) = P_peak * T``; P_peak is a step function of time (nodes come and go), so Op is
  its integral over the window (:class:`accounting.utilisation.peak.PeakTimeline`).
- eqs 10-11: ``Op_app(T) = sum_i (R_core * P_cpu / n + R_gpu * P_gpu) * t_i`` where ``t_i`` is
  only the part of job i inside the window (the paper's Figure 1), R_core and R_gpu the job's
  allocated cores and GPUs and n the cores of one CPU. Eq 11 prints ``R_cpu``; eq 10 defines
  R_core, and CPUs are reserved by cores, so R_core it is.
- eq 12: ``Q(T) = Op_app(T) / Op(T) * 100 %``.
- Classical utilisation beside it: allocated core-seconds over available core-seconds, and the
  same for GPUs.

Three ways in:

- :func:`utilisation_window`: one window, straight from jobs.
- :func:`utilisation_series`: hour, day, week or calendar-month buckets in a time zone, straight
  from jobs; each job counts in each bucket only for its overlap with it.
- :func:`hourly_contributions` + :func:`utilisation_series_from_hours`: the incremental form. A
  job's allocated core-seconds and GPU-seconds per clock hour are whole numbers that can be
  added into a table as jobs arrive; any coarser series is then a sum of rows, priced with the
  hardware in force, over the integral of P_peak. Because eqs 9-11 are linear in time, the
  result equals the direct computation exactly (a property test checks it).

Exactness: seconds are ints, FLOP are ``Fraction`` (see :mod:`accounting.utilisation.peak`); only
the percentages shown are rounded, half-even to :data:`PERCENT_QUANTUM`.

Buckets follow the wall clock of the cluster's time zone: a day is local midnight to local
midnight (23 or 25 hours across a DST change), a week starts on Monday, a month is a calendar
month. Hours are the intervals between instants whose local time is on the hour, so every day,
week and month boundary is an hour boundary, also in zones offset by half an hour.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType
from typing import Final
from zoneinfo import ZoneInfo

from accounting.utilisation.peak import (
    PeakPeriod,
    PeakSource,
    PeakTimeline,
    epoch_seconds,
    from_epoch_seconds,
)
from kit.errors import ApplicationError

PERCENT_PLACES: Final = 6
PERCENT_QUANTUM: Final = Decimal(1).scaleb(-PERCENT_PLACES)
"""Percentages (Q, core and GPU utilisation) are shown rounded half-even to 6 decimal places."""

SECONDS_PER_HOUR: Final = 3600


class UtilisationError(ApplicationError):
    """Jobs or partitions that Q(T) cannot be computed for; the message says which and why."""


class Step(StrEnum):
    """Bucket sizes of a utilisation series."""

    HOUR = "hour"
    DAY = "day"
    WEEK = "week"  # ISO weeks, Monday to Monday
    MONTH = "month"  # calendar months


@dataclass(frozen=True, slots=True)
class AllocatedJob:
    """A job as Q(T) sees it: what it reserved (R_core, R_gpu), where and when (eqs 10-11).

    ``cores`` and ``gpus`` are the job's totals over all its nodes (sacct ``AllocTRES``).
    A running job is passed with ``end`` set to the time of the report.
    """

    partition: str
    start: datetime
    end: datetime
    cores: int
    gpus: int = 0
    start_seconds: int = field(init=False, repr=False, compare=False)
    end_seconds: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("cores", "gpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UtilisationError(f"{name} must be a non-negative integer, got {value!r}")
        start, end = epoch_seconds(self.start), epoch_seconds(self.end)
        if end < start:
            raise UtilisationError(f"job on {self.partition!r} ends before it starts")
        object.__setattr__(self, "start_seconds", start)
        object.__setattr__(self, "end_seconds", end)


class Utilisation:
    """The figures of one window (and one partition or all of them); immutable.

    ``used_flop`` is Op_app(T) (eq 11), ``capacity_flop`` Op(T) (eq 9), both exact
    ``Fraction``s; the core and GPU seconds are the classical allocated and available
    resource-time. Built like a dataclass: ``Utilisation(used_flop=..., capacity_flop=...,
    core_seconds=..., ...)``, every figure defaulting to 0.

    Inside, both FLOP amounts are whole multiples of one ``scale`` (1 / scale FLOP is the unit):
    a series prices all its buckets on a common scale, so adding them, comparing them and
    taking percentages is integer arithmetic, with no ``Fraction`` built until one is asked for.
    """

    __slots__ = ("_figures",)

    # (used, capacity, scale, core_seconds, available_core_seconds, gpu_seconds,
    #  available_gpu_seconds); used_flop = used / scale, capacity_flop = capacity / scale.
    _figures: tuple[int, int, int, int, int, int, int]

    def __init__(
        self,
        used_flop: Fraction | int = 0,
        capacity_flop: Fraction | int = 0,
        core_seconds: int = 0,
        available_core_seconds: int = 0,
        gpu_seconds: int = 0,
        available_gpu_seconds: int = 0,
    ) -> None:
        used, capacity = Fraction(used_flop), Fraction(capacity_flop)
        scale = math.lcm(used.denominator, capacity.denominator)
        _set_figures(
            self,
            (
                used.numerator * (scale // used.denominator),
                capacity.numerator * (scale // capacity.denominator),
                scale,
                core_seconds,
                available_core_seconds,
                gpu_seconds,
                available_gpu_seconds,
            ),
        )

    @classmethod
    def _scaled(cls, figures: tuple[int, int, int, int, int, int, int]) -> Utilisation:
        """From the inside representation (no conversions: the series' hot path)."""
        utilisation = object.__new__(cls)
        _set_figures(utilisation, figures)
        return utilisation

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Utilisation is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Utilisation is immutable: cannot delete {name!r}")

    def __reduce__(self) -> tuple[type[Utilisation], tuple[object, ...]]:
        return (Utilisation, (self.used_flop, self.capacity_flop, *self._figures[3:]))

    @property
    def used_flop(self) -> Fraction:
        """Op_app(T), eq 11."""
        return Fraction(self._figures[0], self._figures[2])

    @property
    def capacity_flop(self) -> Fraction:
        """Op(T), eq 9."""
        return Fraction(self._figures[1], self._figures[2])

    @property
    def core_seconds(self) -> int:
        return self._figures[3]

    @property
    def available_core_seconds(self) -> int:
        return self._figures[4]

    @property
    def gpu_seconds(self) -> int:
        return self._figures[5]

    @property
    def available_gpu_seconds(self) -> int:
        return self._figures[6]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Utilisation):
            return NotImplemented
        mine, theirs = self._figures, other._figures
        if mine[2] == theirs[2]:
            return mine == theirs
        return (
            mine[0] * theirs[2] == theirs[0] * mine[2]
            and mine[1] * theirs[2] == theirs[1] * mine[2]
            and mine[3:] == theirs[3:]
        )

    def __hash__(self) -> int:
        return hash((self.used_flop, self.capacity_flop, *self._figures[3:]))

    def __repr__(self) -> str:
        figures = self._figures
        return (
            f"Utilisation(used_flop={self.used_flop!r}, capacity_flop={self.capacity_flop!r}, "
            f"core_seconds={figures[3]}, available_core_seconds={figures[4]}, "
            f"gpu_seconds={figures[5]}, available_gpu_seconds={figures[6]})"
        )

    def __add__(self, other: Utilisation) -> Utilisation:
        """Figures of two disjoint windows or partitions together (everything adds up)."""
        if not isinstance(other, Utilisation):
            return NotImplemented
        mine, theirs = self._figures, other._figures
        scale = mine[2]
        if scale == theirs[2]:
            used, capacity = mine[0] + theirs[0], mine[1] + theirs[1]
        else:
            scale = math.lcm(mine[2], theirs[2])
            left, right = scale // mine[2], scale // theirs[2]
            used = mine[0] * left + theirs[0] * right
            capacity = mine[1] * left + theirs[1] * right
        return Utilisation._scaled(
            (
                used,
                capacity,
                scale,
                mine[3] + theirs[3],
                mine[4] + theirs[4],
                mine[5] + theirs[5],
                mine[6] + theirs[6],
            )
        )

    @property
    def q(self) -> Fraction | None:
        """Op_app(T) / Op(T) as an exact ratio (eq 12 without the 100 %); None without capacity."""
        used, capacity = self._figures[0], self._figures[1]
        return Fraction(used, capacity) if capacity else None

    @property
    def q_percent(self) -> Decimal | None:
        """Q(T) = Op_app(T) / Op(T) * 100 % (eq 12); None when there was no capacity."""
        return _percent(self._figures[0], self._figures[1])

    @property
    def core_percent(self) -> Decimal | None:
        """Allocated over available core-seconds, in %; None when no cores were available."""
        return _percent(self._figures[3], self._figures[4])

    @property
    def gpu_percent(self) -> Decimal | None:
        """Allocated over available GPU-seconds, in %; None when no GPUs were available."""
        return _percent(self._figures[5], self._figures[6])

    @property
    def overcommitted(self) -> bool:
        """More was reserved than the nodes had (a share above 100 %): impossible on a real
        cluster, so the jobs' data is inconsistent (jobs overlapping on a node, a node list
        wider than the partition) and the window must be flagged, never plotted silently."""
        used, capacity, _, cores, available_cores, gpus, available_gpus = self._figures[:7]
        return used > capacity or cores > available_cores or gpus > available_gpus


_set_figures = Utilisation.__dict__["_figures"].__set__  # the slot's own setter
_NO_FIGURES: Final = (0, 0, 1, 0, 0, 0, 0)
_PERCENT_FACTOR: Final = 100 * 10**PERCENT_PLACES
_PERCENT_SCALE: Final = 10**PERCENT_PLACES
_PERCENT_FORMAT: Final = f"%d.%0{PERCENT_PLACES}d"


def _percent_quanta(part: int, whole: int) -> int:
    """``part / whole`` in % as a count of :data:`PERCENT_QUANTUM`, rounded half-even once
    (``whole`` not 0). Integer arithmetic: count whole quanta, then place the decimal point."""
    if whole < 0:
        part, whole = -part, -whole
    quanta, remainder = divmod(part * _PERCENT_FACTOR, whole)
    twice = 2 * remainder
    if twice > whole or (twice == whole and quanta % 2):
        quanta += 1
    return quanta


def _percent(part: int, whole: int) -> Decimal | None:
    """``part / whole`` in %, to :data:`PERCENT_QUANTUM`; None if ``whole`` is 0."""
    if not whole:
        return None
    return Decimal(_percent_quanta(part, whole)).scaleb(-PERCENT_PLACES)


def _percent_text(part: int, whole: int) -> str | None:
    """``str(_percent(part, whole))`` without making the Decimal (a year of hours has 100,000
    of them to print)."""
    if not whole:
        return None
    quanta = _percent_quanta(part, whole)
    sign = "-" if quanta < 0 else ""
    whole_part, fraction = divmod(abs(quanta), _PERCENT_SCALE)
    return f"{sign}{whole_part}.{fraction:0{PERCENT_PLACES}d}"


@dataclass(frozen=True, slots=True)
class UtilisationWindow:
    """One bucket of a series (or the whole window): figures per partition and in total."""

    start: datetime
    end: datetime
    total: Utilisation
    partitions: Mapping[str, Utilisation]


@dataclass(frozen=True, slots=True)
class HourlyContribution:
    """A job's allocated core-seconds and GPU-seconds inside one clock hour of a partition.

    Rows with the same ``partition`` and ``hour_start`` add up; store their sums (one row per
    partition and hour) and price them later with :func:`utilisation_series_from_hours`.
    ``hour_start`` is an instant (UTC); the hour ends at the next local hour boundary.
    """

    partition: str
    hour_start: datetime
    core_seconds: int
    gpu_seconds: int


# --------------------------------------------------------------------------------------------
# Bucket boundaries on the local wall clock


def _zone(timezone: str | tzinfo) -> tzinfo:
    if isinstance(timezone, str):
        return ZoneInfo(timezone)
    return timezone


def _minutes_past_hour(seconds: int, zone: tzinfo) -> int:
    local = datetime.fromtimestamp(seconds, zone)
    return local.minute * 60 + local.second


def _is_hour_boundary(seconds: int, zone: tzinfo) -> bool:
    return _minutes_past_hour(seconds, zone) == 0


def _hour_floor(seconds: int, zone: tzinfo) -> int:
    """The last local hour boundary at or before ``seconds``."""
    floor = seconds - _minutes_past_hour(seconds, zone)
    # After a half-hour DST shift, "minutes past" can point at an instant that is not on the
    # hour; step back again until it is (at most once or twice in practice).
    for _ in range(4):
        past = _minutes_past_hour(floor, zone)
        if past == 0:
            return floor
        floor -= past
    raise UtilisationError(f"no local hour boundary found before {from_epoch_seconds(seconds)}")


def _next_hour(boundary: int, zone: tzinfo) -> int:
    """The first local hour boundary after ``boundary`` (usually ``boundary + 3600``)."""
    candidate = boundary + SECONDS_PER_HOUR
    past = _minutes_past_hour(candidate, zone)
    if past == 0:
        return candidate
    # The UTC offset changed by a non-whole hour in between.
    earlier = candidate - past
    if earlier > boundary and _is_hour_boundary(earlier, zone):
        return earlier
    return candidate + SECONDS_PER_HOUR - past


def _midnight(day: date, zone: tzinfo) -> int:
    # fold=0: a skipped midnight maps to the instant of the change, a repeated one to the first.
    return epoch_seconds(datetime(day.year, day.month, day.day, tzinfo=zone))


def _boundaries_seconds(start: int, end: int, step: Step, zone: tzinfo) -> list[int]:
    """``[start, b_1, ..., b_k, end]``: the step's boundaries strictly inside the window."""
    if end <= start:
        raise UtilisationError("a window must end after it starts")
    inner: list[int] = []
    if step is Step.HOUR:
        boundary = _next_hour(_hour_floor(start, zone), zone)
        while boundary < end:
            inner.append(boundary)
            boundary = _next_hour(boundary, zone)
    else:
        day = datetime.fromtimestamp(start, zone).date()
        if step is Step.WEEK:
            day -= timedelta(days=day.weekday())
        elif step is Step.MONTH:
            day = day.replace(day=1)
        while True:
            if step is Step.DAY:
                day += timedelta(days=1)
            elif step is Step.WEEK:
                day += timedelta(days=7)
            else:
                day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
            boundary = _midnight(day, zone)
            if boundary >= end:
                break
            if boundary > start:
                inner.append(boundary)
    return [start, *inner, end]


def bucket_boundaries(
    *, start: datetime, end: datetime, step: Step | str, timezone: str | tzinfo
) -> tuple[datetime, ...]:
    """The edges of the buckets of ``step`` covering ``[start, end)`` in ``timezone``.

    The first and last buckets are cut at ``start`` and ``end`` when those are not on a bucket
    edge, so the buckets always tile the window exactly. Returned as UTC datetimes.
    """
    seconds = _boundaries_seconds(
        epoch_seconds(start), epoch_seconds(end), Step(step), _zone(timezone)
    )
    return tuple(from_epoch_seconds(boundary) for boundary in seconds)


def month_blocks(
    *, start: datetime, end: datetime, step: Step | str, timezone: str | tzinfo
) -> tuple[tuple[datetime, datetime], ...]:
    """``[start, end)`` cut into blocks of whole consecutive buckets of ``step``: one block per
    local calendar month it touches, and in its last local month (the open one, when the
    window ends now) one per local day. Each block ends at the first bucket edge at or after a
    local month (day) start: a week may hold one, so its block runs on to the week's end, and
    a month step's last month stays whole.

    A block's buckets (:func:`bucket_boundaries` of the block) are exactly the window's buckets
    inside it, so a series computed block by block and put end to end equals the series of the
    whole window; a block of months that no longer change can be kept (the Q(T) cache), and a
    change in the open month leaves the cached days before it alone.
    """
    zone, step = _zone(timezone), Step(step)
    first, last = epoch_seconds(start), epoch_seconds(end)
    if last <= first:
        raise UtilisationError("a window must end after it starts")
    days: list[date] = []
    day = datetime.fromtimestamp(first, zone).date().replace(day=1)
    while True:
        day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
        if _midnight(day, zone) >= last:
            break
        days.append(day)
    final = datetime.fromtimestamp(last - 1, zone).date()
    day = final.replace(day=1)
    while day < final:
        day += timedelta(days=1)
        days.append(day)
    cuts = sorted(
        {
            cut
            for day in days
            if first < (cut := _bucket_edge_from(_midnight(day, zone), day, step, zone)) < last
        }
    )
    edges = [first, *cuts, last]
    return tuple(
        (from_epoch_seconds(low), from_epoch_seconds(high))
        for low, high in itertools.pairwise(edges)
    )


def _bucket_edge_from(midnight: int, day: date, step: Step, zone: tzinfo) -> int:
    """The first edge of ``step``'s buckets at or after ``midnight``, the local start of
    ``day``, as :func:`_boundaries_seconds` places them."""
    if step is Step.WEEK:  # the first Monday from the day on
        return _midnight(day + timedelta(days=-day.weekday() % 7), zone)
    if step is Step.MONTH and day.day != 1:  # the next month's first day
        return _midnight(date(day.year + day.month // 12, day.month % 12 + 1, 1), zone)
    if step is Step.HOUR and not _is_hour_boundary(midnight, zone):
        return _next_hour(_hour_floor(midnight, zone), zone)
    return midnight  # days (and months) start at local midnight


# --------------------------------------------------------------------------------------------
# Pricing and accumulating, in whole numbers on a common scale
#
# Every per-second FLOP figure of a partition (P_cpu / n, P_gpu, P_host) is an exact rational
# with a small denominator (a decimal's power of ten, times n for eq 10). Multiplied by the least
# common denominator of all of them (the series' scale) they are integers, so pricing a row,
# integrating P_peak over a bucket and adding buckets and partitions is integer arithmetic. The
# results are the same exact numbers as with Fractions, which are built only when asked for.


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while a series' objects are made.

    A one-year hourly series makes about 100,000 small objects that all live on (buckets,
    figures, the rows read); while they are made the collector walks the whole heap several
    times and frees nothing, which took a third of the series' time. None of them is in a
    reference cycle. The collector runs again afterwards if it ran before.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _scale(partitions: Mapping[str, PeakTimeline]) -> int:
    """The least common denominator of every partition's per-second FLOP figures."""
    scale = 1
    for timeline in partitions.values():
        for period in timeline.periods:
            node = period.node
            for flops in (node.core_flops, Fraction(node.gpu_flops), Fraction(node.host_flops)):
                scale = math.lcm(scale, flops.denominator)
    return scale


def _whole(flops: Fraction, scale: int) -> int:
    scaled = flops * scale
    assert scaled.denominator == 1, "the scale is a multiple of every denominator"
    return scaled.numerator


@dataclass(frozen=True, slots=True)
class _PricedPeriod:
    """A period of a partition as whole numbers; FLOP/s are multiplied by the series' scale."""

    start: int  # epoch seconds from which it is in force
    core_flops: int  # P_cpu / n, one reserved core (eq 10)
    gpu_flops: int  # P_gpu, one reserved GPU (eq 11); 0 on nodes without GPUs
    peak_flops: int  # node_count * P_host (eqs 1, 2): the partition's P_peak
    cores: int  # node_count * cores of a node
    gpus: int  # node_count * GPUs of a node
    node_has_gpus: bool


class _Tally:
    """One partition's used FLOP (on the scale), core-seconds and GPU-seconds per bucket."""

    __slots__ = ("cores", "gpus", "name", "periods", "starts", "timeline", "used")

    def __init__(self, name: str, timeline: PeakTimeline, scale: int, buckets: int) -> None:
        self.name = name
        self.timeline = timeline
        self.periods = tuple(
            _PricedPeriod(
                start=epoch_seconds(period.effective_from),
                core_flops=_whole(period.node.core_flops, scale),
                gpu_flops=_whole(Fraction(period.node.gpu_flops), scale),
                peak_flops=_whole(Fraction(period.node.host_flops), scale) * period.node_count,
                cores=period.node.cores * period.node_count,
                gpus=period.node.gpus * period.node_count,
                node_has_gpus=bool(period.node.gpus),
            )
            for period in timeline.periods
        )
        self.starts = [period.start for period in self.periods]
        self.used = [0] * buckets
        self.cores = [0] * buckets
        self.gpus = [0] * buckets

    def add(self, bucket: int, period_index: int, core_seconds: int, gpu_seconds: int) -> None:
        """Price core- and GPU-seconds held in ``bucket`` during period ``period_index``."""
        if period_index < 0:
            raise UtilisationError(
                f"partition {self.name!r} has a job before its first period "
                f"({self.timeline.periods[0].effective_from.isoformat()}): no hardware to price it"
            )
        period = self.periods[period_index]
        if gpu_seconds and not period.node_has_gpus:
            raise UtilisationError(f"a job holds GPUs on partition {self.name!r}, which has none")
        # eqs 10-11: R_core * P_cpu / n + R_gpu * P_gpu, times the time inside the bucket
        self.used[bucket] += core_seconds * period.core_flops + gpu_seconds * period.gpu_flops
        self.cores[bucket] += core_seconds
        self.gpus[bucket] += gpu_seconds

    def capacity(
        self, boundaries: list[int], widths: list[int]
    ) -> tuple[list[int], list[int], list[int]]:
        """Op(T) (eq 9, on the scale) and the available core- and GPU-seconds per bucket.

        P_peak is integrated period by period: buckets wholly inside a period take its rate
        times their width, a bucket cut by a change (or by the first period) the pieces'.
        """
        count = len(widths)
        flop, cores, gpus = [0] * count, [0] * count, [0] * count
        first_edge, last_edge = boundaries[0], boundaries[-1]
        for index, period in enumerate(self.periods):
            following = self.starts[index + 1] if index + 1 < len(self.starts) else last_edge
            begin, finish = max(period.start, first_edge), min(following, last_edge)
            if begin >= finish:
                continue
            first = bisect.bisect_left(boundaries, begin)  # first edge at or after begin
            last = bisect.bisect_right(boundaries, finish) - 1  # last edge at or before finish
            if first > last:  # inside one bucket
                pieces = [(last, finish - begin)]
            else:
                span = widths[first:last]
                flop[first:last] = [period.peak_flops * width for width in span]
                cores[first:last] = [period.cores * width for width in span]
                gpus[first:last] = [period.gpus * width for width in span]
                pieces = []
                if begin < boundaries[first]:
                    pieces.append((first - 1, boundaries[first] - begin))
                if finish > boundaries[last]:
                    pieces.append((last, finish - boundaries[last]))
            for bucket, seconds in pieces:
                flop[bucket] += period.peak_flops * seconds
                cores[bucket] += period.cores * seconds
                gpus[bucket] += period.gpus * seconds
        return flop, cores, gpus


def _tallies(partitions: Mapping[str, PeakTimeline], buckets: int) -> tuple[int, dict[str, _Tally]]:
    scale = _scale(partitions)
    return scale, {
        name: _Tally(name, timeline, scale, buckets)
        for name, timeline in sorted(partitions.items())
    }


def _tally_of(tallies: Mapping[str, _Tally], name: str) -> _Tally:
    try:
        return tallies[name]
    except KeyError:
        known = ", ".join(sorted(tallies)) or "none"
        raise UtilisationError(f"unknown partition {name!r} (known: {known})") from None


def _windows(
    boundaries: list[int], tallies: Mapping[str, _Tally], scale: int
) -> tuple[UtilisationWindow, ...]:
    with collector_paused():
        return _windows_unpaused(boundaries, tallies, scale)


def _windows_unpaused(
    boundaries: list[int], tallies: Mapping[str, _Tally], scale: int
) -> tuple[UtilisationWindow, ...]:
    widths = [end - start for start, end in itertools.pairwise(boundaries)]
    count = len(widths)
    make = Utilisation._scaled
    names = list(tallies)
    columns = []  # per partition: the seven figures of Utilisation, one list each
    for tally in tallies.values():
        flop, cores, gpus = tally.capacity(boundaries, widths)
        columns.append((tally.used, flop, [scale] * count, tally.cores, cores, tally.gpus, gpus))
    per_partition = [[make(figures) for figures in zip(*column, strict=True)] for column in columns]
    if columns:
        sums = [
            [sum(values) for values in zip(*(column[field] for column in columns), strict=True)]
            for field in range(7)
        ]
        sums[2] = [scale] * count  # the scale is shared, not added
        totals = [make(figures) for figures in zip(*sums, strict=True)]
    else:
        totals = [make(_NO_FIGURES)] * count
    edges = [from_epoch_seconds(boundary) for boundary in boundaries]
    return tuple(
        UtilisationWindow(
            start=edges[bucket],
            end=edges[bucket + 1],
            total=totals[bucket],
            partitions=MappingProxyType(
                {name: figures[bucket] for name, figures in zip(names, per_partition, strict=True)}
            ),
        )
        for bucket in range(count)
    )


def _series(
    jobs: Iterable[AllocatedJob], partitions: Mapping[str, PeakTimeline], boundaries: list[int]
) -> tuple[UtilisationWindow, ...]:
    first, last = boundaries[0], boundaries[-1]
    scale, tallies = _tallies(partitions, len(boundaries) - 1)
    for job in jobs:
        tally = _tally_of(tallies, job.partition)
        start, end = max(job.start_seconds, first), min(job.end_seconds, last)
        if start >= end or not (job.cores or job.gpus):
            continue
        bucket = bisect.bisect_right(boundaries, start) - 1
        while boundaries[bucket] < end:
            # Figure 1: only the overlap of the job with the bucket counts.
            piece_start = max(start, boundaries[bucket])
            piece_end = min(end, boundaries[bucket + 1])
            for segment_start, segment_end, period_index in tally.timeline.segments_seconds(
                piece_start, piece_end
            ):
                seconds = segment_end - segment_start
                tally.add(bucket, period_index, job.cores * seconds, job.gpus * seconds)
            bucket += 1
    return _windows(boundaries, tallies, scale)


def utilisation_window(
    *,
    jobs: Iterable[AllocatedJob],
    partitions: Mapping[str, PeakTimeline],
    start: datetime,
    end: datetime,
) -> UtilisationWindow:
    """Q(T) (eq 12) and classical utilisation of the window ``[start, end)``.

    ``partitions`` maps each partition name to its P_peak over time; the total is over all of
    them (eq 1 sums every node of the cluster). Jobs on other partitions are refused, jobs
    outside the window ignored, and a job straddling an edge counts only inside (Figure 1).
    """
    boundaries = [epoch_seconds(start), epoch_seconds(end)]
    if boundaries[1] <= boundaries[0]:
        raise UtilisationError("a window must end after it starts")
    return _series(jobs, partitions, boundaries)[0]


def utilisation_series(
    *,
    jobs: Iterable[AllocatedJob],
    partitions: Mapping[str, PeakTimeline],
    start: datetime,
    end: datetime,
    step: Step | str,
    timezone: str | tzinfo,
) -> tuple[UtilisationWindow, ...]:
    """Q(T) and classical utilisation per bucket of ``step`` (see :func:`bucket_boundaries`).

    Each job counts in each bucket for its overlap with it only, so the buckets' figures add
    up to those of the whole window.
    """
    boundaries = _boundaries_seconds(
        epoch_seconds(start), epoch_seconds(end), Step(step), _zone(timezone)
    )
    return _series(jobs, partitions, boundaries)


# --------------------------------------------------------------------------------------------
# The incremental form


def hourly_contributions(
    job: AllocatedJob, *, timezone: str | tzinfo
) -> Iterator[HourlyContribution]:
    """Split a job into its allocated core- and GPU-seconds per local clock hour.

    Use the cluster's time zone (the one the series will be asked in): in zones offset by a
    whole number of hours the hours are the UTC hours. Hours in which the job held nothing are
    not yielded. Contributions are linear: a job whose times change is corrected by adding the
    old job's contributions negated and the new job's.
    """
    zone = _zone(timezone)
    start, end = job.start_seconds, job.end_seconds
    if start >= end or not (job.cores or job.gpus):
        return
    hour = _hour_floor(start, zone)
    while hour < end:
        next_hour = _next_hour(hour, zone)
        seconds = min(end, next_hour) - max(start, hour)
        yield HourlyContribution(
            partition=job.partition,
            hour_start=from_epoch_seconds(hour),
            core_seconds=job.cores * seconds,
            gpu_seconds=job.gpus * seconds,
        )
        hour = next_hour


HourRow = tuple[str, int, int, int]
"""``(partition, hour start in epoch seconds, core-seconds, GPU-seconds)``: a stored hourly row
as a database cursor returns it (:func:`utilisation_series_from_hour_rows`)."""


def utilisation_series_from_hours(
    *,
    hours: Iterable[HourlyContribution],
    partitions: Mapping[str, PeakTimeline],
    start: datetime,
    end: datetime,
    step: Step | str,
    timezone: str | tzinfo,
) -> tuple[UtilisationWindow, ...]:
    """The same series as :func:`utilisation_series`, from summed :func:`hourly_contributions`.

    ``start`` and ``end`` must be local hour boundaries; rows outside the window are ignored.
    A row is priced (eqs 10-11) with the node hardware in force during its hour, so a change of
    a partition's node hardware (not merely of its node count, which may change at any second)
    must fall on an hour boundary; otherwise this raises and the direct form must be used.
    """
    rows = (
        (row.partition, epoch_seconds(row.hour_start), row.core_seconds, row.gpu_seconds)
        for row in hours
    )
    return utilisation_series_from_hour_rows(
        rows=rows, partitions=partitions, start=start, end=end, step=step, timezone=timezone
    )


def utilisation_series_from_hour_rows(
    *,
    rows: Iterable[HourRow],
    partitions: Mapping[str, PeakTimeline],
    start: datetime,
    end: datetime,
    step: Step | str,
    timezone: str | tzinfo,
) -> tuple[UtilisationWindow, ...]:
    """:func:`utilisation_series_from_hours` from plain :data:`HourRow` tuples, with hours as
    epoch seconds: what a database returns, with no object built per row (the fast path)."""
    zone = _zone(timezone)
    step = Step(step)
    start_seconds, end_seconds = epoch_seconds(start), epoch_seconds(end)
    for edge in (start_seconds, end_seconds):
        if not _is_hour_boundary(edge, zone):
            raise UtilisationError(
                f"{from_epoch_seconds(edge).isoformat()} is not on the hour in {zone}: "
                "hourly rows cannot cut it"
            )
    boundaries = _boundaries_seconds(start_seconds, end_seconds, step, zone)
    for name, timeline in partitions.items():
        for change in timeline.hardware_changes:
            if start_seconds < change < end_seconds and not _is_hour_boundary(change, zone):
                raise UtilisationError(
                    f"the node hardware of partition {name!r} changes at "
                    f"{from_epoch_seconds(change).isoformat()}, inside an hour"
                )
    with collector_paused():
        return _hour_rows_series(rows, partitions, boundaries, step, zone)


def _hour_rows_series(
    rows: Iterable[HourRow],
    partitions: Mapping[str, PeakTimeline],
    boundaries: list[int],
    step: Step,
    zone: tzinfo,
) -> tuple[UtilisationWindow, ...]:
    start_seconds, end_seconds = boundaries[0], boundaries[-1]
    scale, tallies = _tallies(partitions, len(boundaries) - 1)
    # The bucket of each hour seen. Hourly buckets' edges are every local hour of the window;
    # for longer buckets an hour is checked once, when first seen.
    bucket_of = (
        {boundary: index for index, boundary in enumerate(boundaries[:-1])}
        if step is Step.HOUR
        else {}
    )
    bisect_right = bisect.bisect_right
    for name, hour, core_seconds, gpu_seconds in rows:
        tally = _tally_of(tallies, name)
        if not start_seconds <= hour < end_seconds or not (core_seconds or gpu_seconds):
            continue
        bucket = bucket_of.get(hour)
        if bucket is None:
            if step is Step.HOUR or not _is_hour_boundary(hour, zone):
                raise UtilisationError(
                    f"row of {name!r} at {from_epoch_seconds(hour).isoformat()} is not on the "
                    f"hour in {zone}: were the rows made in another time zone?"
                )
            bucket = bucket_of[hour] = bisect_right(boundaries, hour) - 1
        tally.add(bucket, bisect_right(tally.starts, hour) - 1, core_seconds, gpu_seconds)
    return _windows(boundaries, tallies, scale)


# --------------------------------------------------------------------------------------------
# Windows asked for by people, and the figures as plain values (page, API and CSV)

# Nominal bucket lengths, to bound a request before computing it (a month is at least 28 days).
_NOMINAL_SECONDS: Final = {
    Step.HOUR: SECONDS_PER_HOUR,
    Step.DAY: 23 * SECONDS_PER_HOUR,
    Step.WEEK: 7 * 24 * SECONDS_PER_HOUR - SECONDS_PER_HOUR,
    Step.MONTH: 28 * 24 * SECONDS_PER_HOUR - SECONDS_PER_HOUR,
}


def hour_floor(when: datetime, *, timezone: str | tzinfo) -> datetime:
    """The last local hour boundary of ``timezone`` at or before ``when`` (UTC)."""
    return from_epoch_seconds(_hour_floor(epoch_seconds(when), _zone(timezone)))


def hour_ceil(when: datetime, *, timezone: str | tzinfo) -> datetime:
    """The first local hour boundary of ``timezone`` at or after ``when`` (UTC)."""
    zone = _zone(timezone)
    seconds = epoch_seconds(when) + (1 if when.microsecond else 0)  # whole seconds, rounded up
    floor = _hour_floor(seconds, zone)
    return from_epoch_seconds(floor if floor == seconds else _next_hour(floor, zone))


def bucket_count_at_most(*, start: datetime, end: datetime, step: Step | str) -> int:
    """An upper bound of the number of buckets of ``step`` in ``[start, end)``, without
    computing them (to refuse a request that asks for too many)."""
    seconds = max(epoch_seconds(end) - epoch_seconds(start), 0)
    return seconds // _NOMINAL_SECONDS[Step(step)] + 2


@dataclass(frozen=True, slots=True)
class PeakInForce:
    """A partition's hardware from ``effective_from`` on: what the page says about P_peak."""

    effective_from: datetime
    node_count: int
    peak_flops: Decimal  # P_peak = node_count * P_host (eq 1)
    cpu_source: PeakSource  # eq 3 from parameters, or the vendor's figure
    gpu_source: PeakSource | None  # None on nodes without GPUs


def _in_force(period: PeakPeriod) -> PeakInForce:
    node = period.node
    return PeakInForce(
        effective_from=period.effective_from,
        node_count=period.node_count,
        peak_flops=period.peak_flops,
        cpu_source=node.cpu.source,
        gpu_source=node.gpu.source if node.gpus and node.gpu is not None else None,
    )


def peak_at(timeline: PeakTimeline, when: datetime) -> PeakInForce | None:
    """The hardware in force at ``when``; None before the partition's first period."""
    period = timeline.period_at(when)
    return _in_force(period) if period is not None else None


def peaks_in_window(timeline: PeakTimeline, start: datetime, end: datetime) -> list[PeakInForce]:
    """The hardware in force during ``[start, end)``: the period at ``start`` (if any) and each
    change inside the window (nodes added or removed, new hardware), in time order."""
    return [
        _in_force(timeline.periods[index])
        for _, _, index in timeline.segments_seconds(epoch_seconds(start), epoch_seconds(end))
        if index >= 0
    ]


def _rounded(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded half-even to a whole number."""
    quotient, remainder = divmod(numerator, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2):
        quotient += 1
    return quotient


FIGURE_FIELDS: Final = (
    "q_percent", "core_percent", "gpu_percent", "used_flop", "capacity_flop", "core_seconds",
    "available_core_seconds", "gpu_seconds", "available_gpu_seconds",
)  # fmt: skip
"""The figures of a :class:`Utilisation` as :func:`utilisation_figures` gives them."""


def utilisation_figures(utilisation: Utilisation) -> dict[str, str | int | None]:
    """The figures as plain values: percentages as decimal strings (6 places, ``None`` without
    capacity), FLOP as whole-number strings (rounded half-even; too large for a JSON number to
    keep exactly), seconds as integers. One code path for the API, the CSV and the page."""
    used, capacity, scale, cores, available_cores, gpus, available_gpus = utilisation._figures
    return {
        "q_percent": _percent_text(used, capacity),
        "core_percent": _percent_text(cores, available_cores),
        "gpu_percent": _percent_text(gpus, available_gpus),
        "used_flop": str(_rounded(used, scale)),
        "capacity_flop": str(_rounded(capacity, scale)),
        "core_seconds": cores,
        "available_core_seconds": available_cores,
        "gpu_seconds": gpus,
        "available_gpu_seconds": available_gpus,
    }


TOTAL: Final = "total"
"""The partition column of the cluster's total in :func:`utilisation_rows`."""


def _percent_column(parts: Sequence[int], wholes: Sequence[int]) -> list[str | None]:
    """``[_percent_text(part, whole) ...]`` for a whole column: the same rounding inlined,
    since a year of hours prints about 80,000 of them per request."""
    column: list[str | None] = []
    append = column.append
    for part, whole in zip(parts, wholes, strict=True):
        if whole <= 0 or part < 0:
            append(_percent_text(part, whole))
            continue
        quanta, remainder = divmod(part * _PERCENT_FACTOR, whole)
        twice = 2 * remainder
        if twice > whole or (twice == whole and quanta & 1):
            quanta += 1
        append(_PERCENT_FORMAT % divmod(quanta, _PERCENT_SCALE))
    return column


def _flop_column(amounts: Sequence[int], scales: Sequence[int]) -> list[str]:
    """``[str(_rounded(amount, scale)) ...]``; equal neighbours (a capacity that does not
    change from hour to hour) are divided once."""
    column: list[str] = []
    last: tuple[int, int] | None = None
    text = ""
    for amount, scale in zip(amounts, scales, strict=True):
        if (amount, scale) != last:
            last, text = (amount, scale), str(_rounded(amount, scale))
        column.append(text)
    return column


def utilisation_columns(
    windows: Sequence[UtilisationWindow], names: Iterable[str]
) -> dict[str, dict[str, list[str | int | None]]]:
    """The figures of a series as columns (the API's ``columns`` shape and the page's charts):
    per series (each partition of ``names``, then :data:`TOTAL`) one list per figure of
    :data:`FIGURE_FIELDS`, a value per bucket, each exactly what :func:`utilisation_figures`
    gives that bucket. A year of hours is 8,760 values per list instead of 8,760 objects."""
    columns: dict[str, dict[str, list[str | int | None]]] = {}
    with collector_paused():  # ~250,000 values that all live on (see collector_paused)
        for name in (*names, TOTAL):
            columns[name] = _series_columns(windows, name)
    return columns


def _series_columns(
    windows: Sequence[UtilisationWindow], name: str
) -> dict[str, list[str | int | None]]:
    """One series' columns (:func:`utilisation_columns`)."""
    figures = [
        (window.total if name == TOTAL else window.partitions[name])._figures for window in windows
    ]
    used, capacity, scale, cores, available_cores, gpus, available_gpus = (
        list(column) for column in zip(*figures, strict=True)
    ) if figures else ([] for _ in range(7))  # fmt: skip
    return {
        "q_percent": list(_percent_column(used, capacity)),
        "core_percent": list(_percent_column(cores, available_cores)),
        "gpu_percent": list(_percent_column(gpus, available_gpus)),
        "used_flop": list(_flop_column(used, scale)),
        "capacity_flop": list(_flop_column(capacity, scale)),
        "core_seconds": list(cores),
        "available_core_seconds": list(available_cores),
        "gpu_seconds": list(gpus),
        "available_gpu_seconds": list(available_gpus),
    }


ROW_FIELDS: Final = ("start", "end", "partition", *FIGURE_FIELDS)


def utilisation_rows(windows: Iterable[UtilisationWindow]) -> Iterator[tuple[object, ...]]:
    """Flat rows of :data:`ROW_FIELDS` (CSV and tables): per bucket, one per partition and one
    for the total (partition :data:`TOTAL`). Times are UTC ISO 8601 with ``Z``."""
    for window in windows:
        start, end = utc_text(window.start), utc_text(window.end)
        for name, figures in (*window.partitions.items(), (TOTAL, window.total)):
            yield (start, end, name, *utilisation_figures(figures).values())


def utc_text(when: datetime) -> str:
    """ISO 8601 in UTC with ``Z``, as the API writes times."""
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


DEFAULT_WINDOW_DAYS: Final = 30
MAX_BUCKETS: Final = 20_000
_FIRST_YEAR, _LAST_YEAR = 1970, 2199


class WindowError(UtilisationError):
    """A window that cannot be shown; ``field`` names the input at fault (start, end, step)."""

    field: str  # always names the input at fault

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def requested_window(
    *,
    start: datetime | None,
    end: datetime | None,
    step: Step | str,
    timezone: str | tzinfo,
    now: datetime,
) -> tuple[datetime, datetime]:
    """The window ``[start, end)`` a person asked for, on the cluster's local hours.

    Naive times are wall-clock times of ``timezone``. ``start`` is moved back and ``end``
    forward to the nearest local hour boundary (the hourly rows cannot cut an hour), never the
    other way. Without ``end``: the end of the current hour; without ``start``: local midnight
    :data:`DEFAULT_WINDOW_DAYS` days before the end's day. Refused (:class:`WindowError`):
    times outside 1970-2199, a start not before the end, more than :data:`MAX_BUCKETS` buckets.
    """
    zone = _zone(timezone)
    step = Step(step)

    def aware(field: str, when: datetime) -> datetime:
        if not _FIRST_YEAR <= when.year <= _LAST_YEAR:
            raise WindowError(field, f"{field} must be between {_FIRST_YEAR} and {_LAST_YEAR}")
        return when.replace(tzinfo=zone) if when.tzinfo is None else when

    end = hour_ceil(aware("end", end), timezone=zone) if end else hour_ceil(now, timezone=zone)
    if start is None:
        last_day = end.astimezone(zone).date()
        start = datetime.combine(
            last_day - timedelta(days=DEFAULT_WINDOW_DAYS), datetime.min.time()
        )
    start = hour_floor(aware("start", start), timezone=zone)
    if start >= end:
        raise WindowError("end", "the window must end after it starts")
    if bucket_count_at_most(start=start, end=end, step=step) > MAX_BUCKETS:
        raise WindowError(
            "step",
            f"more than {MAX_BUCKETS:,} {step} buckets: choose a longer step or a shorter window",
        )
    return start, end

"""Cluster load quality Q(T), Q(T) paper eqs 9-12 (DESIGN section 4), and classical utilisation.

Pure maths over small frozen dataclasses: no Django, no settings, no ORM.

- eq 9: ``Op(T) = P_peak * T``; P_peak is a step function of time (nodes come and go), so Op is
  its integral over the window (:class:`accounting.peak.PeakTimeline`).
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

Exactness: seconds are ints, FLOP are ``Fraction`` (see :mod:`accounting.peak`); only the
percentages shown are rounded, half-even to :data:`PERCENT_QUANTUM`.

Buckets follow the wall clock of the cluster's time zone: a day is local midnight to local
midnight (23 or 25 hours across a DST change), a week starts on Monday, a month is a calendar
month. Hours are the intervals between instants whose local time is on the hour, so every day,
week and month boundary is an hour boundary, also in zones offset by half an hour.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType
from typing import Final
from zoneinfo import ZoneInfo

from accounting.peak import PeakTimeline, epoch_seconds, from_epoch_seconds

PERCENT_PLACES: Final = 6
PERCENT_QUANTUM: Final = Decimal(1).scaleb(-PERCENT_PLACES)
"""Percentages (Q, core and GPU utilisation) are shown rounded half-even to 6 decimal places."""

SECONDS_PER_HOUR: Final = 3600


class UtilisationError(ValueError):
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


@dataclass(frozen=True, slots=True)
class Utilisation:
    """The figures of one window (and one partition or all of them).

    ``used_flop`` is Op_app(T) (eq 11), ``capacity_flop`` Op(T) (eq 9); the core and GPU
    seconds are the classical allocated and available resource-time.
    """

    used_flop: Fraction = Fraction(0)
    capacity_flop: Fraction = Fraction(0)
    core_seconds: int = 0
    available_core_seconds: int = 0
    gpu_seconds: int = 0
    available_gpu_seconds: int = 0

    def __add__(self, other: Utilisation) -> Utilisation:
        """Figures of two disjoint windows or partitions together (everything adds up)."""
        return Utilisation(
            used_flop=self.used_flop + other.used_flop,
            capacity_flop=self.capacity_flop + other.capacity_flop,
            core_seconds=self.core_seconds + other.core_seconds,
            available_core_seconds=self.available_core_seconds + other.available_core_seconds,
            gpu_seconds=self.gpu_seconds + other.gpu_seconds,
            available_gpu_seconds=self.available_gpu_seconds + other.available_gpu_seconds,
        )

    @property
    def q(self) -> Fraction | None:
        """Op_app(T) / Op(T) as an exact ratio (eq 12 without the 100 %); None without capacity."""
        return self.used_flop / self.capacity_flop if self.capacity_flop else None

    @property
    def q_percent(self) -> Decimal | None:
        """Q(T) = Op_app(T) / Op(T) * 100 % (eq 12); None when there was no capacity."""
        return _percent(self.q)

    @property
    def core_percent(self) -> Decimal | None:
        """Allocated over available core-seconds, in %; None when no cores were available."""
        return _percent(_ratio(self.core_seconds, self.available_core_seconds))

    @property
    def gpu_percent(self) -> Decimal | None:
        """Allocated over available GPU-seconds, in %; None when no GPUs were available."""
        return _percent(_ratio(self.gpu_seconds, self.available_gpu_seconds))


def _ratio(part: int, whole: int) -> Fraction | None:
    return Fraction(part, whole) if whole else None


def _percent(ratio: Fraction | None) -> Decimal | None:
    if ratio is None:
        return None
    # Count whole quanta of the exact percentage, rounding half-even once (round() on a
    # Fraction), then place the decimal point: no intermediate rounding.
    quanta = round(ratio * 100 * 10**PERCENT_PLACES)
    return Decimal(quanta).scaleb(-PERCENT_PLACES)


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


# --------------------------------------------------------------------------------------------
# Accumulating and pricing

# Per partition: (bucket index, period index) -> [core-seconds, GPU-seconds]
_Tally = dict[str, dict[tuple[int, int], list[int]]]


def _tally_add(
    tally: _Tally,
    timeline: PeakTimeline,
    partition: str,
    key: tuple[int, int],
    core_seconds: int,
    gpu_seconds: int,
) -> None:
    period_index = key[1]
    if period_index < 0:
        raise UtilisationError(
            f"partition {partition!r} has a job before its first period "
            f"({timeline.periods[0].effective_from.isoformat()}): no hardware to price it"
        )
    if gpu_seconds and not timeline.periods[period_index].node.gpus:
        raise UtilisationError(f"a job holds GPUs on partition {partition!r}, which has none")
    cell = tally[partition].get(key)
    if cell is None:
        tally[partition][key] = [core_seconds, gpu_seconds]
    else:
        cell[0] += core_seconds
        cell[1] += gpu_seconds


def _timeline(partitions: Mapping[str, PeakTimeline], name: str) -> PeakTimeline:
    try:
        return partitions[name]
    except KeyError:
        known = ", ".join(sorted(partitions)) or "none"
        raise UtilisationError(f"unknown partition {name!r} (known: {known})") from None


def _capacity(timeline: PeakTimeline, start: int, end: int) -> Utilisation:
    """Op(T) (eq 9) and the available core- and GPU-seconds of one partition on a window."""
    flop = Fraction(0)
    core_seconds = gpu_seconds = 0
    for piece_start, piece_end, index in timeline.segments_seconds(start, end):
        if index < 0:
            continue  # no nodes before the first period
        period = timeline.periods[index]
        node_seconds = period.node_count * (piece_end - piece_start)
        flop += Fraction(period.node.host_flops) * node_seconds  # eq 9, eq 1 over the nodes
        core_seconds += period.node.cores * node_seconds
        gpu_seconds += period.node.gpus * node_seconds
    return Utilisation(
        capacity_flop=flop, available_core_seconds=core_seconds, available_gpu_seconds=gpu_seconds
    )


def _windows(
    boundaries: list[int], partitions: Mapping[str, PeakTimeline], tally: _Tally
) -> tuple[UtilisationWindow, ...]:
    used: dict[tuple[str, int], Utilisation] = {}
    for name, cells in tally.items():
        periods = partitions[name].periods
        for (bucket, period_index), (core_seconds, gpu_seconds) in cells.items():
            node = periods[period_index].node
            # eqs 10-11: R_core * P_cpu / n + R_gpu * P_gpu, times the time inside the bucket
            flop = node.core_flops * core_seconds + Fraction(node.gpu_flops) * gpu_seconds
            figures = Utilisation(
                used_flop=flop, core_seconds=core_seconds, gpu_seconds=gpu_seconds
            )
            key = (name, bucket)
            used[key] = used[key] + figures if key in used else figures
    windows = []
    for bucket, (start, end) in enumerate(itertools.pairwise(boundaries)):
        per_partition = {
            name: _capacity(timeline, start, end) + used.get((name, bucket), Utilisation())
            for name, timeline in sorted(partitions.items())
        }
        total = sum(per_partition.values(), start=Utilisation())
        windows.append(
            UtilisationWindow(
                start=from_epoch_seconds(start),
                end=from_epoch_seconds(end),
                total=total,
                partitions=MappingProxyType(per_partition),
            )
        )
    return tuple(windows)


def _series(
    jobs: Iterable[AllocatedJob], partitions: Mapping[str, PeakTimeline], boundaries: list[int]
) -> tuple[UtilisationWindow, ...]:
    first, last = boundaries[0], boundaries[-1]
    tally: _Tally = {name: {} for name in partitions}
    for job in jobs:
        timeline = _timeline(partitions, job.partition)
        start, end = max(job.start_seconds, first), min(job.end_seconds, last)
        if start >= end or not (job.cores or job.gpus):
            continue
        bucket = bisect.bisect_right(boundaries, start) - 1
        while boundaries[bucket] < end:
            # Figure 1: only the overlap of the job with the bucket counts.
            piece_start = max(start, boundaries[bucket])
            piece_end = min(end, boundaries[bucket + 1])
            for segment_start, segment_end, period_index in timeline.segments_seconds(
                piece_start, piece_end
            ):
                seconds = segment_end - segment_start
                _tally_add(
                    tally,
                    timeline,
                    job.partition,
                    (bucket, period_index),
                    job.cores * seconds,
                    job.gpus * seconds,
                )
            bucket += 1
    return _windows(boundaries, partitions, tally)


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
    zone = _zone(timezone)
    start_seconds, end_seconds = epoch_seconds(start), epoch_seconds(end)
    for edge in (start_seconds, end_seconds):
        if not _is_hour_boundary(edge, zone):
            raise UtilisationError(
                f"{from_epoch_seconds(edge).isoformat()} is not on the hour in {zone}: "
                "hourly rows cannot cut it"
            )
    boundaries = _boundaries_seconds(start_seconds, end_seconds, Step(step), zone)
    for name, timeline in partitions.items():
        for change in timeline.hardware_changes:
            if start_seconds < change < end_seconds and not _is_hour_boundary(change, zone):
                raise UtilisationError(
                    f"the node hardware of partition {name!r} changes at "
                    f"{from_epoch_seconds(change).isoformat()}, inside an hour"
                )
    tally: _Tally = {name: {} for name in partitions}
    for row in hours:
        timeline = _timeline(partitions, row.partition)
        hour = epoch_seconds(row.hour_start)
        if not start_seconds <= hour < end_seconds or not (row.core_seconds or row.gpu_seconds):
            continue
        if not _is_hour_boundary(hour, zone):
            raise UtilisationError(
                f"row of {row.partition!r} at {row.hour_start.isoformat()} is not on the hour "
                f"in {zone}: were the rows made in another time zone?"
            )
        bucket = bisect.bisect_right(boundaries, hour) - 1
        key = (bucket, timeline.period_index_at(hour))
        _tally_add(tally, timeline, row.partition, key, row.core_seconds, row.gpu_seconds)
    return _windows(boundaries, partitions, tally)

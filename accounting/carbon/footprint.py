"""Energy and CO2e of jobs and of months of a project (docs/energy-and-carbon.md).

Pure module: no Django. Energy is what Slurm measured (``ConsumedEnergyRaw``) where it has a
measurement, else the charging engine's estimate (eq 29), and every figure says which. CO2e is
energy times the grid's carbon intensity (grams of CO2e per kWh) of the cluster:

- the intensity at a time is the newest step of the cluster's series that started at or before
  it, else the cluster's constant, else there is none (and no CO2e is given);
- one rule for a job and for a month: a job's energy is split over the UTC clock hours of its
  run in proportion to its seconds in each (:func:`energy_hour_shares`), and each hour's share
  is taken at the series' time-weighted mean over that hour. A job's CO2e sums its hours; a
  month's sums the hours of the jobs that ended in it, as the hourly energy roll-ups keep them,
  so it is the sum of its jobs' CO2e.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from decimal import Decimal
from typing import Literal

from kit.calendar import add_months

ENERGY_QUANTUM = Decimal("0.000001")  # the roll-ups' Wh columns hold six places
GRAMS_QUANTUM = Decimal("0.001")
INTENSITY_QUANTUM = Decimal("0.000001")
_JOULES_PER_WH = Decimal(3600)
_WH_PER_KWH = Decimal(1000)
_ZERO = Decimal(0)
_MILLION = 10**6
_HOUR = timedelta(hours=1)

EnergySource = Literal["measured", "estimated"]


def measured_energy_wh(consumed_energy_joules: int | None) -> Decimal | None:
    """Slurm's measured energy in Wh, or None when it measured nothing (no energy plugin
    reports 0 or leaves the column empty)."""
    if not consumed_energy_joules or consumed_energy_joules <= 0:
        return None
    return (Decimal(consumed_energy_joules) / _JOULES_PER_WH).quantize(ENERGY_QUANTUM)


@dataclass(frozen=True)
class Energy:
    """A job's best energy and where it comes from."""

    wh: Decimal
    source: EnergySource


def job_energy(*, consumed_energy_joules: int | None, estimate_wh: Decimal) -> Energy:
    """Measured when Slurm has it, else the engine's estimate, labelled as such."""
    measured = measured_energy_wh(consumed_energy_joules)
    if measured is not None:
        return Energy(wh=measured, source="measured")
    return Energy(wh=estimate_wh, source="estimated")


@dataclass(frozen=True)
class EnergySums:
    """The energy of a set of jobs as the daily roll-ups keep it: the engine's estimate of all
    of them, and of those Slurm measured, the measurement and the estimate."""

    estimate_wh: Decimal = _ZERO
    measured_wh: Decimal = _ZERO
    measured_estimate_wh: Decimal = _ZERO
    jobs: int = 0
    measured_jobs: int = 0

    @property
    def estimated_wh(self) -> Decimal:
        """The part that stays an estimate: the jobs Slurm did not measure."""
        return self.estimate_wh - self.measured_estimate_wh

    @property
    def best_wh(self) -> Decimal:
        """Measured where measured, estimated elsewhere."""
        return self.measured_wh + self.estimated_wh

    @property
    def measured_percent(self) -> Decimal | None:
        """How much of the best energy was measured, in percent (None for no energy)."""
        if self.best_wh <= 0:
            return None
        return (self.measured_wh * 100 / self.best_wh).quantize(Decimal("0.1"))

    def __add__(self, other: EnergySums) -> EnergySums:
        return EnergySums(
            estimate_wh=self.estimate_wh + other.estimate_wh,
            measured_wh=self.measured_wh + other.measured_wh,
            measured_estimate_wh=self.measured_estimate_wh + other.measured_estimate_wh,
            jobs=self.jobs + other.jobs,
            measured_jobs=self.measured_jobs + other.measured_jobs,
        )


def co2e_grams(*, energy_wh: Decimal, g_per_kwh: Decimal | None) -> Decimal | None:
    """Grams of CO2e of ``energy_wh`` at ``g_per_kwh``; None when the intensity is not set."""
    if g_per_kwh is None:
        return None
    return (energy_wh * g_per_kwh / _WH_PER_KWH).quantize(GRAMS_QUANTUM)


@dataclass(frozen=True)
class IntensityStep:
    """``g_per_kwh`` from ``starts_at`` until the next step of the series."""

    starts_at: datetime
    g_per_kwh: Decimal


class Intensity:
    """A cluster's grid intensity: its series (any order) over its constant."""

    def __init__(self, *, steps: Iterable[IntensityStep], constant: Decimal | None) -> None:
        self.steps = sorted(steps, key=lambda step: step.starts_at)
        self.starts = [step.starts_at for step in self.steps]
        self.constant = constant

    @property
    def is_set(self) -> bool:
        return bool(self.steps) or self.constant is not None

    def at(self, when: datetime) -> Decimal | None:
        """The newest step at or before ``when``, else the constant, else None."""
        index = bisect_right(self.starts, when)
        return self.steps[index - 1].g_per_kwh if index else self.constant

    def mean(self, start: datetime, end: datetime) -> Decimal | None:
        """The time-weighted mean over [start, end). A part with no intensity (before the
        series' first step, with no constant) is left out; None when no part has one."""
        weighted = _ZERO
        seconds = 0
        # In UTC: the difference of two times of one zone ignores a change of its offset.
        start, end = start.astimezone(UTC), end.astimezone(UTC)
        for piece_start, piece_end, value in self._pieces(start, end):
            if value is None:
                continue
            length = int((piece_end - piece_start).total_seconds())
            weighted += value * length
            seconds += length
        if seconds == 0:
            return None
        return (weighted / seconds).quantize(INTENSITY_QUANTUM)

    def hour_mean(self, hour: int) -> Decimal | None:
        """The time-weighted mean over the UTC clock hour ``hour`` (hours since 1970)."""
        start = datetime.fromtimestamp(hour * 3600, UTC)
        return self.mean(start, start + _HOUR)

    def _pieces(
        self, start: datetime, end: datetime
    ) -> Iterable[tuple[datetime, datetime, Decimal | None]]:
        index = bisect_right(self.starts, start)
        value = self.steps[index - 1].g_per_kwh if index else self.constant
        cursor = start
        while index < len(self.steps) and self.starts[index] < end:
            yield cursor, self.starts[index], value
            cursor, value = self.starts[index], self.steps[index].g_per_kwh
            index += 1
        yield cursor, end, value


def local_day_bounds(day: date, zone: tzinfo) -> tuple[datetime, datetime]:
    """The cluster's local day as [midnight, next midnight): 23 or 25 hours across DST."""
    start = datetime.combine(day, time.min, tzinfo=zone)
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=zone)
    return start, end


def months_window(last_day: date, months: int = 12) -> tuple[date, date]:
    """The days [start, end) of the ``months`` calendar months up to the one of ``last_day``."""
    month = last_day.replace(day=1)
    return add_months(month, 1 - months), add_months(month, 1)


# --------------------------------------------------------------------------------------------
# Energy over the hours of a run, and its CO2e


def energy_hour_shares(millionths: int, start: int, end: int) -> list[tuple[int, int]]:
    """A job's energy (whole millionths of a Wh) over the UTC clock hours of its run
    [start, end) (Unix seconds), in proportion to its seconds in each: (hour since 1970,
    millionths). Each share is the difference of the cumulative share rounded down, so the
    shares add up to the energy exactly. A run of no length puts it all in its end's hour."""
    if end <= start:
        return [(end // 3600, millionths)]
    duration = end - start
    shares = []
    before = 0
    for hour in range((start // 3600), (end - 1) // 3600 + 1):
        through = millionths * (min(end, (hour + 1) * 3600) - start) // duration
        shares.append((hour, through - before))
        before = through
    return shares


def to_millionths(wh: Decimal) -> int:
    """Wh of at most six places (the ledger's and the roll-ups' columns) as whole millionths."""
    return int(wh.quantize(ENERGY_QUANTUM).scaleb(6))


def epoch_hour_start(hour: int) -> datetime:
    return datetime.fromtimestamp(hour * 3600, UTC)


class HourMeans:
    """The intensity's mean over each UTC clock hour, each hour worked out once."""

    def __init__(self, intensity: Intensity) -> None:
        self.intensity = intensity
        self._means: dict[int, Decimal | None] = {}

    def __call__(self, hour: int) -> Decimal | None:
        if hour not in self._means:
            self._means[hour] = self.intensity.hour_mean(hour)
        return self._means[hour]


@dataclass(frozen=True)
class RunFootprint:
    """A job's CO2e and the intensity it was taken at: its CO2e over its energy, the mean of
    its hours weighted by the energy in each (None: an hour of the run has no intensity)."""

    co2e_g: Decimal | None
    g_per_kwh: Decimal | None


def _run_seconds(start: datetime | None, end: datetime) -> tuple[int, int]:
    """A run as Unix seconds; an unknown start is a run of no length at its end."""
    end_s = int(end.timestamp())
    return (end_s if start is None else int(start.timestamp())), end_s


def run_hours(start: datetime | None, end: datetime) -> tuple[datetime, datetime]:
    """The UTC clock hours a run's CO2e reads the intensity of, as [first hour, after the
    last): what :func:`run_footprint` needs of a cluster's series."""
    start_s, end_s = _run_seconds(start, end)
    return epoch_hour_start(min(start_s, end_s) // 3600), epoch_hour_start(end_s // 3600 + 1)


def run_footprint(
    *, energy_wh: Decimal, start: datetime | None, end: datetime, intensity: Intensity
) -> RunFootprint:
    """A job's CO2e: its energy over the hours of its run, each hour at its mean intensity
    (the rule the months use). None when an hour with energy has no intensity: a figure that
    left it out would understate."""
    start_s, end_s = _run_seconds(start, end)
    mean_of = HourMeans(intensity)
    grams = _ZERO
    for hour, share in energy_hour_shares(to_millionths(energy_wh), start_s, end_s):
        if share == 0:
            continue
        mean = mean_of(hour)
        if mean is None:
            return RunFootprint(co2e_g=None, g_per_kwh=None)
        grams += Decimal(share).scaleb(-6) * mean / _WH_PER_KWH
    if energy_wh <= 0:
        # No energy, no weights: the intensity of the end's hour says what it would be taken at.
        mean = mean_of(end_s // 3600)
        return RunFootprint(
            co2e_g=None if mean is None else _ZERO.quantize(GRAMS_QUANTUM), g_per_kwh=mean
        )
    return RunFootprint(
        co2e_g=grams.quantize(GRAMS_QUANTUM),
        g_per_kwh=(grams * _WH_PER_KWH / energy_wh).quantize(Decimal("0.1")),
    )


@dataclass(frozen=True)
class MonthFootprint:
    """One month of a project on one cluster."""

    month: date  # its first day
    energy: EnergySums
    co2e_g: Decimal | None  # None when a day with energy has no intensity
    days_without_intensity: int  # days with energy in an hour without intensity

    @property
    def mean_g_per_kwh(self) -> Decimal | None:
        """The month's intensity weighted by its energy: CO2e over energy."""
        if self.co2e_g is None or self.energy.best_wh <= 0:
            return None
        return (self.co2e_g * _WH_PER_KWH / self.energy.best_wh).quantize(Decimal("0.1"))


def window_co2e_g(months: Sequence[MonthFootprint]) -> Decimal | None:
    """A window's CO2e, the sum of its months'; None when a month has none (a total that left
    a month out would understate it)."""
    grams = [month.co2e_g for month in months]
    if any(value is None for value in grams):
        return None
    return sum((value for value in grams if value is not None), Decimal(0))


def monthly_footprint(
    days: Iterable[tuple[date, EnergySums]],
    hours: Iterable[tuple[date, int, Decimal]],
    intensity: Intensity,
) -> list[MonthFootprint]:
    """Sum days into months: energy from the daily roll-ups, and CO2e from the hourly energy
    roll-ups, ``(day the jobs ended, UTC hour, Wh)``, each hour's Wh at the hour's mean
    intensity, into the month of the day. A month with energy in an hour without intensity has
    no CO2e (it would understate), and says on how many days that happened."""
    energy: dict[date, EnergySums] = {}
    for day, sums in days:
        month = day.replace(day=1)
        energy[month] = energy.get(month, EnergySums()) + sums
    grams: dict[date, Decimal] = {}
    missing: dict[date, set[date]] = {}
    mean_of = HourMeans(intensity)
    for day, hour, wh in hours:
        month = day.replace(day=1)
        mean = mean_of(hour) if wh != 0 else _ZERO
        if mean is None:
            missing.setdefault(month, set()).add(day)
        else:
            grams[month] = grams.get(month, _ZERO) + wh * mean / _WH_PER_KWH
    return [
        MonthFootprint(
            month=month,
            energy=total,
            co2e_g=None if month in missing else grams.get(month, _ZERO).quantize(GRAMS_QUANTUM),
            days_without_intensity=len(missing.get(month, ())),
        )
        for month, total in sorted(energy.items())
    ]

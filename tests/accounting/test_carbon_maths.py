"""Energy and CO2e arithmetic, and the grid intensity CSV (pure: no database)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounting.carbon.footprint import (
    EnergySums,
    Intensity,
    IntensityStep,
    co2e_grams,
    energy_hour_shares,
    job_energy,
    local_day_bounds,
    measured_energy_wh,
    monthly_footprint,
    run_footprint,
    run_hours,
)
from accounting.carbon.series_csv import IntensityCsvError, intensity_csv_parse

PERTH = ZoneInfo("Australia/Perth")
SYDNEY = ZoneInfo("Australia/Sydney")


def at(day, hour=0, zone=UTC):
    return datetime(2026, 7, day, hour, tzinfo=zone)


def step(when, grams):
    return IntensityStep(starts_at=when, g_per_kwh=Decimal(grams))


# --- energy -----------------------------------------------------------------------------------


def test_measured_energy_is_joules_over_3600_and_none_without_a_measurement():
    assert measured_energy_wh(7200) == Decimal(2)
    assert measured_energy_wh(1) == Decimal("0.000278")
    assert measured_energy_wh(0) is None
    assert measured_energy_wh(None) is None


def test_a_job_uses_the_measurement_when_slurm_has_one_else_the_labelled_estimate():
    assert job_energy(consumed_energy_joules=36000, estimate_wh=Decimal(12)).source == "measured"
    assert job_energy(consumed_energy_joules=36000, estimate_wh=Decimal(12)).wh == Decimal(10)
    estimated = job_energy(consumed_energy_joules=0, estimate_wh=Decimal(12))
    assert (estimated.wh, estimated.source) == (Decimal(12), "estimated")


def test_best_energy_replaces_the_estimate_of_measured_jobs_by_their_measurement():
    sums = EnergySums(
        estimate_wh=Decimal(100), measured_wh=Decimal(30), measured_estimate_wh=Decimal(40),
        jobs=5, measured_jobs=2,
    )  # fmt: skip
    assert sums.estimated_wh == Decimal(60)
    assert sums.best_wh == Decimal(90)
    assert sums.measured_percent == Decimal("33.3")
    assert EnergySums().measured_percent is None


amounts = st.decimals(min_value=0, max_value=10**9, places=6)


@given(amounts, amounts, amounts, amounts)
def test_energy_sums_add_like_their_jobs(estimate, measured, other_estimate, other_measured):
    one = EnergySums(estimate_wh=estimate + measured, measured_wh=measured,
                     measured_estimate_wh=measured, jobs=2, measured_jobs=1)  # fmt: skip
    two = EnergySums(estimate_wh=other_estimate, measured_wh=other_measured,
                     measured_estimate_wh=Decimal(0), jobs=1)  # fmt: skip
    assert (one + two).best_wh == one.best_wh + two.best_wh
    assert (one + two).jobs == 3


def test_co2e_is_wh_times_g_per_kwh_over_1000_and_none_without_an_intensity():
    assert co2e_grams(energy_wh=Decimal(2000), g_per_kwh=Decimal(500)) == Decimal(1000)
    assert co2e_grams(energy_wh=Decimal(2), g_per_kwh=Decimal("0.5")) == Decimal("0.001")
    assert co2e_grams(energy_wh=Decimal(2000), g_per_kwh=None) is None


@given(amounts, st.decimals(min_value=0, max_value=2000, places=3), amounts)
def test_co2e_is_monotone_in_energy(energy, intensity, more):
    lower = co2e_grams(energy_wh=energy, g_per_kwh=intensity)
    higher = co2e_grams(energy_wh=energy + more, g_per_kwh=intensity)
    assert lower is not None
    assert higher is not None
    assert lower <= higher


# --- intensity at a time and over a day ---------------------------------------------------------


def test_the_intensity_at_a_time_is_the_newest_step_at_or_before_it_else_the_constant():
    intensity = Intensity(steps=[step(at(2), 300), step(at(1), 500)], constant=Decimal(700))
    assert intensity.at(at(1) - timedelta(seconds=1)) == Decimal(700)
    assert intensity.at(at(1)) == Decimal(500)
    assert intensity.at(at(1, 23)) == Decimal(500)
    assert intensity.at(at(2)) == Decimal(300)
    assert intensity.at(at(30)) == Decimal(300)


def test_no_series_and_no_constant_is_not_set():
    intensity = Intensity(steps=[], constant=None)
    assert not intensity.is_set
    assert intensity.at(at(1)) is None
    assert intensity.mean(at(1), at(2)) is None


def test_the_mean_over_a_day_weighs_each_step_by_its_time():
    intensity = Intensity(steps=[step(at(1), 400), step(at(1, 6), 800)], constant=None)
    assert intensity.mean(at(1), at(2)) == Decimal(700)  # 6 h at 400, 18 h at 800


def test_the_mean_leaves_out_the_part_of_a_day_before_the_series_when_there_is_no_constant():
    intensity = Intensity(steps=[step(at(1, 12), 600)], constant=None)
    assert intensity.mean(at(1), at(2)) == Decimal(600)
    with_constant = Intensity(steps=[step(at(1, 12), 600)], constant=Decimal(200))
    assert with_constant.mean(at(1), at(2)) == Decimal(400)


def test_a_local_day_across_a_change_of_clocks_has_its_own_length():
    start, end = local_day_bounds(date(2026, 10, 4), SYDNEY)  # clocks go forward: 23 hours
    assert (end.astimezone(UTC) - start.astimezone(UTC)) == timedelta(hours=23)
    # 1 hour of the local day at 0 g, 22 at 230: the mean is over 23 real hours
    intensity = Intensity(
        steps=[
            step(start.astimezone(UTC), 0),
            step(start.astimezone(UTC) + timedelta(hours=1), 230),
        ],
        constant=None,
    )
    assert intensity.mean(start, end) == Decimal(220)


series = st.lists(
    st.tuples(st.integers(min_value=0, max_value=24 * 3600 * 3), st.integers(0, 1500)),
    min_size=1, max_size=20, unique_by=lambda item: item[0],
)  # fmt: skip


@given(series, st.one_of(st.none(), st.integers(0, 1500)))
def test_a_daily_mean_lies_between_the_least_and_greatest_intensity_in_force(steps, constant):
    origin = datetime(2026, 7, 1, tzinfo=UTC)
    intensity = Intensity(
        steps=[step(origin + timedelta(seconds=offset), grams) for offset, grams in steps],
        constant=None if constant is None else Decimal(constant),
    )
    values = [Decimal(grams) for _, grams in steps] + (
        [] if constant is None else [Decimal(constant)]
    )
    mean = intensity.mean(origin + timedelta(days=1), origin + timedelta(days=2))
    if mean is not None:
        assert min(values) <= mean <= max(values)


# --- the hours of a run --------------------------------------------------------------------------

HOUR0 = 20_000 * 24  # 2024-10-04 00:00 UTC, in hours since 1970


def test_a_runs_energy_is_shared_over_its_hours_by_its_seconds_in_each():
    # 10:30 to 12:15 UTC: 30 min, 60 min, 15 min of 105 -> 2/7, 4/7, 1/7 of 7 Wh
    start, end = (HOUR0 + 10) * 3600 + 1800, (HOUR0 + 12) * 3600 + 900
    assert energy_hour_shares(7_000_000, start, end) == [
        (HOUR0 + 10, 2_000_000), (HOUR0 + 11, 4_000_000), (HOUR0 + 12, 1_000_000),
    ]  # fmt: skip
    # A run of no length (or a start after its end) puts it all in its end's hour.
    assert energy_hour_shares(5, end, end) == [(HOUR0 + 12, 5)]
    assert energy_hour_shares(5, end + 10, end) == [(HOUR0 + 12, 5)]
    # A run that ends on the hour has nothing in the next hour.
    assert energy_hour_shares(6, (HOUR0 + 1) * 3600, (HOUR0 + 3) * 3600) == [
        (HOUR0 + 1, 3), (HOUR0 + 2, 3),
    ]  # fmt: skip


@given(
    millionths=st.integers(min_value=0, max_value=10**15),
    start=st.integers(min_value=0, max_value=2 * 10**9),
    seconds=st.integers(min_value=0, max_value=40 * 86400),
)
def test_the_shares_of_a_run_add_up_to_its_energy_exactly_and_follow_its_seconds(
    millionths, start, seconds
):
    end = start + seconds
    shares = energy_hour_shares(millionths, start, end)
    assert sum(share for _, share in shares) == millionths
    assert all(share >= 0 for _, share in shares)
    hours = [hour for hour, _ in shares]
    assert hours == list(range(hours[0], hours[0] + len(hours)))
    if seconds:
        for hour, share in shares:
            inside = min(end, (hour + 1) * 3600) - max(start, hour * 3600)
            assert abs(share - millionths * inside / seconds) <= 1


def test_the_hours_a_run_reads_cover_it_from_its_first_hour_to_after_its_last():
    start, end = at(1, 10) + timedelta(minutes=30), at(1, 12) + timedelta(minutes=15)
    assert run_hours(start, end) == (at(1, 10), at(1, 13))
    assert run_hours(None, end) == (at(1, 12), at(1, 13))  # no start: its end's hour
    assert run_hours(end + timedelta(hours=2), end) == (at(1, 12), at(1, 13))


def test_a_jobs_co2e_takes_each_hour_of_its_run_at_that_hours_intensity():
    # 100 g/kWh until 11:00, 400 after: a 2 kWh job from 10:00 to 12:00 is 1 kWh at each
    intensity = Intensity(steps=[step(at(1, 0), 100), step(at(1, 11), 400)], constant=None)
    run = run_footprint(energy_wh=Decimal(2000), start=at(1, 10), end=at(1, 12),
                        intensity=intensity)  # fmt: skip
    assert run.co2e_g == Decimal(500)
    assert run.g_per_kwh == Decimal(250)  # the run's, not the end's 400
    # A step inside an hour: the hour is taken at its time-weighted mean.
    half = Intensity(steps=[step(at(1, 0), 100), step(at(1, 10) + timedelta(minutes=30), 300)],
                     constant=None)  # fmt: skip
    run = run_footprint(energy_wh=Decimal(1000), start=at(1, 10), end=at(1, 11), intensity=half)
    assert run.co2e_g == Decimal(200)


def test_a_job_with_an_hour_without_intensity_has_no_co2e():
    intensity = Intensity(steps=[step(at(1, 11), 400)], constant=None)
    run = run_footprint(energy_wh=Decimal(2000), start=at(1, 10), end=at(1, 12),
                        intensity=intensity)  # fmt: skip
    assert run == run.__class__(co2e_g=None, g_per_kwh=None)
    started_late = run_footprint(energy_wh=Decimal(2000), start=at(1, 11), end=at(1, 12),
                                 intensity=intensity)  # fmt: skip
    assert started_late.co2e_g == Decimal(800)


# --- months -------------------------------------------------------------------------------------


def test_a_month_takes_the_energy_of_its_days_and_the_co2e_of_its_hours():
    days = [
        (date(2026, 7, 1), EnergySums(estimate_wh=Decimal(1000), jobs=1)),
        (date(2026, 7, 2), EnergySums(estimate_wh=Decimal(2000), jobs=2)),
        (date(2026, 8, 1), EnergySums(estimate_wh=Decimal(500), jobs=1)),
    ]
    hour = int(at(1, 0).timestamp()) // 3600
    intensity = Intensity(steps=[step(at(1, 0), 100), step(at(1, 12), 400)], constant=None)
    hours = [
        (date(2026, 7, 1), hour + 3, Decimal(1000)),  # at 100
        (date(2026, 7, 2), hour + 20, Decimal(1500)),  # at 400
        (date(2026, 7, 2), hour + 5, Decimal(500)),  # at 100
        (date(2026, 8, 1), hour + 30, Decimal(500)),  # at 400: the job ended in August
    ]
    july, august = monthly_footprint(days, hours, intensity)
    assert july.month == date(2026, 7, 1)
    assert july.energy.best_wh == Decimal(3000)
    assert july.co2e_g == Decimal(100 + 600 + 50)
    assert july.mean_g_per_kwh == Decimal("250.0")
    assert august.co2e_g == Decimal(200)


def test_a_month_with_an_hour_of_energy_and_no_intensity_has_no_co2e():
    days = [
        (date(2026, 7, 1), EnergySums(estimate_wh=Decimal(1000), jobs=1)),
        (date(2026, 7, 2), EnergySums(estimate_wh=Decimal(1000), jobs=1)),
    ]
    hour = int(at(1, 0).timestamp()) // 3600
    intensity = Intensity(steps=[step(at(1, 12), 400)], constant=None)
    hours = [(date(2026, 7, 1), hour + 3, Decimal(1000)), (date(2026, 7, 2), hour + 30,
             Decimal(1000)), (date(2026, 7, 2), hour + 2, Decimal(0))]  # fmt: skip
    (july,) = monthly_footprint(days, hours, intensity)
    assert july.co2e_g is None
    assert july.days_without_intensity == 1


@given(
    runs=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10**9),  # millionths of a Wh
            st.integers(min_value=0, max_value=30 * 86400),  # start, seconds into July
            st.integers(min_value=0, max_value=3 * 86400),  # seconds
        ),
        max_size=20,
    )
)
def test_a_months_co2e_is_the_sum_of_its_jobs_co2e(runs):
    """The one rule: what the hourly roll-ups give a month is what its jobs' pages add up to."""
    origin = at(1, 0)
    intensity = Intensity(
        steps=[step(origin + timedelta(minutes=37 * k), 100 + (k * 53) % 700) for k in range(2000)],
        constant=Decimal(480),
    )
    hours: dict[int, int] = {}
    jobs_grams = Decimal(0)
    total = Decimal(0)
    for millionths, offset, seconds in runs:
        start = origin + timedelta(seconds=offset)
        end = start + timedelta(seconds=seconds)
        wh = Decimal(millionths).scaleb(-6)
        total += wh
        jobs_grams += run_footprint(energy_wh=wh, start=start, end=end,
                                    intensity=intensity).co2e_g  # fmt: skip
        for hour, share in energy_hour_shares(millionths, int(start.timestamp()),
                                              int(end.timestamp())):  # fmt: skip
            hours[hour] = hours.get(hour, 0) + share
    days = [(date(2026, 7, 1), EnergySums(estimate_wh=total, jobs=len(runs)))]
    rows = [(date(2026, 7, 1), hour, Decimal(m).scaleb(-6)) for hour, m in hours.items()]
    (july,) = monthly_footprint(days, rows, intensity)
    # Each job's grams are rounded to the milligram, the month's once.
    assert abs(july.co2e_g - jobs_grams) <= Decimal("0.0005") * (len(runs) + 1)


# --- the CSV ------------------------------------------------------------------------------------


def parse(text, zone=PERTH):
    return intensity_csv_parse(text.splitlines(keepends=True), zone=zone)


def test_a_csv_with_offsets_blank_lines_and_other_columns_is_read_in_utc_in_time_order():
    rows = parse(
        "start,g_per_kwh,source\n"
        "2026-07-01T09:00:00+08:00,500.5,grid\n"
        "\n"
        "2026-07-01T00:00Z,480,grid\n"
    )
    assert [(row.starts_at, row.g_per_kwh) for row in rows] == [
        (datetime(2026, 7, 1, 0, tzinfo=UTC), Decimal(480)),
        (datetime(2026, 7, 1, 1, tzinfo=UTC), Decimal("500.5")),
    ]


def test_a_start_given_twice_is_refused_naming_both_lines():
    with pytest.raises(IntensityCsvError) as error:
        parse("start,g_per_kwh\n2026-07-01T08:00:00+08:00,500\n2026-07-01T00:00Z,480\n")
    assert "line 3: start 2026-07-01T00:00:00+00:00 is also on line 2" in str(error.value)


def test_local_times_are_the_clusters_and_a_bare_date_is_its_midnight():
    rows = parse("Start,G_per_kWh\n2026-07-02 00:00,300\n2026-07-01T00:00Z,480\n2026-07-03,200\n")
    assert [(row.starts_at, row.g_per_kwh) for row in rows] == [
        (datetime(2026, 7, 1, 0, tzinfo=UTC), Decimal(480)),
        (datetime(2026, 7, 1, 16, tzinfo=UTC), Decimal(300)),
        (datetime(2026, 7, 2, 16, tzinfo=UTC), Decimal(200)),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("2026-13-01,300", "line 3: start '2026-13-01' is not an ISO 8601 time"),
        ("2026-07-05,abc", "line 3: g_per_kwh 'abc' is not a number"),
        ("2026-07-05,-1", "line 3: g_per_kwh -1 is negative"),
        ("2026-07-05,NaN", "line 3: g_per_kwh 'NaN' is not a number"),
        ("2026-07-05,1e9", "line 3: g_per_kwh 1e9 is above 100,000 g/kWh"),
        ("2026-07-05,1.2345", "line 3: g_per_kwh 1.2345 has more than 3 decimal places"),
        ("2026-07-05", "line 3: 1 columns, the header has 2"),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_returned(line, message):
    with pytest.raises(IntensityCsvError) as error:
        parse(f"start,g_per_kwh\n2026-07-04,250\n{line}\n")
    assert message in str(error.value)
    assert str(error.value).startswith("nothing loaded: ")


def test_every_bad_line_is_reported_at_once():
    with pytest.raises(IntensityCsvError) as error:
        parse("start,g_per_kwh\nx,1\ny,2\n2026-07-01,z\n")
    assert len(error.value.problems) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("when,grams\n2026-07-01,3\n", "the header has no column start, g_per_kwh"),
        ("start,g_per_kwh\n", "the file has a header but no rows"),
    ],
)
def test_a_file_without_a_header_or_rows_is_refused(text, message):
    with pytest.raises(IntensityCsvError, match=message):
        parse(text)


def test_a_byte_order_mark_before_the_header_is_ignored():
    assert len(parse("\ufeffstart,g_per_kwh\n2026-07-01,3\n")) == 1


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 5000)), min_size=1, max_size=30,
                unique_by=lambda item: item[0]))  # fmt: skip
def test_any_written_series_reads_back_the_same(rows):
    origin = datetime(2026, 1, 1, tzinfo=UTC)
    text = "start,g_per_kwh\n" + "".join(
        f"{(origin + timedelta(minutes=minute)).isoformat()},{grams}\n" for minute, grams in rows
    )
    parsed = intensity_csv_parse(text.splitlines(keepends=True), zone=PERTH)
    assert [(row.starts_at, row.g_per_kwh) for row in parsed] == sorted(
        (origin + timedelta(minutes=minute), Decimal(grams)) for minute, grams in rows
    )


def test_a_windows_co2e_is_its_months_and_none_when_a_month_has_none():
    from accounting.carbon.footprint import EnergySums, MonthFootprint, window_co2e_g

    def month(grams):
        return MonthFootprint(
            month=date(2026, 1, 1), energy=EnergySums(), co2e_g=grams, days_without_intensity=0
        )

    assert window_co2e_g([month(Decimal(5)), month(Decimal("2.5"))]) == Decimal("7.5")
    assert window_co2e_g([month(Decimal(5)), month(None)]) is None
    assert window_co2e_g([]) == 0

"""Q(T), Q(T) paper eqs 9-12, and classical utilisation, by hand and by property. Pure: no
database. The machine of the hand-computed tests: 10 nodes of one 4-core CPU at 4 GFLOP/s,
so one core is 1 GFLOP/s, and the window 10:00-12:00 holds Op = 10 * 4e9 * 7200 FLOP."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.utilisation.peak import (
    DevicePeak,
    NodePeak,
    PeakPeriod,
    PeakSource,
    epoch_seconds,
    peak_timeline,
)
from accounting.utilisation.quality import (
    AllocatedJob,
    HourlyContribution,
    Step,
    Utilisation,
    UtilisationError,
    bucket_boundaries,
    hourly_contributions,
    utilisation_series,
    utilisation_series_from_hours,
    utilisation_window,
)

GIGA = 10**9
CPU_NODE = NodePeak(
    sockets=1, cores_per_socket=4, cpu=DevicePeak(Decimal(4 * GIGA), PeakSource.VENDOR)
)
GPU_NODE = NodePeak(
    sockets=1,
    cores_per_socket=4,
    cpu=DevicePeak(Decimal(4 * GIGA), PeakSource.VENDOR),
    gpus=2,
    gpu=DevicePeak(Decimal(10 * GIGA), PeakSource.VENDOR),
)


def at(hour: int, minute: int = 0, day: int = 1) -> datetime:
    return datetime(2024, 3, day, tzinfo=UTC) + timedelta(hours=hour, minutes=minute)


CPU = {"cpu": peak_timeline([PeakPeriod(at(0), 10, CPU_NODE)])}
OP = 10 * 4 * GIGA * 7200  # eq 9 for 10:00-12:00


def job(start: datetime, end: datetime, cores: int, gpus: int = 0, partition: str = "cpu"):
    return AllocatedJob(partition=partition, start=start, end=end, cores=cores, gpus=gpus)


TEN, NOON = at(10), at(12)


def window(jobs, partitions=CPU, start=TEN, end=NOON) -> Utilisation:
    return utilisation_window(jobs=jobs, partitions=partitions, start=start, end=end).total


# Hand-computed windows ------------------------------------------------------------------------


def test_a_job_fully_inside_the_window_counts_whole():
    result = window([job(at(10, 30), at(11, 30), cores=4)])
    assert result.used_flop == 4 * GIGA * 3600  # eq 10: R_core * P_cpu / n * t
    assert result.capacity_flop == OP
    assert result.q_percent == Decimal("5.000000")
    assert result.core_percent == Decimal("5.000000")  # 4 * 3600 of 40 * 7200 core-seconds


def test_a_job_straddling_the_start_counts_only_after_it():
    result = window([job(at(9), at(10, 30), cores=8)])
    assert result.used_flop == 8 * GIGA * 1800
    assert result.q_percent == Decimal(5)


def test_a_job_straddling_the_end_counts_only_before_it():
    result = window([job(at(11), at(13), cores=2)])
    assert result.used_flop == 2 * GIGA * 3600
    assert result.q_percent == Decimal("2.5")


def test_a_job_covering_the_whole_window_counts_for_the_window():
    result = window([job(at(8), at(14), cores=1)])
    assert result.used_flop == 1 * GIGA * 7200
    assert result.q_percent == Decimal("2.5")


def test_the_four_cases_of_figure_1_add_up():
    result = window(
        [
            job(at(10, 30), at(11, 30), cores=4),
            job(at(9), at(10, 30), cores=8),
            job(at(11), at(13), cores=2),
            job(at(8), at(14), cores=1),
            job(at(7), at(9), cores=40),  # before the window
            job(at(12), at(13), cores=40),  # after it: the window is half-open
        ]
    )
    assert result.q == Fraction(15, 100)
    assert result.core_seconds == 4 * 3600 + 8 * 1800 + 2 * 3600 + 7200


def test_no_jobs_is_zero_percent():
    result = window([])
    assert result.q_percent == Decimal(0)
    assert result.core_percent == Decimal(0)


def test_a_partition_without_gpus_has_q_from_its_cpus_and_no_gpu_utilisation():
    result = window([job(at(10), at(12), cores=20)])
    assert result.q_percent == Decimal(50)
    assert result.available_gpu_seconds == 0
    assert result.gpu_percent is None


def test_gpus_count_whole_with_their_peak_beside_the_reserved_cores():
    partitions = {"gpu": peak_timeline([PeakPeriod(at(0), 2, GPU_NODE)])}
    result = window([job(at(10), at(11), cores=2, gpus=1, partition="gpu")], partitions)
    # eq 10: (2 * 4e9 / 4 + 1 * 10e9) * 3600; eq 9: 2 * (4e9 + 2 * 10e9) * 7200
    assert result.used_flop == (2 * GIGA + 10 * GIGA) * 3600
    assert result.capacity_flop == 2 * 24 * GIGA * 7200
    assert result.q == Fraction(12 * 3600, 48 * 7200)
    assert result.gpu_percent == Decimal("12.5")  # 1 GPU-hour of 2 nodes * 2 GPUs * 2 hours


def test_nodes_added_in_the_middle_of_the_window_count_from_then_on():
    partitions = {
        "cpu": peak_timeline([PeakPeriod(at(0), 10, CPU_NODE), PeakPeriod(at(11), 20, CPU_NODE)])
    }
    result = window([job(at(10), at(12), cores=4)], partitions)
    assert result.capacity_flop == 4 * GIGA * (10 * 3600 + 20 * 3600)
    assert result.q == Fraction(4 * 7200, 4 * 108_000)  # 6.67 %, not 5 %
    assert result.available_core_seconds == 4 * (10 * 3600 + 20 * 3600)


def test_faster_nodes_from_a_date_price_the_job_with_the_hardware_then():
    faster = NodePeak(
        sockets=1, cores_per_socket=4, cpu=DevicePeak(Decimal(8 * GIGA), PeakSource.FORMULA)
    )
    partitions = {
        "cpu": peak_timeline([PeakPeriod(at(0), 10, CPU_NODE), PeakPeriod(at(11), 10, faster)])
    }
    result = window([job(at(10), at(12), cores=4)], partitions)
    assert result.used_flop == 4 * GIGA * 3600 + 8 * GIGA * 3600
    assert result.capacity_flop == 40 * GIGA * 3600 + 80 * GIGA * 3600


def test_the_cluster_total_adds_the_partitions():
    partitions = {**CPU, "gpu": peak_timeline([PeakPeriod(at(0), 2, GPU_NODE)])}
    result = utilisation_window(
        jobs=[job(at(10), at(12), cores=4), job(at(10), at(12), cores=4, gpus=2, partition="gpu")],
        partitions=partitions,
        start=at(10),
        end=at(12),
    )
    assert result.total == result.partitions["cpu"] + result.partitions["gpu"]
    assert result.total.q == Fraction(4 + 4 + 20, 40 + 48)


def test_a_job_on_an_unknown_partition_is_refused():
    with pytest.raises(UtilisationError, match="unknown partition 'gpu'"):
        window([job(at(10), at(11), cores=1, partition="gpu")])


def test_gpus_on_a_partition_without_gpus_are_refused():
    with pytest.raises(UtilisationError, match="has none"):
        window([job(at(10), at(11), cores=1, gpus=1)])


def test_a_job_before_the_partition_existed_is_refused():
    partitions = {"cpu": peak_timeline([PeakPeriod(at(11), 10, CPU_NODE)])}
    with pytest.raises(UtilisationError, match="before its first period"):
        window([job(at(10), at(12), cores=1)], partitions)


def test_a_job_that_ends_before_it_starts_is_refused():
    with pytest.raises(UtilisationError, match="ends before it starts"):
        job(at(11), at(10), cores=1)


def test_no_capacity_gives_no_q_rather_than_a_division_by_zero():
    partitions = {"cpu": peak_timeline([PeakPeriod(at(0), 0, CPU_NODE)])}
    result = window([], partitions)
    assert result.q is None
    assert result.q_percent is None
    assert result.core_percent is None


# Buckets -------------------------------------------------------------------------------------

PERTH = ZoneInfo("Australia/Perth")
LONG_JOBS = [
    job(at(5, day=1), at(20, day=3), cores=7),
    job(at(23, 59, day=9), at(0, 1, day=10), cores=40),
    job(at(12, day=15), at(12, day=18), cores=3),
    job(at(0, day=28), at(0, day=31) + timedelta(days=5), cores=11),
]


@pytest.mark.parametrize("step", list(Step))
def test_buckets_of_every_step_add_up_to_the_window(step):
    start, end = at(3, day=1), at(7, day=31) + timedelta(days=3)
    series = utilisation_series(
        jobs=LONG_JOBS, partitions=CPU, start=start, end=end, step=step, timezone=PERTH
    )
    whole = window(LONG_JOBS, start=start, end=end)
    assert sum((bucket.total for bucket in series), start=Utilisation()) == whole
    assert series[0].start == start
    assert series[-1].end == end
    assert all(a.end == b.start for a, b in itertools.pairwise(series))


def test_month_buckets_are_calendar_months_in_the_cluster_time_zone():
    edges = bucket_boundaries(
        start=datetime(2024, 1, 15, tzinfo=PERTH),
        end=datetime(2024, 4, 1, tzinfo=PERTH),
        step="month",
        timezone=PERTH,
    )
    assert [edge.astimezone(PERTH).date().isoformat() for edge in edges] == [
        "2024-01-15",
        "2024-02-01",
        "2024-03-01",
        "2024-04-01",
    ]
    assert edges[1] == datetime(2024, 1, 31, 16, tzinfo=UTC)  # Perth midnight is 16:00 UTC


def test_week_buckets_start_on_monday():
    edges = bucket_boundaries(start=at(0, day=1), end=at(0, day=20), step=Step.WEEK, timezone="UTC")
    assert [edge.day for edge in edges] == [1, 4, 11, 18, 20]  # 2024-03-04 is a Monday


def test_a_day_bucket_across_a_dst_change_is_23_hours_long():
    berlin = ZoneInfo("Europe/Berlin")
    edges = bucket_boundaries(
        start=datetime(2024, 3, 30, tzinfo=berlin),
        end=datetime(2024, 4, 1, tzinfo=berlin),
        step=Step.DAY,
        timezone=berlin,
    )
    assert [(b - a).total_seconds() / 3600 for a, b in itertools.pairwise(edges)] == [
        24,
        23,
    ]


def test_hours_follow_the_local_clock_in_a_half_hour_time_zone():
    edges = bucket_boundaries(start=at(0), end=at(3), step=Step.HOUR, timezone="Australia/Adelaide")
    assert [edge.strftime("%H:%M") for edge in edges] == [
        "00:00",
        "00:30",
        "01:30",
        "02:30",
        "03:00",
    ]


# The incremental form ------------------------------------------------------------------------


def test_hourly_contributions_split_a_job_at_the_hours():
    rows = list(hourly_contributions(job(at(10, 30), at(12, 15), cores=2), timezone="UTC"))
    assert rows == [
        HourlyContribution("cpu", at(10), core_seconds=2 * 1800, gpu_seconds=0),
        HourlyContribution("cpu", at(11), core_seconds=2 * 3600, gpu_seconds=0),
        HourlyContribution("cpu", at(12), core_seconds=2 * 900, gpu_seconds=0),
    ]


def test_hourly_rows_give_the_same_days_as_the_jobs():
    rows = [row for j in LONG_JOBS for row in hourly_contributions(j, timezone=PERTH)]
    start, end = datetime(2024, 3, 1, tzinfo=PERTH), datetime(2024, 4, 8, tzinfo=PERTH)
    arguments = {"partitions": CPU, "start": start, "end": end, "step": "day", "timezone": PERTH}
    assert utilisation_series_from_hours(hours=rows, **arguments) == utilisation_series(
        jobs=LONG_JOBS, **arguments
    )


def test_hourly_rows_of_another_time_zone_are_refused():
    rows = list(hourly_contributions(job(at(10), at(11), cores=2), timezone="UTC"))
    with pytest.raises(UtilisationError, match="not on the hour"):
        utilisation_series_from_hours(
            hours=rows,
            partitions=CPU,
            start=at(9, 30),
            end=at(12, 30),
            step="hour",
            timezone="Australia/Adelaide",
        )


def test_a_window_that_hours_cannot_cut_is_refused():
    with pytest.raises(UtilisationError, match="not on the hour"):
        utilisation_series_from_hours(
            hours=[], partitions=CPU, start=at(10, 5), end=at(12), step="hour", timezone="UTC"
        )


def test_hardware_changing_inside_an_hour_is_refused_for_hourly_rows():
    faster = NodePeak(
        sockets=1, cores_per_socket=4, cpu=DevicePeak(Decimal(8 * GIGA), PeakSource.FORMULA)
    )
    partitions = {
        "cpu": peak_timeline([PeakPeriod(at(0), 10, CPU_NODE), PeakPeriod(at(11, 20), 10, faster)])
    }
    with pytest.raises(UtilisationError, match="inside an hour"):
        utilisation_series_from_hours(
            hours=[], partitions=partitions, start=at(10), end=at(12), step="day", timezone="UTC"
        )


def test_a_node_count_change_inside_an_hour_is_fine_for_hourly_rows():
    partitions = {
        "cpu": peak_timeline(
            [PeakPeriod(at(0), 10, CPU_NODE), PeakPeriod(at(11, 20), 12, CPU_NODE)]
        )
    }
    jobs = [job(at(10, 10), at(11, 50), cores=4)]
    rows = [row for j in jobs for row in hourly_contributions(j, timezone="UTC")]
    arguments = {"partitions": partitions, "start": at(10), "end": at(12), "step": "hour"}
    assert utilisation_series_from_hours(
        hours=rows, timezone="UTC", **arguments
    ) == utilisation_series(jobs=jobs, timezone="UTC", **arguments)


# Properties ----------------------------------------------------------------------------------

ZONES = ["UTC", "Australia/Perth", "Europe/Berlin", "Australia/Adelaide", "Asia/Kolkata"]
BASE = datetime(2024, 3, 25, tzinfo=UTC)  # a week with Europe's DST change in it


def local_hour(when: datetime, zone: str) -> datetime:
    """The local hour boundary at or before ``when`` in ``zone`` (:30 UTC in India)."""
    return when.astimezone(ZoneInfo(zone)).replace(minute=0, second=0)


@st.composite
def timelines(draw: st.DrawFn, zone: str) -> dict:
    """A CPU and a GPU partition; node counts change at any second, hardware on the hour."""
    partitions = {}
    for name, node in (("cpu", CPU_NODE), ("gpu", GPU_NODE)):
        periods = [PeakPeriod(BASE - timedelta(days=30), draw(st.integers(1, 20)), node)]
        offsets = draw(st.lists(st.integers(0, 14 * 86400), max_size=3, unique=True))
        for offset in sorted(offsets):
            when = BASE + timedelta(seconds=offset)
            if draw(st.booleans()) and local_hour(when, zone) > periods[-1].effective_from:
                # a faster node, from a local hour boundary
                when = local_hour(when, zone)
                node = NodePeak(
                    sockets=node.sockets,
                    cores_per_socket=node.cores_per_socket,
                    cpu=DevicePeak(node.cpu.flops * 2, PeakSource.FORMULA),
                    gpus=node.gpus,
                    gpu=node.gpu,
                )
            periods.append(PeakPeriod(when, draw(st.integers(0, 20)), node))
        unique = {epoch_seconds(period.effective_from): period for period in periods}
        partitions[name] = peak_timeline(unique.values())
    return partitions


@st.composite
def allocated_jobs(draw: st.DrawFn) -> list[AllocatedJob]:
    jobs = []
    for _ in range(draw(st.integers(0, 12))):
        start = BASE + timedelta(seconds=draw(st.integers(-86400, 16 * 86400)))
        end = start + timedelta(seconds=draw(st.integers(0, 5 * 86400)))
        partition = draw(st.sampled_from(["cpu", "gpu"]))
        gpus = draw(st.integers(0, 4)) if partition == "gpu" else 0
        jobs.append(job(start, end, cores=draw(st.integers(0, 16)), gpus=gpus, partition=partition))
    return jobs


@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    jobs=allocated_jobs(),
    step=st.sampled_from(list(Step)),
    zone=st.sampled_from(ZONES),
    first_hour=st.integers(0, 48),
    hours=st.integers(1, 14 * 24),
)
def test_hourly_contributions_reaggregated_equal_the_direct_computation(
    data, jobs, step, zone, first_hour, hours
):
    partitions = data.draw(timelines(zone))
    start = local_hour(BASE + timedelta(hours=first_hour), zone)
    end = start + timedelta(hours=hours)
    rows = [row for j in jobs for row in hourly_contributions(j, timezone=zone)]
    arguments = {
        "partitions": partitions,
        "start": start,
        "end": end,
        "step": step,
        "timezone": zone,
    }
    assert utilisation_series_from_hours(hours=rows, **arguments) == utilisation_series(
        jobs=jobs, **arguments
    )


@settings(max_examples=150, deadline=None)
@given(
    jobs=allocated_jobs(),
    step=st.sampled_from(list(Step)),
    zone=st.sampled_from(ZONES),
    hours=st.integers(1, 14 * 24),
)
def test_splitting_into_buckets_conserves_core_seconds(jobs, step, zone, hours):
    start, end = BASE, BASE + timedelta(hours=hours, seconds=17)
    partitions = {
        name: peak_timeline([PeakPeriod(BASE - timedelta(days=2), 1, node)])
        for name, node in (("cpu", CPU_NODE), ("gpu", GPU_NODE))
    }
    series = utilisation_series(
        jobs=jobs, partitions=partitions, start=start, end=end, step=step, timezone=zone
    )
    overlap = [max(0, (min(j.end, end) - max(j.start, start)).total_seconds()) for j in jobs]
    assert sum(bucket.total.core_seconds for bucket in series) == sum(
        j.cores * seconds for j, seconds in zip(jobs, overlap, strict=True)
    )
    assert sum(bucket.total.gpu_seconds for bucket in series) == sum(
        j.gpus * seconds for j, seconds in zip(jobs, overlap, strict=True)
    )
    rows = [row for j in jobs for row in hourly_contributions(j, timezone=zone)]
    assert sum(row.core_seconds for row in rows) == sum(
        j.cores * (j.end - j.start).total_seconds() for j in jobs
    )


@st.composite
def jobs_that_fit(draw: st.DrawFn) -> tuple[int, list[AllocatedJob]]:
    """Jobs whose cores and GPUs together never exceed the machine's, whenever they run."""
    nodes = draw(st.integers(1, 8))
    cores_left, gpus_left = nodes * GPU_NODE.cores, nodes * GPU_NODE.gpus
    jobs = []
    for _ in range(draw(st.integers(0, 10))):
        cores = draw(st.integers(0, cores_left))
        gpus = draw(st.integers(0, gpus_left))
        cores_left, gpus_left = cores_left - cores, gpus_left - gpus
        start = BASE + timedelta(seconds=draw(st.integers(-86400, 3 * 86400)))
        end = start + timedelta(seconds=draw(st.integers(0, 3 * 86400)))
        jobs.append(job(start, end, cores=cores, gpus=gpus, partition="gpu"))
    return nodes, jobs


@settings(max_examples=150, deadline=None)
@given(case=jobs_that_fit(), step=st.sampled_from(list(Step)))
def test_q_stays_within_0_and_100_percent_when_jobs_fit_the_machine(case, step):
    nodes, jobs = case
    partitions = {"gpu": peak_timeline([PeakPeriod(BASE - timedelta(days=2), nodes, GPU_NODE)])}
    series = utilisation_series(
        jobs=jobs,
        partitions=partitions,
        start=BASE,
        end=BASE + timedelta(days=2),
        step=step,
        timezone="UTC",
    )
    for bucket in series:
        assert bucket.total.q is not None
        assert 0 <= bucket.total.q <= 1
        assert Decimal(0) <= bucket.total.q_percent <= Decimal(100)


@given(
    st.integers(min_value=-(10**30), max_value=10**30).filter(bool),
    st.fractions(min_value=-1000, max_value=1000),
)
def test_percent_text_prints_exactly_the_rounded_percentage(whole, ratio):
    from accounting.utilisation.quality import _percent, _percent_text

    # ratios up to 1000 (100,000 %): beyond that the Decimal's 28 digits would round
    part = int(ratio * whole)
    assert _percent_text(part, whole) == str(_percent(part, whole))
    assert _percent_text(part, 0) is None


def test_percent_text_rounds_half_to_even_at_the_sixth_place():
    from accounting.utilisation.quality import _percent_text

    # 1/8 % = 0.125 %: exact; 1 / 16,000,000 = 0.00000625 %: half a quantum, rounds to even
    assert _percent_text(1, 800) == "0.125000"
    assert _percent_text(1, 16_000_000) == "0.000006"
    assert _percent_text(3, 16_000_000) == "0.000019"
    assert _percent_text(0, 5) == "0.000000"

"""Q(T) read from the database (``utilisation_series_get``, ``utilisation_report_get``), by hand.

The cluster of these tests is the maths tests' machine in a spec file: partition ``cpu`` has
10 nodes of one 4-core CPU at a vendor 4 GFLOP/s (one core is 1 GFLOP/s), partition ``gpu`` one
such node with 2 GPUs at 10 GFLOP/s each. The window 10:00-12:00 UTC of the ``cpu`` partition
holds Op = 10 * 4e9 * 7200 FLOP. Jobs are recorded as the import records them: their
``hourly_contributions`` added into ``UtilisationHourly`` rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_parse
from accounting.models import Cluster, Partition, UtilisationHourly
from accounting.utilisation.peak import PeakError, PeakSource
from accounting.utilisation.quality import (
    AllocatedJob,
    UtilisationError,
    WindowError,
    hourly_contributions,
    requested_window,
)
from accounting.utilisation.selectors import utilisation_report_get, utilisation_series_get

pytestmark = pytest.mark.django_db

GIGA = 10**9
DAY = datetime(2026, 3, 2, tzinfo=UTC)
TEN, NOON = DAY + timedelta(hours=10), DAY + timedelta(hours=12)
OP = 10 * 4 * GIGA * 7200  # eq 9 for 10:00-12:00 on the cpu partition


def at(hour: int, minute: int = 0) -> datetime:
    return DAY + timedelta(hours=hour, minutes=minute)


def spec(cpu_nodes: str = "n[01-10]") -> dict:
    common = {"sockets": 1, "cores_per_socket": 4, "memory_mb": 16000, "cpu_tdp_watts": 100,
              "cpu_peak_flops": 4 * GIGA}  # fmt: skip
    return {
        "name": "qt",
        "timezone": "UTC",
        "partitions": [
            {"name": "cpu", "nodelist": cpu_nodes, **common},
            {"name": "gpu", "nodelist": "g01", **common, "gpus": 2, "gpu_tdp_watts": 300,
             "gpu_peak_flops": 10 * GIGA},
        ],
    }  # fmt: skip


@pytest.fixture
def cluster() -> Cluster:
    cluster_apply(definition=cluster_definition_parse(spec()))
    return Cluster.objects.get(name="qt")


def record(cluster: Cluster, *jobs: AllocatedJob) -> None:
    """Add the jobs' hourly rows, as the import does."""
    partitions = {partition.name: partition for partition in cluster.partitions.all()}
    for job in jobs:
        for row in hourly_contributions(job, timezone=cluster.zoneinfo):
            hour, _ = UtilisationHourly.objects.get_or_create(
                partition=partitions[row.partition], hour_start=row.hour_start
            )
            hour.core_seconds += row.core_seconds
            hour.gpu_seconds += row.gpu_seconds
            hour.save()


def job(start: datetime, end: datetime, cores: int, gpus: int = 0, partition: str = "cpu"):
    return AllocatedJob(partition=partition, start=start, end=end, cores=cores, gpus=gpus)


def cpu_window(cluster: Cluster, start: datetime = TEN, end: datetime = NOON):
    partition = Partition.objects.get(cluster=cluster, name="cpu")
    (window,) = utilisation_series_get(
        cluster=cluster, partition=partition, start=start, end=end, step="month"
    )
    return window.total


def test_a_job_inside_the_window_counts_whole(cluster):
    record(cluster, job(at(10, 30), at(11, 30), cores=4))
    figures = cpu_window(cluster)
    assert figures.capacity_flop == OP
    assert figures.used_flop == 4 * GIGA * 3600  # eq 10: R_core * P_cpu / n * t
    assert figures.q_percent == Decimal("5.000000")


def test_a_job_straddling_the_start_counts_only_inside(cluster):
    record(cluster, job(at(9), at(10, 30), cores=8))
    assert cpu_window(cluster).q_percent == Decimal(5)  # 8 cores for 30 of 120 minutes


def test_a_job_straddling_the_end_counts_only_inside(cluster):
    record(cluster, job(at(11), at(13), cores=2))
    assert cpu_window(cluster).q_percent == Decimal("2.5")


def test_a_job_covering_the_window_counts_for_the_window(cluster):
    record(cluster, job(at(8), at(14), cores=1))
    assert cpu_window(cluster).q_percent == Decimal("2.5")


def test_figure_1s_four_cases_together_give_15_percent(cluster):
    record(
        cluster,
        job(at(10, 30), at(11, 30), cores=4),
        job(at(9), at(10, 30), cores=8),
        job(at(11), at(13), cores=2),
        job(at(8), at(14), cores=1),
    )
    figures = cpu_window(cluster)
    assert figures.q == Fraction(15, 100)
    assert figures.core_percent == Decimal(15)  # one kind of core: Q equals core-hours


def test_nodes_added_in_the_window_count_from_then_on(cluster):
    cluster_apply(definition=cluster_definition_parse(spec("n[01-20]")), effective_from=at(11))
    record(cluster, job(at(10), at(12), cores=4))
    figures = cpu_window(cluster)
    assert figures.capacity_flop == 4 * GIGA * (10 * 3600 + 20 * 3600)
    assert figures.q == Fraction(4 * 7200, 4 * 108_000)  # 6.67 %, not 5 %
    assert figures.available_core_seconds == 4 * (10 * 3600 + 20 * 3600)


def test_a_node_count_change_splits_hourly_buckets_exactly(cluster):
    cluster_apply(definition=cluster_definition_parse(spec("n[01-20]")), effective_from=at(11))
    record(cluster, job(at(10), at(12), cores=4))
    partition = Partition.objects.get(cluster=cluster, name="cpu")
    before, after = utilisation_series_get(
        cluster=cluster, partition=partition, start=TEN, end=NOON, step="hour"
    )
    assert before.total.q_percent == Decimal(10)  # 4 of 40 cores
    assert after.total.q_percent == Decimal(5)  # 4 of 80 cores


def test_a_partition_without_gpus_has_no_gpu_percentage(cluster):
    record(cluster, job(at(10), at(11), cores=4))
    assert cpu_window(cluster).gpu_percent is None


def test_gpus_count_with_their_peak_and_the_total_adds_the_partitions(cluster):
    record(cluster, job(at(10), at(12), cores=4), job(at(10), at(12), 4, gpus=2, partition="gpu"))
    (window,) = utilisation_series_get(cluster=cluster, start=TEN, end=NOON, step="day")
    gpu = window.partitions["gpu"]
    assert gpu.used_flop == (4 * GIGA + 2 * 10 * GIGA) * 7200  # eqs 10-11
    assert gpu.capacity_flop == (4 * GIGA + 2 * 10 * GIGA) * 7200
    assert gpu.q_percent == Decimal(100)
    assert gpu.gpu_percent == Decimal(100)
    assert window.total == window.partitions["cpu"] + gpu
    assert window.total.q == Fraction(4 + 24, 40 + 24)


def test_no_rows_is_zero_percent_not_missing(cluster):
    series = utilisation_series_get(cluster=cluster, start=TEN, end=NOON, step="hour")
    assert [window.total.q_percent for window in series] == [Decimal(0), Decimal(0)]
    assert series[0].partitions["gpu"].gpu_percent == Decimal(0)


def test_buckets_add_up_to_the_window(cluster):
    record(cluster, job(at(3, 17), at(22, 41), cores=3), job(at(9), at(15), 1, 1, "gpu"))
    start, end = at(0), at(24)
    hours = utilisation_series_get(cluster=cluster, start=start, end=end, step="hour")
    (day,) = utilisation_series_get(cluster=cluster, start=start, end=end, step="day")
    assert len(hours) == 24
    total = hours[0].total
    for window in hours[1:]:
        total += window.total
    assert total == day.total


def test_the_report_says_where_each_peak_comes_from_and_what_changed(cluster):
    cluster_apply(definition=cluster_definition_parse(spec("n[01-20]")), effective_from=at(11))
    report = utilisation_report_get(cluster=cluster, start=TEN, end=NOON, step="hour", now=NOON)
    peaks = {item.name: item for item in report.peaks}
    assert [peak.node_count for peak in peaks["cpu"].in_window] == [10, 20]
    assert peaks["cpu"].in_window[1].effective_from == at(11)
    assert peaks["cpu"].now is not None
    assert peaks["cpu"].now.peak_flops == 20 * 4 * GIGA
    assert peaks["cpu"].now.cpu_source is PeakSource.VENDOR
    assert peaks["cpu"].now.gpu_source is None
    assert peaks["gpu"].now is not None
    assert peaks["gpu"].now.gpu_source is PeakSource.VENDOR
    assert len(report.windows) == 2


def test_the_selector_reads_three_queries_whatever_the_window(cluster, django_assert_num_queries):
    record(cluster, job(at(1), at(23), cores=4))
    with django_assert_num_queries(3):  # partitions, rate versions, hourly rows
        utilisation_report_get(cluster=cluster, start=at(0), end=at(24), step="hour", now=NOON)


def test_a_window_not_on_the_hour_is_refused(cluster):
    with pytest.raises(UtilisationError, match="not on the hour"):
        utilisation_series_get(cluster=cluster, start=at(10, 5), end=NOON, step="hour")


def test_a_partition_without_a_peak_is_refused_with_its_name(cluster):
    Partition.objects.get(cluster=cluster, name="cpu").versions.update(cpu_peak_flops=None)
    with pytest.raises(PeakError, match="cpu"):
        utilisation_series_get(cluster=cluster, start=TEN, end=NOON, step="hour")


# The window people ask for -------------------------------------------------------------------


def test_a_window_is_widened_to_whole_local_hours():
    start, end = requested_window(
        start=at(10, 20), end=at(11, 5), step="hour", timezone="Australia/Adelaide", now=NOON
    )
    # Adelaide is UTC+10:30 in March: its hours start at :30 UTC.
    assert (start, end) == (at(9, 30), at(11, 30))


def test_the_default_window_is_the_last_30_days_up_to_this_hour():
    start, end = requested_window(start=None, end=None, step="day", timezone="UTC", now=at(11, 15))
    assert end == at(12)
    assert start == DAY - timedelta(days=30)


def test_naive_times_are_the_clusters_wall_clock():
    start, _ = requested_window(
        start=datetime(2026, 3, 2, 8), end=None, step="day", timezone="Australia/Perth", now=NOON
    )
    assert start == at(0)


@pytest.mark.parametrize(
    ("start", "end", "step", "field"),
    [
        (at(12), at(10), "hour", "end"),
        (at(10), at(10), "hour", "end"),
        (datetime(2000, 1, 1, tzinfo=UTC), at(10), "hour", "step"),
        (datetime(1900, 1, 1, tzinfo=UTC), at(10), "month", "start"),
        (at(10), datetime(9999, 1, 1, tzinfo=UTC), "month", "end"),
    ],
)
def test_impossible_windows_are_refused_naming_the_field(start, end, step, field):
    with pytest.raises(WindowError) as refused:
        requested_window(start=start, end=end, step=step, timezone="UTC", now=NOON)
    assert refused.value.field == field

"""True overhead over the ledger (accounting/utilisation/overhead.py): jobs built by hand on a
small partition reproduce the pure sweep's Figure 2 numbers, version changes cut the window,
unplaced jobs are reported, failures are recorded, and the task runs through Celery (eager or a
real worker)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import count

import pytest
from django.db import transaction
from django.utils import timezone

from accounting.models import Job, JobFairShare, OverheadPartitionResult, OverheadRun
from accounting.tasks import overhead_compute
from accounting.utilisation.overhead import (
    OverheadError,
    canonical_unit_of,
    fair_rates,
    job_fair_share_get,
    overhead_compute_daily,
    overhead_results,
    overhead_run_compute,
    overhead_run_latest,
    overhead_run_start,
    unit_label,
)
from projects.models import Project
from tests.factories import PartitionVersionFactory, UserFactory

GIB = 1024
HOUR = 3600
START = datetime(2026, 3, 2, tzinfo=UTC)
_numbers = count(1000)


def at(hours: float) -> datetime:
    return START + timedelta(hours=hours)


@pytest.fixture
def small(db):
    """One partition of one node of 8 cores and 16 GiB (the paper's Figure 2 scale)."""
    version = PartitionVersionFactory(
        partition__name="cpu", partition__cluster__name="mini", nodelist="n1", node_count=1,
        sockets=1, cores_per_socket=8, memory_mb=16 * GIB, derived_weight=Decimal(8),
    )  # fmt: skip
    return version


def make_job(version, start, end, *, cores, memory_gib, nodelist="n1", gpus=0):
    partition = version.partition
    project, _ = Project.objects.get_or_create(
        code="proj", defaults={"pi": UserFactory(username="pi")}
    )
    number = str(next(_numbers))
    return Job.objects.create(
        cluster=partition.cluster, job_id_raw=number, job_id=number, project=project,
        username="u", partition=partition, state="COMPLETED", state_raw="COMPLETED",
        start=at(start), end=at(end) if end is not None else None, nnodes=1, cpus=cores,
        memory_mb=Decimal(memory_gib * GIB), gpus=gpus, nodelist=nodelist,
    )  # fmt: skip


def compute(version, hours=4, **kwargs):
    return overhead_run_compute(
        cluster=version.partition.cluster, start=at(0), end=at(hours), step="hour", **kwargs
    )


def test_the_run_stores_figure_2_numbers_per_partition(small):
    a = make_job(small, 0, 2, cores=5, memory_gib=9)
    b = make_job(small, 1, 3, cores=3, memory_gib=6)
    run = compute(small)
    assert run.status == OverheadRun.Status.DONE, run.error
    assert (run.jobs_seen, run.jobs_unplaced) == (2, 0)
    (result,) = overhead_results(run=run)
    # 0-1 h: A alone, 3 units; 1-2 h: full; 2-3 h: B alone, 5 units; 3-4 h: idle, 8 units
    assert [bucket[2] for bucket in result.buckets] == [3 * HOUR, 0, 5 * HOUR, 8 * HOUR]
    assert result.buckets[0][:2] == [at(0).isoformat(), at(1).isoformat()]
    assert result.histogram == {"0": HOUR, "3": HOUR, "5": HOUR, "8": HOUR}
    assert (result.unit_cores, result.unit_memory_mb, result.unit_gpus) == (1, 2 * GIB, 0)
    assert unit_label(result) == "1 core + 2 GiB"
    assert result.occupied_node_seconds == 3 * HOUR
    assert result.billable_core_seconds == (8 * 3 - 8) * HOUR
    assert fair_rates(result)[0] == 1
    shares = {share.job_id: share for share in JobFairShare.objects.filter(run=run)}
    assert shares[a.pk].billed_core_seconds == 10 * HOUR  # 5 cores alone, then 5 of 8 full
    assert shares[b.pk].billed_core_seconds == 6 * HOUR
    total = shares[a.pk].billed_memory_mb_seconds + shares[b.pk].billed_memory_mb_seconds
    assert total == result.billable_memory_mb_seconds


def test_the_job_page_view_of_a_fair_share_reads_the_covering_run(small):
    job = make_job(small, 0, 1, cores=5, memory_gib=9)
    assert job_fair_share_get(job=job) is None
    compute(small, hours=1)
    view = job_fair_share_get(job=job)
    assert view is not None
    assert view.covers_job
    cores, memory = view.resources
    assert (cores.allocated, cores.billed, cores.percent) == (5, 5, 100)
    assert (memory.allocated, memory.billed) == (9, 10)  # GiB-hours: 3 units of 2 GB removed
    assert round(memory.percent) == 111


def test_a_partitions_own_canonical_unit_is_used(small):
    partition = small.partition
    partition.canonical_cores, partition.canonical_memory_mb = 2, 4 * GIB
    partition.save()
    assert canonical_unit_of(partition).thresholds == (2, 4 * GIB, 0)
    (result,) = overhead_results(run=compute(small, hours=1))
    assert result.histogram == {"4": HOUR}
    assert unit_label(result) == "2 cores + 4 GiB"


def test_a_version_change_inside_the_window_measures_each_part_against_its_nodes(small):
    PartitionVersionFactory(
        partition=small.partition, number=2, effective_from=at(2), nodelist="n[1-2]",
        node_count=2, sockets=1, cores_per_socket=8, memory_mb=16 * GIB,
        derived_weight=Decimal(8),
    )  # fmt: skip
    early = make_job(small, 0, 1, cores=8, memory_gib=16, nodelist="n2")  # n2 not there yet
    late = make_job(small, 3, 4, cores=8, memory_gib=16, nodelist="n2")
    run = compute(small)
    (result,) = overhead_results(run=run)
    assert result.node_count == 2
    # node-seconds: n1 alone for 2 h, then n1 and n2 for 2 h
    assert sum(result.histogram.values()) == (1 * 2 + 2 * 2) * HOUR
    assert [bucket[2] for bucket in result.buckets] == [8 * HOUR, 8 * HOUR, 16 * HOUR, 8 * HOUR]
    assert run.jobs_unplaced == 1
    assert run.unplaced_sample == [[early.job_id, "node 'n2' is in no partition"]]
    assert JobFairShare.objects.filter(run=run, job=late).exists()
    # A job across the change is unplaced before it (n2 missing) and placed after: one job.
    across = make_job(small, 1, 3, cores=4, memory_gib=4, nodelist="n2")
    run = compute(small)
    assert JobFairShare.objects.filter(run=run, job=across).exists()
    assert (run.jobs_seen, run.jobs_unplaced) == (3, 2)


def test_a_job_on_an_unknown_node_is_reported_not_dropped(small):
    job = make_job(small, 0, 1, cores=1, memory_gib=1, nodelist="x9")
    make_job(small, 0, 1, cores=1, memory_gib=1, nodelist="")
    run = compute(small)
    assert run.status == OverheadRun.Status.DONE
    assert (run.jobs_seen, run.jobs_unplaced) == (2, 2)
    reasons = dict(map(tuple, run.unplaced_sample))
    assert reasons[job.job_id] == "node 'x9' is in no partition"
    assert "no node list" in reasons.values()


def test_a_running_job_holds_its_node_until_now(small):
    make_job(small, 0, None, cores=8, memory_gib=16)
    (result,) = overhead_results(run=compute(small))
    assert result.histogram == {"0": 4 * HOUR}


def test_a_threshold_of_zero_is_refused_by_the_database(small):
    from django.db import IntegrityError

    small.partition.canonical_cores = 0  # a node would hold infinitely many units
    with pytest.raises(IntegrityError), transaction.atomic():
        small.partition.save()


def test_a_job_split_by_two_runs_gets_the_sum_of_both_and_overlapping_runs_count_once(small):
    # The daily runs cut a job that crosses midnight: its fair share is both halves together.
    job = make_job(small, 20, 28, cores=5, memory_gib=9)  # 20:00 to 04:00 the next day
    make_job(small, 22, 26, cores=3, memory_gib=6)
    cluster = small.partition.cluster
    day_one = overhead_run_compute(cluster=cluster, start=at(0), end=at(24), step="hour")
    day_two = overhead_run_compute(cluster=cluster, start=at(24), end=at(48), step="hour")
    view = job_fair_share_get(job=job)
    assert view is not None
    assert view.runs == (day_one, day_two)
    assert view.covers_job
    both = overhead_run_compute(cluster=cluster, start=at(0), end=at(48), step="hour")
    whole = job_fair_share_get(job=job)
    assert whole is not None
    assert whole.runs == (both,)  # a run covering the job wins
    for split, joined in zip(view.resources, whole.resources, strict=True):
        assert split.allocated == joined.allocated
        # each run rounds to whole resource-seconds on its own
        assert (
            abs(split.billed - joined.billed) * 3600 * (1024 if split.name == "memory" else 1) <= 2
        )

    # A newer run overlapping day two replaces it rather than adding to it.
    both.delete()
    late = overhead_run_compute(cluster=cluster, start=at(24), end=at(30), step="hour")
    again = job_fair_share_get(job=job)
    assert again is not None
    assert again.runs == (day_one, late)
    assert again.resources[0].allocated == view.resources[0].allocated

    # Only day one: the view says it holds part of the job.
    late.delete()
    day_two.delete()
    part = job_fair_share_get(job=job)
    assert part is not None
    assert part.runs == (day_one,)
    assert not part.covers_job


def test_a_failure_is_recorded_on_the_run_with_nothing_stored(small, monkeypatch):
    import accounting.utilisation.overhead as overhead

    def broken(**kwargs):
        raise ValueError("threshold cores must be a positive integer")

    monkeypatch.setattr(overhead, "overhead_report_get", broken)
    make_job(small, 0, 1, cores=1, memory_gib=1)
    run = compute(small)
    assert run.status == OverheadRun.Status.FAILED
    assert "ValueError: threshold cores must be a positive integer" in run.error
    assert run.finished_at is not None
    assert not OverheadPartitionResult.objects.filter(run=run).exists()
    assert not JobFairShare.objects.filter(run=run).exists()


def test_a_bad_window_is_refused(small):
    with pytest.raises(OverheadError, match="end after it starts"):
        overhead_run_compute(cluster=small.partition.cluster, start=at(1), end=at(0))
    with pytest.raises(OverheadError, match="step must be one of"):
        overhead_run_compute(cluster=small.partition.cluster, start=at(0), end=at(1), step="x")


def test_the_latest_done_run_covering_a_window_is_found(small):
    cluster = small.partition.cluster
    first = compute(small)
    second = compute(small)
    assert overhead_run_latest(cluster=cluster, start=at(1), end=at(2)) == second
    assert overhead_run_latest(cluster=cluster, start=at(0), end=at(5)) is None
    assert first != second


def test_the_task_computes_the_run_the_page_started(small, django_capture_on_commit_callbacks):
    make_job(small, 0, 2, cores=5, memory_gib=9)
    with django_capture_on_commit_callbacks(execute=True):
        run = overhead_run_start(
            cluster=small.partition.cluster, start=at(0), end=at(4), step="day"
        )
    run.refresh_from_db()
    assert run.status == OverheadRun.Status.DONE, run.error
    (result,) = overhead_results(run=run)
    assert len(result.buckets) == 1  # one day bucket


def test_the_task_takes_iso_times(small):
    result = overhead_compute.delay(
        small.partition.cluster.pk, at(0).isoformat(), at(2).isoformat(), "hour"
    ).get(timeout=10)
    run = OverheadRun.objects.get(pk=result["overhead_run"])
    assert (run.status, run.window_start, run.window_end) == ("done", at(0), at(2))


def test_the_daily_computation_runs_yesterday_once(small):
    now = START + timedelta(days=1, hours=5)
    (run,) = overhead_compute_daily(now=now)
    assert (run.window_start, run.window_end) == (START, START + timedelta(days=1))
    assert overhead_compute_daily(now=now) == []


def test_a_run_left_running_by_a_lost_worker_expires_and_its_day_is_computed_again(small):
    cluster = small.partition.cluster
    day = (START, START + timedelta(days=1))
    lost = OverheadRun.objects.create(
        cluster=cluster, window_start=day[0], window_end=day[1], step="hour"
    )
    now = START + timedelta(days=1, hours=5)
    OverheadRun.objects.filter(pk=lost.pk).update(started_at=now - timedelta(minutes=30))
    assert overhead_compute_daily(now=now) == []  # still within the task's time limit
    OverheadRun.objects.filter(pk=lost.pk).update(started_at=now - timedelta(minutes=70))
    (run,) = overhead_compute_daily(now=now)
    lost.refresh_from_db()
    assert lost.status == OverheadRun.Status.FAILED
    assert "worker" in lost.error
    assert run.status == OverheadRun.Status.DONE
    assert (run.window_start, run.window_end) == day


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_computes_a_started_run(celery_worker):
    if celery_worker is None:
        pytest.skip("no broker configured: Celery runs eagerly (fallback)")
    version = PartitionVersionFactory(
        partition__name="cpu", partition__cluster__name="mini-worker", nodelist="n1",
        node_count=1, sockets=1, cores_per_socket=8, memory_mb=16 * GIB,
        derived_weight=Decimal(8),
    )  # fmt: skip
    make_job(version, 0, 2, cores=5, memory_gib=9)
    with transaction.atomic():
        run = overhead_run_start(
            cluster=version.partition.cluster, start=at(0), end=at(4), step="hour"
        )
    deadline = time.monotonic() + 60
    while run.status == OverheadRun.Status.RUNNING and time.monotonic() < deadline:
        time.sleep(0.2)
        run.refresh_from_db()
    assert run.status == OverheadRun.Status.DONE, run.error
    assert JobFairShare.objects.filter(run=run).count() == 1


def test_the_demo_computes_the_last_seven_days_once(small):
    from portal.demo import _overhead

    cluster = small.partition.cluster
    lines: list[str] = []
    _overhead(cluster, lines.append)
    (run,) = OverheadRun.objects.filter(cluster=cluster)
    assert run.status == OverheadRun.Status.DONE, run.error
    assert run.window_end - run.window_start == timedelta(days=7)
    assert run.window_end <= timezone.now()
    assert lines == [f"true overhead of mini, last 7 days: run {run.pk} done, 0 jobs"]
    _overhead(cluster, lines.append)  # a second loaddemo changes nothing
    assert OverheadRun.objects.filter(cluster=cluster).count() == 1

"""Q(T) from the hourly rows the import keeps equals Q(T) computed from the jobs directly."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.db.models import Sum

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, Job, UtilisationHourly
from accounting.utilisation.quality import AllocatedJob, utilisation_series
from accounting.utilisation.selectors import partition_peak_timeline, utilisation_series_get
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"
START, END = datetime(2026, 11, 22, 2, tzinfo=UTC), datetime(2026, 11, 22, 3, tzinfo=UTC)

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported():
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    cluster = Cluster.objects.get(name="slurm-testbed")
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.create(code=code)
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=cluster, lines=lines, source="sample")
    return cluster


def _direct(cluster, step):
    jobs = [
        AllocatedJob(
            partition=str(job.partition_id),
            start=job.start,
            end=job.end,
            cores=job.cpus,
            gpus=job.gpus,
        )
        for job in Job.objects.filter(cluster=cluster, start__isnull=False).exclude(
            charge_state="pending"
        )
    ]
    timelines = {str(p.pk): partition_peak_timeline(partition=p) for p in cluster.partitions.all()}
    return utilisation_series(
        jobs=jobs, partitions=timelines, start=START, end=END, step=step, timezone="UTC"
    )


@pytest.mark.parametrize("step", ["hour", "day"])
def test_series_from_the_hourly_rows_equals_the_direct_computation(imported, step):
    kept = utilisation_series_get(cluster=imported, start=START, end=END, step=step)
    direct = _direct(imported, step)
    assert [window.total for window in kept] == [window.total for window in direct]
    assert kept[0].total.q_percent is not None
    assert kept[0].total.q_percent > 0


def test_core_seconds_kept_equal_the_jobs_allocated_core_seconds(imported):
    kept = UtilisationHourly.objects.aggregate(total=Sum("core_seconds"))["total"]
    jobs = Job.objects.filter(cluster=imported, start__isnull=False).exclude(charge_state="pending")
    assert kept == sum(job.cpus * int((job.end - job.start).total_seconds()) for job in jobs)


def test_a_re_import_changes_no_hourly_row(imported):
    before = list(
        UtilisationHourly.objects.order_by("pk").values_list("core_seconds", "gpu_seconds")
    )
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=imported, lines=lines, source="again")
    after = list(
        UtilisationHourly.objects.order_by("pk").values_list("core_seconds", "gpu_seconds")
    )
    assert after == before


def _held_core_seconds(jobs):
    """Core-seconds held: finished jobs start to end, running ones start to start + Elapsed."""
    total = 0
    for job in jobs:
        if job.end is not None:
            total += job.cpus * int((job.end - job.start).total_seconds())
        else:
            total += job.cpus * job.elapsed_seconds
    return total


def test_running_jobs_count_up_to_their_elapsed_and_exactly_once_they_finish(imported):
    Job.objects.all().delete()
    UtilisationHourly.objects.all().delete()
    from accounting.models import UsageDaily

    UsageDaily.objects.all().delete()
    with (SAMPLE / "midrun/sacct_midrun_allocations.psv").open() as lines:
        jobs_import(cluster=imported, lines=lines, source="midrun")
    running = Job.objects.filter(cluster=imported, start__isnull=False, end__isnull=True)
    assert running.filter(elapsed_seconds__gt=0, cpus__gt=0).exists()  # the dump has some
    midway = UtilisationHourly.objects.aggregate(total=Sum("core_seconds"))["total"]
    assert midway == _held_core_seconds(Job.objects.filter(cluster=imported, start__isnull=False))

    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=imported, lines=lines, source="final")
    final = UtilisationHourly.objects.aggregate(total=Sum("core_seconds"))["total"]
    assert final > midway
    jobs = Job.objects.filter(cluster=imported, start__isnull=False)
    assert not jobs.filter(end__isnull=True).exists()
    assert final == _held_core_seconds(jobs)
    assert not UtilisationHourly.objects.filter(core_seconds__lt=0).exists()


def test_the_migration_adds_the_hours_of_running_jobs_imported_before_it(imported):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("accounting.migrations.0009_running_jobs_hours")
    Job.objects.all().delete()
    UtilisationHourly.objects.all().delete()
    with (SAMPLE / "midrun/sacct_midrun_allocations.psv").open() as lines:
        jobs_import(cluster=imported, lines=lines, source="midrun")
    jobs = Job.objects.filter(cluster=imported, start__isnull=False)
    finished = _held_core_seconds(jobs.filter(end__isnull=False))

    migration.remove_running_hours(apps, None)  # the rows as an older import left them
    assert UtilisationHourly.objects.aggregate(total=Sum("core_seconds"))["total"] == finished
    migration.add_running_hours(apps, None)
    held = UtilisationHourly.objects.aggregate(total=Sum("core_seconds"))["total"]
    assert held == _held_core_seconds(jobs) > finished

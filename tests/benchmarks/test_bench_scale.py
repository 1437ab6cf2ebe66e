"""The scale benchmark's fill (benchmarks/bench_scale.py) at a tiny size, in the test database:
the jobs spread over every month asked for, each project has several users and runs on both
partitions, and the roll-ups and hourly rows the pages read are there. The load and timings are
the benchmark's, not a test's."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.db import connection

from accounting.ledger.selectors import ledger_stamp
from accounting.models import ImportRun, Job, UsageDaily, UtilisationHourly
from benchmarks.bench_scale import HOURLY_SQL, JOBS_SQL, PROJECTS_SQL, RUNS_SQL, months_back
from benchmarks.pg import USAGE_DAILY_FROM_JOBS
from projects.models import Project
from tests.factories import example_cluster

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the fill is PostgreSQL SQL"),
]


def test_74_months_back_from_november_2026_start_in_october_2020():
    assert months_back(date(2026, 11, 28), 74) == date(2020, 10, 1)
    assert months_back(date(2026, 1, 5), 1) == date(2026, 1, 1)
    assert months_back(date(2026, 1, 5), 2) == date(2025, 12, 1)


def test_the_fill_spreads_jobs_over_every_month_with_several_users_and_both_partitions():
    example_cluster("slurm-testbed")
    first, now = date(2020, 10, 1), datetime(2026, 11, 28, 3, tzinfo=UTC)
    span = int((now - datetime(2020, 10, 1, tzinfo=UTC)).total_seconds()) - 86400
    with connection.cursor() as cursor:
        cursor.execute(PROJECTS_SQL.format(projects=4))
        cursor.execute(
            JOBS_SQL.format(
                jobs=3000, projects=4, users=3, first="2020-10-01 00:00+00", span_seconds=span
            )
        )
        cursor.execute(USAGE_DAILY_FROM_JOBS)
        cursor.execute(HOURLY_SQL.format(first="2026-11-01 00:00+00", last="2026-11-02 00:00+00"))
    jobs = Job.objects.all()
    assert jobs.count() == 3000
    months = {(job.end.year, job.end.month) for job in jobs.only("end")}
    assert len(months) == 74
    assert min(months) == (first.year, first.month)
    assert max(job.end for job in jobs.only("end")) < now
    for project in Project.objects.filter(code__startswith="bench"):
        own = jobs.filter(project=project)
        assert own.values("username").distinct().count() == 3
        assert set(own.values_list("partition__name", flat=True).distinct()) == {"gpu", "work"}
    assert UsageDaily.objects.filter(project__code="bench0002").exists()
    assert UtilisationHourly.objects.filter(partition__name="work").count() == 25


def test_the_fill_leaves_the_import_runs_a_centre_importing_every_few_minutes_has():
    example_cluster("slurm-testbed")
    with connection.cursor() as cursor:
        cursor.execute(RUNS_SQL.format(first="2026-11-01 00:00+00", minutes=60))
    runs = ImportRun.objects.all()
    assert runs.count() >= 24  # a day at least: from the first of the month to an hour ago
    assert set(runs.values_list("status", flat=True)) == {ImportRun.Status.SUCCEEDED}
    assert ledger_stamp() == "batches.0"  # the runs' history alone moves no stamp

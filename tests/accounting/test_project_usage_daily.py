"""The balance's roll-up (``ProjectUsageDaily``) is UsageDaily summed over the users, always: on
every import path (per line, the frame, a changed line taken back, a re-import), after a cost
model re-costs the days, and as the migration fills it from the roll-ups before it."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from importlib import import_module

import pytest
from django.db import connection

from accounting.costs.services import BEGINNING, cost_model_version_create, job_costs_recompute
from accounting.ledger.pipeline import jobs_import
from accounting.models import ProjectUsageDaily, UsageDaily
from benchmarks.sacct_generator import sacct_lines

USER_FIELD, ENERGY_FIELD = 3, 20  # User and ConsumedEnergyRaw in the generator's layout
MODEL = "currency Euro\nnodes CPU nid[1001-1004]\nrate Hardware 6 k/a\n"

pytestmark = pytest.mark.django_db


def _history(*, lines=900, seed=11, moved=False):
    """Generated sacct lines of several users per project; ``moved``: every third job's
    lines under another user, with a measured energy (changed lines on the next import)."""
    now = datetime(2026, 3, 1, tzinfo=UTC)
    produced = sacct_lines(
        lines=lines, seed=seed, start=now - timedelta(days=20), mean_gap_seconds=600, now=now
    )
    for line in produced:
        fields = line.rstrip("\n").split("|")
        if moved and fields[1][:1].isdigit() and int(fields[1].split(".")[0]) % 3 == 0:
            fields[USER_FIELD] = "mallory"
            if len(fields) > ENERGY_FIELD:
                fields[ENERGY_FIELD] = "3600"
        yield "|".join(fields) + "\n"


def _import(cluster, lines, **kwargs):
    return jobs_import(cluster=cluster, lines=lines, source="generated", **kwargs)[1]


def _grouped_usage():
    """UsageDaily summed over the users, per (project, day, partition): SU, money, jobs."""
    sums = defaultdict(lambda: [Decimal(0), Decimal(0), 0])
    for project, day, partition, units, cost, jobs in UsageDaily.objects.values_list(
        "project_id", "day", "partition_id", "service_units", "cost", "jobs"
    ):
        sums[project, day, partition][0] += units
        sums[project, day, partition][1] += cost
        sums[project, day, partition][2] += jobs
    return {key: tuple(value) for key, value in sums.items() if any(value)}


def _project_usage():
    return {
        (project, day, partition): (units, cost, jobs)
        for project, day, partition, units, cost, jobs in ProjectUsageDaily.objects.values_list(
            "project_id", "day", "partition_id", "service_units", "cost", "jobs"
        )
        if units or cost or jobs
    }


@pytest.mark.parametrize("frame", [True, False], ids=["frame", "per-line"])
def test_the_balances_rollup_is_the_users_rollups_summed_on_both_import_paths(testbed, frame):
    summary = _import(testbed, _history(), columnar_pricing=frame)

    users_per_day = UsageDaily.objects.values("project_id", "day", "partition_id").distinct()
    assert summary.charged > 200
    assert UsageDaily.objects.count() > users_per_day.count()  # several users on a day
    assert _project_usage() == _grouped_usage()
    assert sum(jobs for _, _, jobs in _project_usage().values()) == sum(
        UsageDaily.objects.values_list("jobs", flat=True)
    )


def test_lines_moved_to_another_user_keep_the_projects_days_and_a_reimport_changes_nothing(
    testbed,
):
    _import(testbed, _history())
    before = _project_usage()
    users_before = set(UsageDaily.objects.values_list("username", flat=True))

    changed = _import(testbed, _history(moved=True))
    again = _import(testbed, _history(moved=True))

    assert changed.updated > 50
    assert "mallory" in set(UsageDaily.objects.values_list("username", flat=True)) - users_before
    assert _project_usage() == before == _grouped_usage()  # taken back from one, added to one
    assert again.updated == 0
    assert _project_usage() == before


def test_a_cost_model_recosts_the_balances_rollup_with_the_users_rollups(testbed):
    _import(testbed, _history())
    assert not any(cost for _, cost, _ in _project_usage().values())

    cost_model_version_create(cluster=testbed, name="euro", text=MODEL)
    job_costs_recompute(cluster=testbed, since=BEGINNING, batch_size=50)

    recosted = _project_usage()
    assert any(cost for _, cost, _ in recosted.values())
    assert recosted == _grouped_usage()


def test_the_migration_fills_the_balances_rollup_from_the_users_rollups(testbed):
    _import(testbed, _history())
    kept = _project_usage()
    ProjectUsageDaily.objects.all().delete()

    migration = import_module("accounting.migrations.0030_project_usage_daily")
    with connection.cursor() as cursor:
        cursor.execute(migration.BACKFILL)

    assert _project_usage() == kept == _grouped_usage()

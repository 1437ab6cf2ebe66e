"""The daily roll-ups keep measured energy beside the engine's estimate (docs/energy-and-carbon.md):
measured Wh, the estimate of the measured jobs and their count, kept by the import like every
other sum (add, take back and add again, reimport) and backfilled by the migration."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from importlib import import_module
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection

from accounting.carbon.footprint import energy_hour_shares, job_energy, to_millionths
from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, EnergyHourly, Job, UsageDaily
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ENERGY_FIELD = 20  # ConsumedEnergyRaw in the generator's layout

pytestmark = pytest.mark.django_db


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.create(code=code, title=code)
    return Cluster.objects.get(name="slurm-testbed")


def _history(*, lines=800, seed=5, energy=lambda number: 1000 + 37 * number):
    """Generated sacct lines; every other job line has the energy ``energy(number)`` (None:
    left as the generator made it, empty)."""
    now = datetime(2026, 3, 1, tzinfo=UTC)
    produced = sacct_lines(
        lines=lines, seed=seed, start=now - timedelta(days=20), mean_gap_seconds=600, now=now
    )
    for number, line in enumerate(produced):
        fields = line.rstrip("\n").split("|")
        joules = energy(number)
        if (
            joules is not None
            and number % 2
            and len(fields) > ENERGY_FIELD
            and "." not in fields[1]
        ):
            fields[ENERGY_FIELD] = str(joules)
        yield "|".join(fields) + "\n"


def _import(cluster, lines, **kwargs):
    return jobs_import(cluster=cluster, lines=lines, source="generated", **kwargs)[1]


def _expected_from_jobs(cluster):
    """The measured sums per roll-up key, recomputed from the jobs one by one."""
    zone = cluster.zoneinfo
    sums = defaultdict(lambda: [Decimal(0), Decimal(0), 0])
    for job in Job.objects.exclude(charge_state=Job.ChargeState.PENDING).exclude(end=None):
        key = (job.project_id, job.partition_id, job.username, job.end.astimezone(zone).date())
        sums[key]  # every booked job's key has a row, measured or not
        if job.consumed_energy_joules:
            wh = (Decimal(job.consumed_energy_joules) / 3600).quantize(Decimal("0.000001"))
            sums[key][0] += wh
            sums[key][1] += job.energy_wh
            sums[key][2] += 1
    return {key: tuple(value) for key, value in sums.items()}


def _rollups():
    return {
        (row.project_id, row.partition_id, row.username, row.day): (
            row.energy_measured_wh,
            row.energy_measured_estimate_wh,
            row.energy_measured_jobs,
        )
        for row in UsageDaily.objects.all()
    }


def test_a_job_with_consumed_energy_lands_in_the_measured_sums_and_one_without_does_not(testbed):
    _import(testbed, _history())
    measured = Job.objects.filter(consumed_energy_joules__gt=0)
    unmeasured = Job.objects.exclude(consumed_energy_joules__gt=0).exclude(
        charge_state=Job.ChargeState.PENDING
    )
    assert measured.exists()
    assert unmeasured.exists()
    assert _rollups() == _expected_from_jobs(testbed)
    totals = UsageDaily.objects.values_list("energy_measured_jobs", "jobs")
    assert (
        sum(row[0] for row in totals)
        == measured.exclude(charge_state=Job.ChargeState.PENDING).count()
    )
    assert sum(row[1] for row in totals) > sum(row[0] for row in totals)


def test_a_job_alone_with_a_measurement_is_counted_with_its_estimate(testbed):
    _import(testbed, _history(lines=400))
    job = (
        Job.objects.filter(consumed_energy_joules__gt=0)
        .exclude(charge_state=Job.ChargeState.PENDING)
        .first()
    )
    row = UsageDaily.objects.get(
        project=job.project,
        partition=job.partition,
        username=job.username,
        day=job.end.astimezone(testbed.zoneinfo).date(),
    )
    assert row.energy_measured_jobs >= 1
    assert row.energy_measured_wh >= Decimal(job.consumed_energy_joules) / 3600 - Decimal(
        "0.000001"
    )
    assert row.energy_measured_estimate_wh <= row.energy_wh


def test_reimporting_the_same_lines_keeps_the_measured_sums(testbed):
    _import(testbed, _history())
    first = _rollups()
    again = _import(testbed, _history())
    assert again.updated == 0
    assert _rollups() == first


def test_a_line_that_loses_its_measurement_takes_it_back_from_the_sums(testbed):
    _import(testbed, _history())
    assert any(value[2] for value in _rollups().values())
    changed = _import(testbed, _history(energy=lambda number: 0))
    assert changed.updated > 0
    assert all(value == (Decimal(0), Decimal(0), 0) for value in _rollups().values())
    _import(testbed, _history(energy=lambda number: 5000 + number))
    assert _rollups() == _expected_from_jobs(testbed)


def test_the_migration_backfills_the_measured_sums_of_existing_rollups(testbed):
    _import(testbed, _history())
    expected = _rollups()
    UsageDaily.objects.update(
        energy_measured_wh=0, energy_measured_estimate_wh=0, energy_measured_jobs=0
    )
    migration = import_module("accounting.migrations.0016_energy_and_carbon")
    migration.measured_energy_backfill(apps, None)
    assert _rollups() == expected


# --- energy per hour of the runs (CO2e's roll-up) ---------------------------------------------


def _hours_from_jobs(cluster):
    """The hourly energy rows recomputed from the jobs one by one with footprint's rule."""
    zone = cluster.zoneinfo
    sums = defaultdict(int)
    for job in Job.objects.exclude(charge_state=Job.ChargeState.PENDING).exclude(end=None):
        best = job_energy(consumed_energy_joules=job.consumed_energy_joules,
                          estimate_wh=job.energy_wh).wh  # fmt: skip
        end = int(job.end.timestamp())
        start = end if job.start is None else int(job.start.timestamp())
        day = job.end.astimezone(zone).date()
        for hour, share in energy_hour_shares(to_millionths(best), start, end):
            sums[(job.project_id, day, job.partition_id, hour)] += share
    return {key: Decimal(value).scaleb(-6) for key, value in sums.items() if value}


def _energy_hours():
    return {
        (row.project_id, row.day, row.partition_id, int(row.hour_start.timestamp()) // 3600): (
            row.energy_wh
        )
        for row in EnergyHourly.objects.all()
        if row.energy_wh
    }


@pytest.mark.parametrize("frame", [True, False], ids=["columns", "per-line"])
def test_the_hourly_energy_rows_are_each_jobs_energy_over_the_hours_of_its_run(testbed, frame):
    _import(testbed, _history(), columnar_pricing=frame)
    expected = _hours_from_jobs(testbed)
    assert len({hour for *_, hour in expected}) > 50
    assert _energy_hours() == expected
    # A day's hours add up to its best energy in the daily roll-ups, to the millionth.
    days = defaultdict(Decimal)
    for (project, day, partition, _), wh in expected.items():
        days[(project, partition, day)] += wh
    for row in UsageDaily.objects.all():
        best = row.energy_measured_wh + row.energy_wh - row.energy_measured_estimate_wh
        days[(row.project_id, row.partition_id, row.day)] -= best
    assert set(days.values()) == {Decimal(0)}


def test_changed_lines_take_their_hours_back_and_a_reimport_changes_nothing(testbed):
    _import(testbed, _history())
    first = _energy_hours()
    assert _import(testbed, _history()).updated == 0
    assert _energy_hours() == first
    changed = _import(testbed, _history(energy=lambda number: 9000 + 11 * number))
    assert changed.updated > 0
    assert _energy_hours() != first
    assert _energy_hours() == _hours_from_jobs(testbed)


@pytest.mark.parametrize("sql", [True, False], ids=["postgresql", "python"])
def test_the_migration_backfills_the_hourly_energy_from_the_jobs(testbed, sql):
    """PostgreSQL fills the table in one statement; other databases (SQLite for the demo) go
    job by job with footprint's rule: both give what the import keeps."""
    _import(testbed, _history(energy=lambda number: 3601 + 7 * number))
    expected = _energy_hours()
    EnergyHourly.objects.all().delete()
    migration = import_module("accounting.migrations.0028_energy_hourly")
    with connection.schema_editor() as editor:
        migration.backfill(
            apps, editor if sql else SimpleNamespace(connection=SimpleNamespace(vendor="other"))
        )
    assert _energy_hours() == expected

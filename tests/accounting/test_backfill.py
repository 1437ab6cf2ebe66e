"""Backfills: a range split into windows, imported by several workers at once, charge exactly
what one import of the whole range charges."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import jobs_import
from accounting.ledger.sources import backfill_windows
from accounting.models import Cluster, ImportRun, Job, UsageDaily, UtilisationHourly
from accounting.tasks import import_sacct_backfill_window
from projects.models import Project
from tests.conftest import needs_real_services
from tests.workers import start_celery_worker

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct" / "sacct_allocations.psv"
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
# The sample's jobs ran between 02:00 and 02:07 on 2026-11-22; one-minute windows around them.
SINCE = datetime(2026, 11, 22, 1, 58, tzinfo=UTC)
UNTIL = datetime(2026, 11, 22, 2, 10, tzinfo=UTC)

# sacct for a window, as Slurm selects jobs for -S/-E (those that ran at any time in it),
# replaying the real dump of the testbed. The portal runs it as the cluster's sacct command.
REPLAY = """#!{python}
import sys
from datetime import datetime

def when(text):
    return None if text in ("Unknown", "None", "") else datetime.fromisoformat(text)

options = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
since = datetime.fromisoformat(options["--starttime"])
until = datetime.fromisoformat(options["--endtime"])
lines = open({data!r}).read().splitlines()
names = lines[0].split("|")
print(lines[0])
for line in lines[1:]:
    row = dict(zip(names, line.split("|")))
    start = when(row["Start"]) or when(row["Submit"])
    end = when(row["End"])
    if start < until and (end is None or end >= since):
        print(line)
"""


@pytest.fixture
def testbed(tmp_path: Path) -> Cluster:
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    replay = tmp_path / "sacct"
    replay.write_text(REPLAY.format(python=sys.executable, data=str(SAMPLE)))
    replay.chmod(0o755)
    Cluster.objects.filter(name="slurm-testbed").update(sacct_command=str(replay))
    return Cluster.objects.get(name="slurm-testbed")


def _ledger() -> tuple[list[Any], list[Any], list[Any]]:
    jobs = sorted(
        Job.objects.values_list(
            "job_id_raw", "run", "charge_state", "service_units", "pending_service_units",
            "energy_wh", "start", "end",
        )
    )  # fmt: skip
    daily = sorted(
        UsageDaily.objects.values_list(
            "project_id", "partition_id", "username", "day", "service_units", "jobs"
        )
    )
    hourly = sorted(
        UtilisationHourly.objects.values_list(
            "partition_id", "hour_start", "core_seconds", "gpu_seconds"
        )
    )
    return jobs, daily, hourly


def _whole_file_ledger(cluster: Cluster) -> tuple[list[Any], list[Any], list[Any]]:
    with SAMPLE.open() as lines:
        jobs_import(cluster=cluster, lines=lines, source="whole file")
    ledger = _ledger()
    _forget()
    return ledger


def _forget() -> None:
    Job.objects.all().delete()
    UsageDaily.objects.all().delete()
    UtilisationHourly.objects.all().delete()


def test_a_range_is_split_into_consecutive_windows() -> None:
    windows = backfill_windows(since=SINCE, until=UNTIL, window=timedelta(minutes=5))

    assert windows == [
        (SINCE, SINCE + timedelta(minutes=5)),
        (SINCE + timedelta(minutes=5), SINCE + timedelta(minutes=10)),
        (SINCE + timedelta(minutes=10), UNTIL),
    ]
    with pytest.raises(ValueError, match="after its start"):
        backfill_windows(since=UNTIL, until=SINCE, window=timedelta(minutes=5))


@pytest.mark.django_db
def test_a_serial_backfill_charges_what_one_import_of_the_range_charges(testbed: Cluster) -> None:
    expected = _whole_file_ledger(testbed)
    out = StringIO()

    call_command(
        "import_backfill", "--cluster", "slurm-testbed", "--since", SINCE.isoformat(),
        "--until", UNTIL.isoformat(), "--window-hours", str(1 / 60), "--serial", "--json",
        stdout=out,
    )  # fmt: skip

    result = json.loads(out.getvalue())
    assert result["windows"] == 12
    # Jobs that ran across a minute boundary are read by several windows, charged once.
    assert result["charged"] + result["quarantined"] < result["lines"]
    assert _ledger() == expected
    testbed.refresh_from_db()
    assert testbed.last_imported_until is None  # the schedule's position is left alone
    assert ImportRun.objects.filter(source__startswith="backfill sacct").count() == 12


@pytest.mark.django_db
def test_the_backfill_command_enqueues_one_task_per_window(
    testbed: Cluster, django_capture_on_commit_callbacks
) -> None:
    expected = _whole_file_ledger(testbed)
    out = StringIO()

    with django_capture_on_commit_callbacks(execute=True):
        call_command(
            "import_backfill", "--cluster", "slurm-testbed", "--since", SINCE.isoformat(),
            "--until", UNTIL.isoformat(), "--window-hours", str(3 / 60), "--json", stdout=out,
        )  # fmt: skip

    assert len(json.loads(out.getvalue())["enqueued"]) == 4
    assert _ledger() == expected  # eager here: the tasks ran in this process


@pytest.mark.django_db
def test_a_backfill_range_must_be_a_range(testbed: Cluster) -> None:
    with pytest.raises(CommandError, match="after its start"):
        call_command(
            "import_backfill", "--cluster", "slurm-testbed", "--since", UNTIL.isoformat(),
            "--until", SINCE.isoformat(), stdout=StringIO(),
        )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_parallel_backfill_on_two_workers_gives_the_ledger_of_a_serial_one(
    testbed: Cluster,
) -> None:
    needs_real_services("the parallel backfill", broker=True)
    call_command(
        "import_backfill", "--cluster", "slurm-testbed", "--since", SINCE.isoformat(),
        "--until", UNTIL.isoformat(), "--window-hours", str(1 / 60), "--serial", stdout=StringIO(),
    )  # fmt: skip
    serial = _ledger()
    _forget()
    windows = backfill_windows(since=SINCE, until=UNTIL, window=timedelta(minutes=1))

    with start_celery_worker(name="backfill-a"), start_celery_worker(name="backfill-b"):
        results = [
            import_sacct_backfill_window.apply_async(
                args=(testbed.pk, start.isoformat(), end.isoformat())
            )
            for start, end in windows
        ]
        outcomes = [result.get(timeout=300) for result in results]

    assert all("import_run" in outcome for outcome in outcomes), outcomes
    assert _ledger() == serial

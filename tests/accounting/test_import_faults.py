"""Imports under faults, on the real services: concurrent workers, a worker killed mid-import."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from django.db import connection, connections

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import BATCH_SIZE, jobs_import
from accounting.models import Cluster, ImportRun, Job, UsageDaily
from accounting.tasks import import_sacct_file
from benchmarks.sacct_generator import write_sacct_file
from projects.models import Project
from tests.workers import start_celery_worker

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ACCOUNTS = ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004")

pytestmark = [pytest.mark.django_db(transaction=True)]


def _needs_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("concurrency and kill tests need PostgreSQL (SQLite fallback in use)")


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ACCOUNTS:
        Project.objects.get_or_create(code=code)
    return Cluster.objects.get(name="slurm-testbed")


def _ledger():
    jobs = sorted(
        Job.objects.values_list("job_id_raw", "run", "charge_state", "service_units", "energy_wh")
    )
    rollups = sorted(
        UsageDaily.objects.values_list(
            "project__code", "partition__name", "username", "day", "service_units", "jobs"
        )
    )
    return jobs, rollups


def _reset_ledger():
    Job.objects.all().delete()
    UsageDaily.objects.all().delete()


def test_two_concurrent_imports_of_overlapping_windows_charge_each_job_once(testbed):
    _needs_postgresql()
    lines = (SAMPLE / "sacct_all_duplicates.psv").read_text().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    jobs_import(cluster=testbed, lines=lines, source="reference")
    reference = _ledger()
    _reset_ledger()

    # Two windows that overlap by two thirds, imported at the same time in small batches.
    windows = [[header, *body[: len(body) * 5 // 6]], [header, *body[len(body) // 6 :]]]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(window):
        try:
            start.wait()
            jobs_import(cluster=testbed, lines=window, source="window", batch_size=20)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(window,)) for window in windows]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert _ledger() == reference


KILL_AFTER_BATCH = 3


@pytest.mark.worker
def test_a_worker_killed_mid_import_and_restarted_ends_with_the_same_ledger(testbed, tmp_path):
    """The worker dies by SIGKILL right after its third batch commits (a fault hook, not a
    sleep: the kill lands at the same point on every machine), then a new worker imports the
    file again and the ledger is exactly that of one clean import."""
    _needs_postgresql()
    if not os.environ.get("CELERY_BROKER_URL"):
        pytest.skip("needs a real broker (eager fallback in use)")
    big = tmp_path / "sacct.psv"
    write_sacct_file(big, lines=60_000, cluster="slurm-testbed", seed=7)
    run = ImportRun.objects.create(cluster=testbed, source="reference")
    with big.open() as handle:
        jobs_import(cluster=testbed, lines=handle, source="reference", run=run)
    reference = _ledger()
    _reset_ledger()

    first = ImportRun.objects.create(cluster=testbed, source=f"upload {big.name}")
    fault = {"PORTAL_IMPORT_FAULT_AFTER_BATCH": str(KILL_AFTER_BATCH)}
    with start_celery_worker(name="victim", env=fault) as worker:
        import_sacct_file.apply_async(args=[first.pk, str(big)])
        assert worker.wait(timeout=300) == -signal.SIGKILL
    first.refresh_from_db()
    assert first.status == ImportRun.Status.RUNNING  # it never finished
    assert first.lines == _lines_in_batches(big, KILL_AFTER_BATCH)  # exactly three batches
    partial = Job.objects.count()
    assert 0 < partial < len(reference[0])

    second = ImportRun.objects.create(cluster=testbed, source=f"upload {big.name} (rerun)")
    with start_celery_worker(name="restarted"):
        result = import_sacct_file.apply_async(args=[second.pk, str(big)])
        summary = result.get(timeout=300)
    assert summary["charged"] + summary["pending"] + summary["imported"] > 0
    assert _ledger() == reference


def _lines_in_batches(path, batches: int) -> int:
    """The lines the first ``batches`` batches hold: BATCH_SIZE each, and the steps that follow
    the last job of a batch with it (a batch never ends between a job and its steps)."""
    lines, count = path.read_text().splitlines()[1:], 0
    for _ in range(batches):
        count = min(count + BATCH_SIZE, len(lines))
        while count < len(lines) and "." in lines[count].split("|")[1]:
            count += 1
    return count


def test_the_fault_hook_is_off_unless_asked_for(settings):
    assert settings.IMPORT_FAULT_AFTER_BATCH == 0


def test_a_batch_retried_after_a_lost_race_creates_its_projects_again(testbed, monkeypatch):
    """A batch that created a project and then lost a race (a deadlock or the unique key) is
    rolled back with its project; the retry must create it again, not point at the one that
    is gone (that was a foreign-key violation at commit, five times, and a failed import)."""
    from django.db import IntegrityError

    from accounting.ledger import pipeline

    real_insert = pipeline._jobs_insert
    calls = []

    def insert_losing_the_first_race(rows):
        calls.append(len(rows))
        if len(calls) == 1:
            raise IntegrityError("duplicate key value violates unique constraint (simulated)")
        real_insert(rows)

    monkeypatch.setattr(pipeline, "_jobs_insert", insert_losing_the_first_race)
    lines = (SAMPLE / "sacct_allocations.psv").read_text().splitlines()
    lines = [lines[0], *(line.replace("|pawsey0001|", "|newproj|") for line in lines[1:20])]

    _, summary = jobs_import(cluster=testbed, lines=lines, source="race", create_projects=True)

    assert len(calls) == 2
    assert summary.quarantined == 0
    project = Project.objects.get(code="newproj")
    assert Job.objects.filter(project=project).exists()

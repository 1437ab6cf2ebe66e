"""Runs that finish themselves: the recovery of stale import runs, the resume from the committed
lines, and a run marked failed on a broken connection (docs/importing.md). The fault tests on
real services (a worker killed, PostgreSQL restarted, Redis stopped) are in
test_import_faults.py."""

from __future__ import annotations

import sys
import threading
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger import pipeline
from accounting.ledger.pipeline import BATCH_SIZE, jobs_import
from accounting.ledger.recovery import import_runs_recover
from accounting.locks import import_run_lock
from accounting.models import Cluster, ImportRun, Job
from accounting.tasks import import_runs_recover_task, import_sacct_file
from benchmarks.sacct_generator import write_sacct_file
from projects.models import Project
from tests import workers
from tests.accounting.test_import_faults import _ledger, _reset_ledger
from tests.conftest import needs_real_services

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ACCOUNTS = ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004")
STALE = timedelta(minutes=15)

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ACCOUNTS:
        Project.objects.get_or_create(code=code)
    return Cluster.objects.get(name="slurm-testbed")


@pytest.fixture
def uploads(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    (tmp_path / "uploads").mkdir()
    return tmp_path / "uploads"


def _recover(**overrides):
    options = {
        "now": timezone.now() + STALE + timedelta(seconds=1),
        "stale_after": STALE,
        "max_attempts": 3,
        "limit": 100,
        **overrides,
    }
    return import_runs_recover(**options)


def test_a_requeued_upload_resumes_after_its_committed_lines_and_counts_each_line_once(
    testbed, uploads
):
    """Two batches committed, then the worker died: the recovery queues the upload again (the
    eager worker of the tests runs it at once), which reads on from line 10,001. The run ends
    with every line counted once and the ledger of one clean import."""
    big = write_sacct_file(uploads / "import-x.psv", lines=3 * BATCH_SIZE, seed=3)
    with big.open() as handle:
        jobs_import(cluster=testbed, lines=handle, source="reference")
    reference = _ledger()
    total = ImportRun.objects.get(source="reference").lines
    _reset_ledger()

    run = ImportRun.objects.create(
        cluster=testbed, source="upload import-x.psv", task_options={"path": big.name}
    )
    # The first attempt: its first two batches (what a worker killed after them committed).
    lines = big.read_text().splitlines(keepends=True)
    jobs_import(
        cluster=testbed, lines=lines[: 1 + pipeline_lines(lines, 2)], source=run.source, run=run,
        finish_run=False,
    )  # fmt: skip
    run.refresh_from_db()
    assert run.status == ImportRun.Status.RUNNING
    committed = run.lines

    assert _recover() == {run.pk: "requeued"}

    run.refresh_from_db()
    assert run.status == ImportRun.Status.SUCCEEDED
    assert run.attempts == 2
    assert run.lines == total
    assert f"resuming after line {committed}" in run.interruptions
    assert f"resumed after the {committed} lines already committed" in run.interruptions
    assert _ledger() == reference


def pipeline_lines(lines: list[str], batches: int) -> int:
    """The data lines the first ``batches`` batches hold (a batch never ends between a job and
    its steps)."""
    body, count = lines[1:], 0
    for _ in range(batches):
        count = min(count + BATCH_SIZE, len(body))
        while count < len(body) and "." in body[count].split("|")[1]:
            count += 1
    return count


def test_a_task_delivered_again_for_a_finished_run_stands_down(testbed, uploads):
    (uploads / "import-1.psv").write_bytes((SAMPLE / "sacct_allocations.psv").read_bytes())
    run = ImportRun.objects.create(cluster=testbed, source="upload", task_options={"path": "x"})
    import_sacct_file.apply(args=[run.pk, "import-1.psv"]).get()
    run.refresh_from_db()
    assert run.status == ImportRun.Status.SUCCEEDED
    lines, jobs = run.lines, Job.objects.count()

    again = import_sacct_file.apply(args=[run.pk, "import-1.psv"]).get()

    run.refresh_from_db()
    assert again["import_run"] == run.pk
    assert (run.lines, Job.objects.count()) == (lines, jobs)


def test_a_stale_window_is_failed_and_its_window_imported_again(testbed, tmp_path):
    replay = tmp_path / "sacct"
    dump = SAMPLE / "sacct_allocations.psv"  # what sacct prints for the window, here
    replay.write_text(f"#!{sys.executable}\nprint(open({str(dump)!r}).read(), end='')\n")
    replay.chmod(0o755)
    Cluster.objects.filter(pk=testbed.pk).update(sacct_command=str(replay))
    start = timezone.now() - timedelta(days=1)
    run = ImportRun.objects.create(
        cluster=testbed, source="sacct window", window_start=start, window_end=timezone.now()
    )

    assert _recover() == {run.pk: "failed"}

    run.refresh_from_db()
    assert run.status == ImportRun.Status.FAILED
    assert "its window is imported again by a new run (attempt 2)" in run.error
    again = ImportRun.objects.exclude(pk=run.pk).get()
    assert (again.window_start, again.window_end) == (run.window_start, run.window_end)
    assert again.attempts == 2
    assert again.status == ImportRun.Status.SUCCEEDED
    assert again.charged > 0


def test_what_cannot_be_queued_again_is_failed_with_the_reason(testbed, uploads):
    command_line = ImportRun.objects.create(cluster=testbed, source="/data/sacct.psv")
    gone = ImportRun.objects.create(
        cluster=testbed, source="upload", task_options={"path": "import-404.psv"}
    )
    (uploads / "import-9.psv").write_text("JobID\n")
    tired = ImportRun.objects.create(
        cluster=testbed, source="upload", task_options={"path": "import-9.psv"}, attempts=3
    )

    assert _recover() == {command_line.pk: "failed", gone.pk: "failed", tired.pk: "failed"}

    errors = {run.pk: run.error for run in ImportRun.objects.all()}
    assert "nothing can start it again: run the command again" in errors[command_line.pk]
    assert "its uploaded file import-404.psv is gone" in errors[gone.pk]
    assert "given up after 3 attempts" in errors[tired.pk]
    assert all(ImportRun.objects.get(pk=pk).interruptions for pk in errors)


def test_a_run_with_a_recent_heartbeat_or_a_live_task_is_left_alone(testbed):
    fresh = ImportRun.objects.create(cluster=testbed, source="/data/a.psv")
    slow = ImportRun.objects.create(cluster=testbed, source="/data/b.psv")
    ImportRun.objects.filter(pk=fresh.pk).update(heartbeat_at=timezone.now() + STALE)
    held, release = threading.Event(), threading.Event()

    def live_task():  # a task importing ``slow``: it holds the run's lock on its connection
        try:
            with import_run_lock(slow.pk):
                held.set()
                release.wait(60)
        finally:
            connection.close()

    thread = threading.Thread(target=live_task)
    thread.start()
    try:
        assert held.wait(30)
        outcome = _recover()
    finally:
        release.set()
        thread.join(60)

    expected = {slow.pk: "alive"} if connection.vendor == "postgresql" else {slow.pk: "failed"}
    assert outcome == expected
    fresh.refresh_from_db()
    assert fresh.status == ImportRun.Status.RUNNING


def test_marking_a_run_failed_survives_a_broken_connection(testbed):
    """The database dropped the importer's connection (a restart does): marking the run failed
    opens a new one instead of failing too."""
    needs_real_services("a broken connection's recovery")
    run = ImportRun.objects.create(cluster=testbed, source="/data/c.psv")
    connection.ensure_connection()
    victim = connection.connection.info.backend_pid
    with psycopg.connect(workers.test_database_url(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [victim])

    pipeline._run_failed(run, "OperationalError: the server closed the connection")

    run.refresh_from_db()
    assert run.status == ImportRun.Status.FAILED
    assert connection.connection.info.backend_pid != victim


def test_the_brokers_visibility_timeout_outlasts_every_tasks_time_limit(settings):
    """Below it, Redis would hand a task still running to a second worker (late acks)."""
    from portal.celery import app

    app.loader.import_default_modules()
    limits = [
        task.time_limit or settings.CELERY_TASK_TIME_LIMIT
        for name, task in app.tasks.items()
        if not name.startswith("celery.")
    ]
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] > max(limits)


def test_an_upload_queued_before_its_options_were_kept_is_queued_again_from_its_kept_file(
    testbed, uploads
):
    run = ImportRun.objects.create(cluster=testbed, source="upload old.psv", checksum="ab" * 32)
    (uploads / f"import-{run.pk}.psv").write_bytes((SAMPLE / "sacct_allocations.psv").read_bytes())

    assert _recover() == {run.pk: "requeued"}

    run.refresh_from_db()
    assert run.status == ImportRun.Status.SUCCEEDED
    assert run.charged > 0


def test_the_recovery_task_is_on_the_beat_schedule_and_reports_what_it_did(testbed, settings):
    entry = settings.CELERY_BEAT_SCHEDULE["import-runs-recover"]
    assert entry["task"] == "accounting.tasks.import_runs_recover"
    settings.IMPORT_STALE_MINUTES = 1
    run = ImportRun.objects.create(cluster=testbed, source="/data/d.psv")
    ImportRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=2))

    assert import_runs_recover_task.delay().get() == {"import_runs": {str(run.pk): "failed"}}
    assert import_runs_recover_task.delay().get() == {"import_runs": {}}

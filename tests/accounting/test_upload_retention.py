"""Staff uploads are deleted PORTAL_UPLOAD_RETENTION_DAYS after their run finished, by an
hourly beat task; a running run's file is never touched, and a second run changes nothing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.sources import import_upload_start, uploads_expire
from accounting.models import Cluster, ImportRun
from accounting.tasks import uploads_expire_task
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct" / "sacct_allocations.psv"

pytestmark = pytest.mark.django_db


@pytest.fixture
def uploads(settings, tmp_path, django_capture_on_commit_callbacks):
    """Four uploads kept in ``tmp_path/uploads``: succeeded 40 days ago, failed 40 days ago
    (not sacct output), succeeded yesterday, and one still running, started 60 days ago."""
    settings.VAR_DIR = tmp_path
    settings.PORTAL_UPLOAD_RETENTION_DAYS = 30
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003"):
        Project.objects.create(code=code)
    cluster = Cluster.objects.get(name="slurm-testbed")
    lines = SAMPLE.read_bytes().splitlines(keepends=True)

    def upload(name: str, content: bytes, *, run_it: bool = True) -> ImportRun:
        with django_capture_on_commit_callbacks(execute=run_it):
            run = import_upload_start(cluster=cluster, name=name, chunks=[content])
        run.refresh_from_db()
        return run

    old = upload("old.psv", b"".join(lines[:50]))
    failed = upload("notes.psv", b"hello world\n")
    recent = upload("recent.psv", b"".join([lines[0], *lines[50:100]]))
    running = upload("running.psv", b"".join([lines[0], *lines[100:150]]), run_it=False)
    assert [run.status for run in (old, failed, recent, running)] == [
        "succeeded", "failed", "succeeded", "running"
    ]  # fmt: skip
    now = timezone.now()
    ImportRun.objects.filter(pk__in=[old.pk, failed.pk]).update(
        finished_at=now - timedelta(days=40)
    )
    ImportRun.objects.filter(pk=recent.pk).update(finished_at=now - timedelta(days=1))
    ImportRun.objects.filter(pk=running.pk).update(started_at=now - timedelta(days=60))
    return {"old": old, "failed": failed, "recent": recent, "running": running}


def _kept(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in (tmp_path / "uploads").iterdir())


def test_a_finished_runs_old_upload_is_deleted_and_noted_and_the_others_are_kept(uploads, tmp_path):
    old, failed, recent, running = (uploads[key] for key in ("old", "failed", "recent", "running"))
    assert _kept(tmp_path) == sorted(
        f"import-{run.pk}.psv" for run in (old, failed, recent, running)
    )

    result = uploads_expire_task.delay().get()

    assert sorted(result["import_runs"]) == sorted([old.pk, failed.pk])
    assert _kept(tmp_path) == sorted(f"import-{run.pk}.psv" for run in (recent, running))
    for run in (old, failed):
        run.refresh_from_db()
        assert run.upload_deleted_at is not None
    for run in (recent, running):
        run.refresh_from_db()
        assert run.upload_deleted_at is None
    assert ImportRun.objects.get(pk=old.pk).status == "succeeded"  # the run itself stays


def test_a_second_run_changes_nothing(uploads, tmp_path):
    uploads_expire_task.delay().get()
    kept = _kept(tmp_path)
    noted = dict(ImportRun.objects.values_list("pk", "upload_deleted_at"))

    assert uploads_expire_task.delay().get() == {"import_runs": []}

    assert _kept(tmp_path) == kept
    assert dict(ImportRun.objects.values_list("pk", "upload_deleted_at")) == noted


def test_a_running_runs_upload_is_kept_however_old(uploads, tmp_path):
    running = uploads["running"]
    expired = uploads_expire(
        upload_dir=tmp_path / "uploads", older_than=timedelta(0),
        now=timezone.now() + timedelta(days=365), limit=100,
    )  # fmt: skip
    assert running.pk not in [run.pk for run in expired]
    assert _kept(tmp_path) == [f"import-{running.pk}.psv"]


def test_each_call_is_bounded_and_takes_the_oldest_first(uploads, tmp_path):
    ImportRun.objects.filter(pk=uploads["failed"].pk).update(
        finished_at=timezone.now() - timedelta(days=50)
    )
    first = uploads_expire(
        upload_dir=tmp_path / "uploads", older_than=timedelta(days=30), now=timezone.now(),
        limit=1,
    )  # fmt: skip
    assert [run.pk for run in first] == [uploads["failed"].pk]
    assert f"import-{uploads['old'].pk}.psv" in _kept(tmp_path)


def test_zero_days_keeps_every_upload(uploads, tmp_path, settings):
    settings.PORTAL_UPLOAD_RETENTION_DAYS = 0
    kept = _kept(tmp_path)
    assert "skipped" in uploads_expire_task.delay().get()
    assert _kept(tmp_path) == kept


def test_the_task_is_on_the_beat_schedule(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["uploads-expire"]
    assert entry["task"] == uploads_expire_task.name

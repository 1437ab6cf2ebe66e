"""A staff upload goes from the web, which keeps the file, to a worker, which imports it: the
two must share the uploads directory (docker-compose.yml's ``uploads`` volume, issue 32).
When they do not, the run fails saying so instead of staying 'running' with 0 lines."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.models import Cluster, ImportRun
from accounting.tasks import import_sacct_file
from projects.models import Project
from tests.factories import UserFactory
from tests.workers import others_not_consuming, start_celery_worker

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct" / "midrun" / "sacct_midrun_allocations.psv"
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ACCOUNTS = ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004")
RUN_DEADLINE_SECONDS = 60


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ACCOUNTS:
        Project.objects.get_or_create(code=code)
    return Cluster.objects.get(name="slurm-testbed")


@pytest.mark.django_db
def test_a_run_whose_uploaded_file_is_not_on_the_worker_fails_and_says_why(
    testbed, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    run = ImportRun.objects.create(cluster=testbed, source="upload midrun.psv")
    result = import_sacct_file.apply(args=[run.pk, f"import-{run.pk}.psv"]).get()
    run.refresh_from_db()
    assert run.status == ImportRun.Status.FAILED
    assert run.finished_at is not None
    assert f"import-{run.pk}.psv is not in {tmp_path / 'uploads'}" in run.error
    assert "must share the uploads directory" in run.error
    assert result == {"import_run": run.pk, "error": run.error}


def _upload_as_staff(client: Client) -> int:
    """POST the sample as the web does it (202) and return the run's id."""
    response = client.post(
        "/api/v1/imports/",
        {"cluster": "slurm-testbed", "file": SimpleUploadedFile("midrun.psv", SAMPLE.read_bytes())},
    )
    assert response.status_code == 202, response.content
    return response.json()["id"]


def _finished(run_id: int) -> ImportRun:
    """The run once it is no longer running (bounded: fails after RUN_DEADLINE_SECONDS)."""
    deadline = time.monotonic() + RUN_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        run = ImportRun.objects.get(pk=run_id)
        if run.status != ImportRun.Status.RUNNING:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} still running after {RUN_DEADLINE_SECONDS} s")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_without_the_webs_uploads_fails_the_run_and_one_sharing_them_imports_it(
    testbed, settings, tmp_path
):
    """Compose's layout with two processes: this one is the web (its uploads under
    ``settings.VAR_DIR``), a real Celery worker the importer, with its own PORTAL_VAR_DIR."""
    if connection.vendor != "postgresql" or not os.environ.get("CELERY_BROKER_URL"):
        pytest.skip("needs PostgreSQL and a real broker (SQLite / eager fallback in use)")
    from portal.celery import app

    app.control.purge()
    staff = Client()
    staff.force_login(UserFactory(username="ops", is_staff=True))
    web_root, worker_root = tmp_path / "web", tmp_path / "worker"

    # Separate volumes: the worker looks in its own, empty, uploads directory. Only this test's
    # workers consume imports meanwhile (the session's worker, with the suite's var dir, would
    # otherwise take the task now and then).
    settings.VAR_DIR = web_root
    with (
        others_not_consuming(),
        start_celery_worker(name="apart", env={"PORTAL_VAR_DIR": str(worker_root)}),
    ):
        apart = _finished(_upload_as_staff(staff))
    assert apart.status == ImportRun.Status.FAILED
    assert apart.lines == 0
    assert f"is not in {worker_root / 'uploads'} on the importing worker" in apart.error
    assert "must share the uploads directory" in apart.error
    assert (web_root / "uploads" / f"import-{apart.pk}.psv").is_file()  # kept, on the web

    # One shared volume: the same file (a failed run does not count as imported) imports.
    settings.VAR_DIR = worker_root
    with (
        others_not_consuming(),
        start_celery_worker(name="shared", env={"PORTAL_VAR_DIR": str(worker_root)}),
    ):
        shared = _finished(_upload_as_staff(staff))
    assert shared.status == ImportRun.Status.SUCCEEDED, shared.error
    assert shared.lines > 0
    assert shared.error == ""

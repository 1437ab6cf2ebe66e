"""Scheduled sacct imports: the beat entry per cluster, the window, and the per-cluster lock."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connections
from django_celery_beat.models import PeriodicTask

from accounting.clusters.services import cluster_apply, cluster_import_schedule_sync
from accounting.clusters.specs import cluster_definition_load
from accounting.locks import ImportLockBusy, cluster_import_lock
from accounting.models import Cluster, ImportRun
from accounting.tasks import import_sacct_window
from projects.models import Project
from tests.conftest import needs_real_services

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct" / "sacct_allocations.psv"


@pytest.fixture
def testbed(tmp_path):
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    fake = tmp_path / "sacct"
    log = tmp_path / "calls"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\ncat {SAMPLE}\n')
    fake.chmod(0o755)
    Cluster.objects.filter(name="slurm-testbed").update(sacct_command=str(fake))
    cluster = Cluster.objects.get(name="slurm-testbed")
    cluster.calls_log = log
    return cluster


@pytest.mark.django_db
def test_every_cluster_gets_a_beat_entry_that_follows_its_settings(testbed):
    task = PeriodicTask.objects.get(name="sacct import: slurm-testbed")
    assert task.task == "accounting.tasks.import_sacct_window"
    assert json.loads(task.args) == [testbed.pk]
    assert task.queue == "imports"
    assert task.enabled is False  # imports stay off until staff turn them on
    testbed.imports_enabled = True
    testbed.import_interval_minutes = 5
    testbed.save()
    cluster_import_schedule_sync(cluster=testbed)
    task.refresh_from_db()
    assert task.enabled is True
    assert task.interval.every == 5
    assert PeriodicTask.objects.filter(name__startswith="sacct import:").count() == 1


@pytest.mark.django_db
def test_each_window_starts_an_overlap_before_the_previous_one_ended(testbed):
    last = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    Cluster.objects.filter(pk=testbed.pk).update(
        last_imported_until=last, import_overlap_minutes=30
    )
    result = import_sacct_window.delay(testbed.pk).get()
    assert result["lines"] == 225
    assert result["charged"] == 225  # every allocation of this sample has finished
    call = testbed.calls_log.read_text()
    assert "--starttime=2026-11-22T00:30:00" in call
    run = ImportRun.objects.get()
    assert run.window_start == last - timedelta(minutes=30)
    testbed.refresh_from_db()
    assert testbed.last_imported_until == run.window_end
    again = import_sacct_window.delay(testbed.pk).get()
    assert again["charged"] == 0
    assert again["imported"] == 225


@pytest.mark.django_db(transaction=True)
def test_a_second_import_of_the_same_cluster_stands_down_while_the_first_holds_the_lock(testbed):
    needs_real_services("the import lock (a PostgreSQL advisory lock)")
    held, release = threading.Event(), threading.Event()

    def first_import():
        try:
            with cluster_import_lock(testbed):
                held.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=first_import)
    thread.start()
    assert held.wait(30)
    try:
        with pytest.raises(ImportLockBusy), cluster_import_lock(testbed):
            pass
        assert import_sacct_window.delay(testbed.pk).get() == {
            "skipped": "an import of slurm-testbed is already running"
        }
        assert not ImportRun.objects.exists()
    finally:
        release.set()
        thread.join(30)
    with cluster_import_lock(testbed):  # released with the first import
        pass

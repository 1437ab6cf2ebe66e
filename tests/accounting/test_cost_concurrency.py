"""Cost model versions against running imports, on PostgreSQL: a batch that is pricing holds
the cluster's row lock shared, so a new version (and each batch of its recomputation) waits
for it, and no job is left priced with a superseded version."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
from django.db import connection, connections, transaction

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.costs.services import cost_model_version_create
from accounting.locks import cluster_row_lock
from accounting.models import Cluster, CostModelVersion
from tests.accounting.test_cost_services import MODEL, SPEC

pytestmark = [pytest.mark.django_db(transaction=True)]


def _wait_until_a_session_waits_for_a_lock(timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if cursor.fetchone()[0]:
                return
            assert time.monotonic() < deadline, "the version never waited for the batch's lock"
            time.sleep(0.02)


def test_saving_a_version_waits_for_an_import_batch_that_is_pricing():
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL (SQLite writers take turns anyway)")
    cluster_apply(definition=cluster_definition_load(SPEC))
    cluster = Cluster.objects.get(name="slurm-testbed")
    batch_holds_lock, release_batch = threading.Event(), threading.Event()
    events: list[str] = []

    def import_batch():
        try:
            with transaction.atomic():
                cluster_row_lock(cluster, exclusive=False)
                batch_holds_lock.set()
                release_batch.wait(timeout=30)
                events.append("batch committed")
        finally:
            connections.close_all()

    def save_version():
        try:
            cost_model_version_create(
                cluster=cluster, name="new", text=MODEL,
                effective_from=datetime(2026, 1, 1, tzinfo=UTC),
            )  # fmt: skip
            events.append("version saved")
        finally:
            connections.close_all()

    batch = threading.Thread(target=import_batch)
    batch.start()
    assert batch_holds_lock.wait(timeout=30)
    saver = threading.Thread(target=save_version)
    saver.start()
    _wait_until_a_session_waits_for_a_lock()  # the saver is blocked: a state, not a delay
    assert events == []  # the version waits for the batch
    release_batch.set()
    batch.join(timeout=30)
    saver.join(timeout=30)
    assert events == ["batch committed", "version saved"]
    assert CostModelVersion.objects.filter(cluster=cluster).count() == 1

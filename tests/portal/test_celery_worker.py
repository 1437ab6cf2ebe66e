"""Tasks really go through the broker to a separate worker process when Redis is there."""

import os

import pytest

from portal.tasks import worker_health
from tests.factories import PartitionVersionFactory


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_task_runs_in_a_separate_worker_process_that_sees_the_test_database(celery_worker):
    if celery_worker is None:
        pytest.skip("no broker configured: Celery runs eagerly (fallback)")
    PartitionVersionFactory()
    result = worker_health.delay()
    report = result.get(timeout=30)
    assert report["pid"] == celery_worker["pid"]
    assert report["pid"] != os.getpid()
    assert report["database_vendor"] == "postgresql"
    assert report["partition_versions"] == 1


@pytest.mark.django_db
def test_without_the_worker_fixture_tasks_run_eagerly_in_this_process():
    assert worker_health.delay().get(timeout=5)["pid"] == os.getpid()

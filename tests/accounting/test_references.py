"""The ledger's references, checked set-wise by the import for each batch (accounting/ledger/
references.py) now that the jobs table has no foreign-key constraints: a reference that is
gone stops the batch with an error naming it, and a delete of a row a batch refers to waits
for the batch, as the foreign key made it."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from accounting.ledger.pipeline import ImportSummary, jobs_import
from accounting.ledger.references import ReferenceMissing, references_check
from accounting.models import ImportRun, Job
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project
from tests.factories import ProjectFactory, example_cluster

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def testbed():
    cluster = example_cluster("slurm-testbed")
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    return cluster


def test_a_row_that_points_at_a_missing_project_is_refused_with_its_id(testbed):
    project = ProjectFactory.create()
    gone = project.pk
    Project.objects.filter(pk=gone).delete()
    with pytest.raises(ReferenceMissing, match=rf"project {gone}\b"), transaction.atomic():
        references_check([{"cluster_id": testbed.pk, "project_id": gone, "user_id": None}])
    references_check([{"cluster_id": testbed.pk, "project_id": None}])  # None is no reference


def test_a_rate_version_deleted_between_lookup_and_write_fails_the_import_not_the_ledger(
    testbed,
):
    now = timezone.now().replace(microsecond=0)
    dump = list(
        sacct_lines(
            lines=90, seed=7, start=now - timedelta(days=30), mean_gap_seconds=20000, now=now,
            allocations=True,
        )
    )  # fmt: skip
    deleted: list[int] = []

    def after_batch(summary: ImportSummary) -> None:
        # After the first batch, the rate version most of its jobs used is deleted by raw SQL
        # (the ORM would refuse: PROTECT). The import's lookups still hold it.
        if deleted:
            return
        used = Counter(Job.objects.values_list("partition_version_id", flat=True))
        version, _ = used.most_common(1)[0]
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM accounting_partitionversion WHERE id = %s", [version])
        deleted.append(version)

    with pytest.raises(ReferenceMissing, match=r"partition version \d+") as raised:
        jobs_import(
            cluster=testbed, lines=dump, source="version deleted", batch_size=30,
            progress=after_batch,
        )  # fmt: skip
    assert f"partition version {deleted[0]}" in str(raised.value)
    written = Job.objects.count()
    assert 0 < written <= 31  # the first batch only: the second was written not at all
    run = ImportRun.objects.get(source="version deleted")
    assert run.status == ImportRun.Status.FAILED
    assert "ReferenceMissing" in run.error
    assert f"partition version {deleted[0]}" in run.error


def test_a_delete_of_a_row_the_batch_refers_to_waits_for_the_batch(testbed):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's (SQLite has one writer at a time)")
    project = ProjectFactory.create()
    settings = connection.settings_dict
    other: dict[str, Any] = {
        "dbname": settings["NAME"], "user": settings["USER"], "password": settings["PASSWORD"],
        "host": settings["HOST"], "port": settings["PORT"] or 5432, "autocommit": True,
    }  # fmt: skip
    with transaction.atomic():
        references_check([{"cluster_id": testbed.pk, "project_id": project.pk}])
        with psycopg.connect(**other) as second:
            # The batch holds the project FOR KEY SHARE: the delete cannot take its row.
            second.execute("SET lock_timeout = '50ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                second.execute(
                    f"DELETE FROM {Project._meta.db_table} WHERE id = %s",  # noqa: S608
                    [project.pk],
                )
    assert Project.objects.filter(pk=project.pk).exists()

"""The ledger's stamp (what the project page's charts are cached under) moves with every
committed import batch and with nothing rolled back, and costs one row's read however many
import runs the years have left."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounting.ledger.pipeline import jobs_import
from accounting.ledger.rollups import ledger_stamp_move
from accounting.ledger.selectors import ledger_stamp
from accounting.models import ImportRun, LedgerStamp
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project
from tests.factories import example_cluster

pytestmark = pytest.mark.django_db


def _batches() -> int:
    return int(ledger_stamp().rpartition(".")[2])


def test_every_committed_batch_moves_it_once():
    cluster = example_cluster("slurm-testbed")
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    now = timezone.now()
    dump = list(
        sacct_lines(
            lines=120, seed=4, start=now - timedelta(days=2), mean_gap_seconds=600, now=now,
            allocations=True,
        )
    )  # fmt: skip
    before = _batches()
    _, summary = jobs_import(cluster=cluster, lines=dump, source="a dump", batch_size=50)
    assert summary.charged > 0
    assert _batches() == before + 3  # 120 lines, 50 a batch

    jobs_import(cluster=cluster, lines=dump, source="the same dump again", batch_size=200)
    assert _batches() == before + 4  # a batch that changed nothing still committed


def test_a_batch_rolled_back_leaves_it_where_it_was():
    before = ledger_stamp()

    def failing_batch() -> None:
        with transaction.atomic():
            ledger_stamp_move()
            assert ledger_stamp() != before
            raise RuntimeError("the batch failed")

    with pytest.raises(RuntimeError):
        failing_batch()
    assert ledger_stamp() == before


def test_a_missing_row_is_written_again():
    LedgerStamp.objects.all().delete()
    assert ledger_stamp() == "batches.0"
    ledger_stamp_move()
    ledger_stamp_move()
    assert ledger_stamp() == "batches.2"


def test_reading_it_is_one_row_whatever_the_number_of_runs():
    cluster = example_cluster("slurm-testbed")
    ImportRun.objects.bulk_create(
        ImportRun(cluster=cluster, source=f"run {number}", lines=300) for number in range(200)
    )
    with CaptureQueriesContext(connection) as queries:
        ledger_stamp()
    assert len(queries) == 1
    assert "accounting_importrun" not in queries[0]["sql"]
    assert "accounting_ledgerstamp" in queries[0]["sql"]

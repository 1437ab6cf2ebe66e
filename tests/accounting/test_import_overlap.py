"""Batches overlapped (docs/importing.md): a batch written on a second connection while the
next is priced books exactly what one connection writing them in turn books, whatever the
batches hold: runs repeated across consecutive batches (the next must see the first's row),
changed lines (written whole on the import's connection), a cost model (every batch whole),
quarantined lines. These imports run outside a test transaction (the writer's connection must
see what the test set up), so the tests are transactional."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from django.db import connection

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger import pipeline
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, ImportRun, Job
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project
from tests.accounting.test_columnar import _FIELDS, HEADER, _clear, _state

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only"),
]


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003"):
        Project.objects.create(code=code, title=f"Project {code}")
    return Cluster.objects.get(name="slurm-testbed")


def _both_ways(cluster, texts: list[str], **kwargs):
    """Import each of ``texts`` in turn one batch after the other, then (on an empty ledger)
    overlapped; return the summaries and the ledger's state each way."""
    results = []
    for overlap in (False, True):
        summaries = [
            jobs_import(
                cluster=cluster, lines=io.StringIO(text), source="t", overlap_batches=overlap,
                **kwargs,
            )[1].as_dict()
            for text in texts
        ]  # fmt: skip
        results.append((summaries, _state()))
        _clear()
        ImportRun.objects.all().delete()
    return results


def _rows(text: str) -> tuple[str, list[list[str]]]:
    lines = text.splitlines(keepends=True)
    return lines[0], [line.rstrip("\n").split("|") for line in lines[1:]]


def test_a_month_overlapped_books_what_one_connection_books(testbed, caplog):
    text = "".join(sacct_lines(lines=3000, seed=21, allocations=True))
    with caplog.at_level(logging.INFO, logger="accounting.ledger.pipeline"):
        serial, overlapped = _both_ways(testbed, [text, text], batch_size=400)
    assert overlapped == serial
    first, again = overlapped[0]
    assert first["charged"] > 2000
    assert again["charged"] == again["updated"] == 0
    assert "written again" not in caplog.text  # no batch fell back


def test_runs_repeated_in_the_next_batch_and_changed_lines_book_the_same(testbed):
    """A job running in one batch and finished in the next (its row must be there when the
    next batch reads), the same line twice across batches, and a second file that changes
    lines booked by the first (those batches are written whole)."""
    header, rows = _rows("".join(sacct_lines(lines=600, seed=22, allocations=True)))
    at = {name: HEADER.index(name) for name in ("State", "End", "ElapsedRaw", "Account")}
    text = [header]
    for number, row in enumerate(rows):
        if number % 7 == 0:
            running = list(row)
            running[at["State"]], running[at["End"]] = "RUNNING", "Unknown"
            text.append("|".join(running) + "\n")
        text.append("|".join(row) + "\n")
        if number % 11 == 0:
            text.append("|".join(row) + "\n")
        if number % 13 == 0:
            unknown = list(row)
            unknown[at["Account"]] = "nobody"
            text.append("|".join(unknown) + "\n")
    changed = [header]
    for row in rows[::3]:
        row = list(row)
        row[at["ElapsedRaw"]] = str(int(row[at["ElapsedRaw"]]) + 60)
        changed.append("|".join(row) + "\n")
    serial, overlapped = _both_ways(testbed, ["".join(text), "".join(changed)], batch_size=50)
    assert overlapped == serial
    assert overlapped[0][1]["quarantined"] > 0
    assert overlapped[0][1]["updated"] > len(rows[::3]) // 2  # the lines of known accounts


def test_a_cluster_with_a_cost_model_writes_every_batch_whole(testbed, monkeypatch):
    from accounting.costs.services import cost_model_version_create

    cost = ROOT / "examples" / "costmodels" / "slurm-testbed.cost"
    cost_model_version_create(cluster=testbed, name="testbed", text=cost.read_text())
    prepared: list[int] = []
    real = pipeline._batch_prepare_only

    def counting(batch, **kwargs):
        prepared.append(batch.lines)
        return real(batch, **kwargs)

    monkeypatch.setattr(pipeline, "_batch_prepare_only", counting)
    text = "".join(sacct_lines(lines=500, seed=23, allocations=True))
    serial, overlapped = _both_ways(testbed, [text], batch_size=100)
    assert overlapped == serial
    jobs = overlapped[1][0]
    assert any(row[_FIELDS.index("cost")] is not None for row in jobs)
    # The first batch learns of the model when it is read; none is prepared after it.
    assert len(prepared) <= 1


def test_an_import_that_fails_midway_stops_its_writer_and_fails_the_run(testbed):
    header, rows = _rows("".join(sacct_lines(lines=300, seed=24, allocations=True)))

    def lines():
        yield header
        for number, row in enumerate(rows):
            if number == 250:
                raise RuntimeError("the source broke")
            yield "|".join(row) + "\n"

    with pytest.raises(RuntimeError):
        jobs_import(cluster=testbed, lines=lines(), source="t", batch_size=50, overlap_batches=True)
    run = ImportRun.objects.get()
    assert run.status == ImportRun.Status.FAILED
    # Every full batch read before the failure is committed whole, with its counters (the
    # batch in reading when the source broke is not): its jobs and quarantined lines.
    assert run.lines == 200
    assert run.charged == Job.objects.count()
    assert run.charged + run.quarantined == 200

"""A text file imported by several processes at once (``import_sacct --workers N``) books what
one process books, line numbers included, and survives a process killed mid-import."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.sources import _file_ranges
from accounting.models import Cluster, ImportRun, Job, QuarantinedRecord, UsageDaily
from benchmarks.sacct_generator import write_sacct_file
from projects.models import Project
from tests.conftest import needs_real_services

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def testbed() -> Cluster:
    cluster_apply(definition=cluster_definition_load(SPEC))
    # pawsey0004 is left out: its jobs are quarantined, so line numbers are checked too.
    for code in ("pawsey0001", "pawsey0002", "pawsey0003"):
        Project.objects.get_or_create(code=code)
    return Cluster.objects.get(name="slurm-testbed")


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    return write_sacct_file(tmp_path / "sacct.psv", lines=12_000, seed=5, allocations=True)


def _import(path: Path, *options: str) -> dict[str, Any]:
    out = StringIO()
    call_command(
        "import_sacct", str(path), "--cluster", "slurm-testbed", "--json", *options, stdout=out
    )
    return json.loads(out.getvalue())


def _ledger() -> tuple[list[Any], list[Any], list[Any]]:
    jobs = sorted(
        Job.objects.values_list(
            "job_id_raw", "run", "charge_state", "service_units", "energy_wh", "line_number"
        )
    )
    daily = sorted(
        UsageDaily.objects.values_list(
            "project_id", "partition_id", "username", "day", "service_units", "jobs"
        )
    )
    quarantined = sorted(QuarantinedRecord.objects.values_list("line_number", "reason"))
    return jobs, daily, quarantined


def _forget() -> None:
    Job.objects.all().delete()
    UsageDaily.objects.all().delete()
    QuarantinedRecord.objects.all().delete()


def test_ranges_cover_every_data_line_once_with_their_line_numbers(dump: Path) -> None:
    header, ranges = _file_ranges(dump, 3)

    lines = dump.read_bytes().splitlines(keepends=True)
    assert header == lines[0].decode().rstrip("\n")
    covered = []
    with dump.open("rb") as stream:
        for begin, end, first_line in ranges:
            stream.seek(begin)
            chunk = stream.read(end - begin).splitlines(keepends=True)
            covered += list(enumerate(chunk, start=first_line))
    assert covered == list(enumerate(lines, start=1))[1:]


def test_a_range_never_starts_with_a_step_so_a_job_keeps_its_steps_usage(tmp_path: Path) -> None:
    mixed = write_sacct_file(tmp_path / "mixed.psv", lines=3_000, seed=5, usage=True)

    _, ranges = _file_ranges(mixed, 7)

    assert len(ranges) == 7
    with mixed.open("rb") as stream:
        for begin, _, _ in ranges:
            stream.seek(begin)
            assert b"." not in stream.readline().split(b"|")[1]


def test_two_processes_book_what_one_books(testbed: Cluster, dump: Path) -> None:
    needs_real_services("an import by two processes")
    single = _import(dump)
    expected = _ledger()
    assert single["quarantined"] > 0
    _forget()

    parallel = _import(dump, "--workers", "2")

    assert parallel == single
    assert _ledger() == expected
    assert ImportRun.objects.filter(status=ImportRun.Status.SUCCEEDED).count() == 2


def test_a_process_killed_mid_import_fails_the_run_and_a_rerun_completes_it(
    testbed: Cluster, dump: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_real_services("an import by two processes")
    _import(dump)
    expected = _ledger()
    _forget()
    # Each (spawned) process kills itself (SIGKILL) right after its first batch commits, with
    # batches small enough for each of the two halves of the file to hold several.
    batch = 2000
    assert 2 * batch < len(expected[0]) // 2
    monkeypatch.setenv("PORTAL_IMPORT_BATCH_LINES", str(batch))
    monkeypatch.setenv("PORTAL_IMPORT_FAULT_AFTER_BATCH", "1")

    with pytest.raises(CommandError, match="2 of 2 import processes failed"):
        _import(dump, "--workers", "2")

    run = ImportRun.objects.order_by("-pk").first()
    assert run is not None
    assert run.status == ImportRun.Status.FAILED
    assert run.lines == 2 * batch
    assert 0 < Job.objects.count() < len(expected[0])
    monkeypatch.delenv("PORTAL_IMPORT_FAULT_AFTER_BATCH")

    _import(dump, "--workers", "2")

    assert _ledger() == expected


def test_workers_read_text_only(testbed: Cluster) -> None:
    with pytest.raises(CommandError, match="import JSON with one"):
        _import(ROOT / "examples" / "sacct" / "sacct.json", "--workers", "2")

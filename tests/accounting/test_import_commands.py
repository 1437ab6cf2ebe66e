"""The import and export commands: their output is a contract other tools read."""

from __future__ import annotations

import csv
import io
import json
import sys
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.models import Job
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"
KEYS = [
    "lines", "blank", "other_clusters", "steps_skipped", "imported", "updated", "charged",
    "pending", "quarantined",
]  # fmt: skip

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _testbed():
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003"):
        Project.objects.create(code=code)


def _import_json(*args):
    out = StringIO()
    call_command("import_sacct", *args, "--cluster", "slurm-testbed", "--json", stdout=out)
    return json.loads(out.getvalue())


def test_json_summary_has_exactly_the_contract_keys_and_they_add_up():
    summary = _import_json(str(SAMPLE / "sacct_all.psv"))
    assert list(summary) == KEYS
    assert sum(summary[key] for key in KEYS[1:]) == summary["lines"] == 727
    assert summary["quarantined"] > 0  # pawsey0004 is not a project here: kept, not fatal


def test_stdin_is_read_with_a_dash(monkeypatch):
    data = (SAMPLE / "sacct_allocations.psv").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert _import_json("-")["lines"] == 225


def test_text_summary_lists_every_bucket():
    out = StringIO()
    call_command(
        "import_sacct",
        str(SAMPLE / "sacct_allocations.psv"),
        "--cluster",
        "slurm-testbed",
        stdout=out,
    )
    text = out.getvalue()
    assert "lines read: 225" in text
    for key in KEYS[1:]:
        assert f"{key.replace('_', ' ')}:" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.psv", "--cluster", "slurm-testbed"], "cannot be read"),
        ([str(SAMPLE / "sacct_all.psv"), "--cluster", "nowhere"], "unknown cluster 'nowhere'"),
        (
            [str(SAMPLE / "sacctmgr_assoc.psv"), "--cluster", "slurm-testbed"],
            "lacks required columns",
        ),
        (["--cluster", "slurm-testbed"], "give a FILE"),
    ],
)
def test_fatal_errors_exit_non_zero_with_a_clear_message(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("import_sacct", *args, stdout=StringIO())


def test_create_projects_flag_creates_the_missing_account():
    summary = _import_json(str(SAMPLE / "sacct_allocations.psv"), "--create-projects")
    assert summary["quarantined"] == 0
    assert Project.objects.filter(code="pawsey0004").exists()


def test_run_sacct_runs_the_configured_command_with_the_window(tmp_path):
    fake = tmp_path / "sacct"
    log = tmp_path / "args"
    dump = SAMPLE / "sacct_allocations.psv"
    fake.write_text(f'#!/bin/sh\necho "$@" > {log}\necho "TZ=$TZ" >> {log}\ncat {dump}\n')
    fake.chmod(0o755)
    from accounting.models import Cluster

    Cluster.objects.filter(name="slurm-testbed").update(sacct_command=str(fake))
    summary = _import_json(
        "--run-sacct", "--since", "2026-11-22T00:00:00Z", "--until", "2026-11-23T00:00:00Z"
    )
    assert summary["lines"] == 225
    called = log.read_text()
    assert "--allusers --parsable2 --duplicates" in called
    assert "TotalCPU,MaxRSS,TRESUsageInTot,TRESUsageInMax,TRESUsageInAve" in called
    assert "--starttime=2026-11-22T00:00:00 --endtime=2026-11-23T00:00:00" in called
    assert "TZ=UTC" in called


def test_a_failing_sacct_is_a_fatal_error(tmp_path):
    fake = tmp_path / "sacct"
    fake.write_text("#!/bin/sh\necho 'sacct: error: slurmdbd down' >&2\nexit 1\n")
    fake.chmod(0o755)
    from accounting.models import Cluster

    Cluster.objects.filter(name="slurm-testbed").update(sacct_command=str(fake))
    with pytest.raises(CommandError, match="slurmdbd down"):
        _import_json("--run-sacct", "--since", "2026-11-22T00:00:00Z")


def test_export_charges_writes_the_documented_csv(tmp_path):
    _import_json(str(SAMPLE / "sacct_allocations.psv"), "--create-projects")
    out = StringIO()
    call_command(
        "export_charges", "--cluster", "slurm-testbed", "--project", "pawsey0001", stdout=out
    )
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert out.getvalue().splitlines()[0] == (
        "job_id_raw,job_id,project,user,partition,state,start,end,elapsed_seconds,"
        "service_units,dominant_resource,energy_wh"
    )
    expected = Job.objects.filter(project__code="pawsey0001").exclude(charge_state="pending")
    assert len(rows) == expected.count()
    assert {row["project"] for row in rows} == {"pawsey0001"}
    assert sum(Decimal(row["service_units"]) for row in rows) == sum(
        j.service_units for j in expected
    )
    started = [row for row in rows if row["start"]]
    assert all(row["start"].endswith("Z") and "T" in row["start"] for row in started)


def test_export_charges_filters_by_end_time():
    _import_json(str(SAMPLE / "sacct_allocations.psv"), "--create-projects")
    out = StringIO()
    call_command(
        "export_charges", "--cluster", "slurm-testbed", "--start", "2026-11-22T02:03:00Z",
        "--end", "2026-11-22T02:04:00Z", stdout=out,
    )  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert rows
    assert all("2026-11-22T02:03:00Z" <= row["end"] < "2026-11-22T02:04:00Z" for row in rows)


@pytest.mark.parametrize(
    "tail",
    ["\n", "\r\n", "\n\n", "nid001|trunc\n", "\x00\x01\x02\n"],
    ids=["blank", "crlf-blank", "two-blank", "truncated", "binary"],
)
def test_a_short_line_after_the_data_never_crashes_the_import(tmp_path, tail):
    """Real dumps end with a blank line; a line shorter than the JobIDRaw column raised
    IndexError in the parser and failed the whole import (exit 1, nothing imported). Now it is
    counted as blank (and skipped) or one quarantined line with its reason, and every other line
    is imported."""
    sample = SAMPLE / "sacct_allocations.psv"
    data = sample.read_text()
    path = tmp_path / "with-tail.psv"
    path.write_text(data + tail, newline="")
    baseline = _import_json(str(sample))  # pawsey0004's lines are quarantined in both
    Job.objects.all().delete()

    summary = _import_json(str(path))

    extra = len(tail.splitlines())
    bucket = "blank" if not tail.strip() else "quarantined"
    assert summary["lines"] == baseline["lines"] + extra
    assert summary[bucket] == baseline[bucket] + extra
    assert sum(summary[key] for key in KEYS if key != "lines") == summary["lines"]
    assert Job.objects.count() > 0

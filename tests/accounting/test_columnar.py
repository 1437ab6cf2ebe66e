"""The columnar fast path books exactly what the per-line path books: every column of every
ledger row (the line's fingerprint included), every roll-up and every bucket, on the real
sample files, on generated files salted with awkward values (hypothesis), in a zone with DST,
and with a repeated job id resolved in memory (docs/importing.md, "Columnar pricing")."""

from __future__ import annotations

import io
import re
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger import columnar
from accounting.ledger.pipeline import BUCKETS, jobs_import
from accounting.ledger.sacct import line_item, parse_sacct
from accounting.ledger_storage import KEY_COLUMNS, KEY_TABLE, is_partitioned
from accounting.models import (
    Cluster,
    EfficiencyBucket,
    EfficiencyDaily,
    EfficiencyMonthly,
    EnergyHourly,
    Job,
    QuarantinedRecord,
    UsageDaily,
    UsageShapeDaily,
    UsageShapeMonthly,
    UtilisationHourly,
)
from benchmarks.sacct_generator import sacct_lines
from kit import pg_copy
from kit.pg_copy import copy_text as pg_copy_text
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ACCOUNTS = ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004")
REAL_FILES = [
    *sorted((ROOT / "examples" / "sacct").glob("sacct_*.psv")),
    # The shared real output beside the checkout (the same Slurm 22.05 cluster), where present.
    *sorted((ROOT.parent / "shared" / "data" / "sacct").glob("sacct_*.psv")),
    ROOT / "tests" / "data" / "efficiency" / "sacct_usage.psv",
]
# Columns that say when and by which run a row was written, not what it holds.
_WHEN = {"id", "import_run", "updated_at", "charged_at"}
_FIELDS = [f.attname for f in Job._meta.concrete_fields if f.name not in _WHEN]

pytestmark = pytest.mark.django_db


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ACCOUNTS[:3]:  # pawsey0004 stays unknown: its lines are quarantined
        Project.objects.create(code=code, title=f"Project {code}")
    return Cluster.objects.get(name="slurm-testbed")


def _state():
    jobs = sorted(Job.objects.values_list(*_FIELDS), key=repr)
    daily = sorted(
        UsageDaily.objects.values_list(
            "project_id", "partition_id", "username", "day", "service_units", "core_hours",
            "gpu_hours", "energy_wh", "jobs",
        ),
        key=repr,
    )  # fmt: skip
    shapes = sorted(UsageShapeDaily.objects.values_list(), key=lambda row: repr(row[1:]))
    hourly = sorted(
        UtilisationHourly.objects.values_list(
            "partition_id", "hour_start", "core_seconds", "gpu_seconds"
        )
    )
    months = sorted(UsageShapeMonthly.objects.values_list(), key=lambda row: repr(row[1:]))
    energy = sorted(
        EnergyHourly.objects.values_list("project_id", "day", "partition_id", "hour_start",
                                         "energy_wh")
    )  # fmt: skip
    quarantined = sorted(
        (raw, re.sub(r"this import \([^)]*\)", "this import", reason), field_name)
        for raw, reason, field_name in QuarantinedRecord.objects.values_list(
            "raw", "reason", "field"
        )
    )
    efficiency = [
        sorted((row[1:] for row in model.objects.values_list()), key=repr)
        for model in (EfficiencyDaily, EfficiencyMonthly, EfficiencyBucket)
    ]
    return (
        jobs, daily, [row[1:] for row in shapes], quarantined, hourly,
        [row[1:] for row in months], _keys(), energy, efficiency,
    )  # fmt: skip


def _keys():
    """The key table's rows (the partitioned ledger's), without the job's id."""
    if connection.vendor != "postgresql" or not is_partitioned():
        return []
    with connection.cursor() as cursor:
        columns = ", ".join(connection.ops.quote_name(name) for name in KEY_COLUMNS)
        cursor.execute(f"SELECT {columns} FROM {KEY_TABLE}")  # noqa: S608
        return sorted(cursor.fetchall(), key=repr)


def _clear():
    Job.objects.all().delete()
    UsageDaily.objects.all().delete()
    UsageShapeDaily.objects.all().delete()
    UsageShapeMonthly.objects.all().delete()
    UtilisationHourly.objects.all().delete()
    EnergyHourly.objects.all().delete()
    QuarantinedRecord.objects.all().delete()
    for model in (EfficiencyDaily, EfficiencyMonthly, EfficiencyBucket):
        model.objects.all().delete()


def _both_ways(cluster, text: str, **kwargs):
    """Import ``text`` per line, then (on an empty ledger) by columns; return both."""
    _, by_line = jobs_import(
        cluster=cluster, lines=io.StringIO(text), source="t", columnar_pricing=False, **kwargs
    )
    per_line = _state()
    _clear()
    _, by_columns = jobs_import(cluster=cluster, lines=io.StringIO(text), source="t", **kwargs)
    return (by_line, per_line), (by_columns, _state())


def _both_ways_in(cluster, zone: str, text: str):
    """``_both_ways`` with the cluster's time zone set to ``zone``, on an empty ledger."""
    cluster.timezone = zone
    cluster.save(update_fields=["timezone"])
    _clear()
    return _both_ways(cluster, text)


def _salt(draw, header: list[str], rows: list[list[str]], awkward: dict[str, list[str]]) -> None:
    """Put up to 25 awkward values, drawn from ``awkward``'s columns present in ``header``, in
    ``rows``."""
    present = sorted(name for name in awkward if name in header)
    for _ in range(draw(st.integers(0, 25))):
        row = draw(st.sampled_from(rows))
        column = draw(st.sampled_from(present))
        row[header.index(column)] = draw(st.sampled_from(awkward[column]))


def _fast_lines(cluster, text: str) -> int:
    reader = lambda parser, lines, at: columnar.read_lines(parser, lines, at, step_item=line_item)  # noqa: E731
    items = parse_sacct(
        io.StringIO(text), tz=cluster.zoneinfo, cluster=cluster.slurm_name, steps=False,
        reader=reader,
    )  # fmt: skip
    return sum(isinstance(item, columnar.FastLine) for item in items)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_files_book_the_same_rows_by_columns_as_line_by_line(testbed, path):
    text = path.read_text()
    per_line, by_columns = _both_ways(testbed, text)
    assert by_columns == per_line
    assert _fast_lines(testbed, text) > 0  # the fast path was taken


def test_a_generated_month_books_the_same_rows_and_most_lines_take_the_fast_path(testbed):
    Project.objects.create(code="pawsey0004", title="p4")
    text = "".join(sacct_lines(lines=2000, seed=7, allocations=True))
    per_line, by_columns = _both_ways(testbed, text)
    assert by_columns == per_line
    assert per_line[0].charged > 1500
    assert _fast_lines(testbed, text) > 0.9 * 2000


def _job_lines(text: str) -> int:
    return sum("." not in line.split("|", 1)[0] for line in text.splitlines()[1:])


def test_a_scheduled_dump_with_steps_and_usage_books_the_same_rows_by_columns(testbed):
    """What the scheduled import reads (``SACCT_FORMAT``: jobs, their steps and the usage
    columns): the jobs take the fast path, with what they used, their right-sized SU and the
    efficiency roll-ups exactly as the per-line code books them."""
    Project.objects.create(code="pawsey0004", title="p4")
    text = "".join(sacct_lines(lines=3000, seed=11, usage=True))
    per_line, by_columns = _both_ways(testbed, text)
    assert by_columns == per_line
    summary = by_columns[0]
    buckets = sum(getattr(summary, name) for name in BUCKETS)
    assert summary.lines == len(text.splitlines()) - 1 == buckets  # every line in one bucket
    assert summary.steps_skipped > summary.charged  # the steps were read, none was booked
    jobs = Job.objects.count()
    assert jobs > 600
    assert Job.objects.exclude(right_sized_service_units=None).count() > 0.5 * jobs
    assert EfficiencyDaily.objects.exists()
    assert EfficiencyBucket.objects.exists()
    assert _fast_lines(testbed, text) > 0.9 * _job_lines(text)


# What a job or step line may say it used: each must leave the fast path or give the same row.
AWKWARD_USAGE = {
    "TotalCPU": ["", "x", "1-00:00:00", "99999999999999:00:00", "00:01.500", "12:34", "-1"],
    "MaxRSS": ["", "x", "1024K", "99999999999999999999T", "12M", "5G", "0"],
    "TRESUsageInTot": ["", "mem=1G", "mem=x", "cpu=00:01:00,mem=2048K", "mem=9999999999999999T"],
    "TRESUsageInMax": ["", "gres/gpumem=1G", "gres/gpumem=x", "gres/gpumem=99999999999999T"],
    "TRESUsageInAve": ["", "gres/gpuutil=50", "gres/gpuutil=x", "gres/gpuutil=99999"],
    "NTasks": ["", "1", "8", "x", "0", "99999999999999999999"],
}


@st.composite
def salted_usage_files(draw):
    lines = list(sacct_lines(lines=60, seed=draw(st.integers(0, 10**6)), usage=True))
    header = lines[0].rstrip("\n").split("|")
    rows = [line.rstrip("\n").split("|") for line in lines[1:]]
    if draw(st.booleans()):  # with NTasks, as the portal's sacct command does not ask
        header.append("NTasks")
        for row in rows:
            row.append(draw(st.sampled_from(["", "1", "4"])))
    _salt(draw, header, rows, AWKWARD_USAGE)
    return "|".join(header) + "\n" + "".join("|".join(row) + "\n" for row in rows)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=salted_usage_files(), zone=st.sampled_from(["UTC", "Australia/Perth"]))
def test_salted_usage_books_the_same_rows_by_columns_as_line_by_line(testbed, text, zone):
    per_line, by_columns = _both_ways_in(testbed, zone, text)
    assert by_columns == per_line


# Values that the per-line code reads in its own way: each must leave the fast path or give
# the same row.
AWKWARD = {
    "JobID": ["1_[2-5]", "7+1", "x", "12.batch", "5_3"],
    "State": ["RUNNING", "REQUEUED", "CANCELLED by 0", "CANCELLED by x", "PENDING", "BOGUS"],
    "Submit": ["Unknown", "2026-13-01T00:00:00", "2026-03-29T02:30:00", "0001-01-01T00:00:00"],
    "Start": [
        "Unknown",
        "None",
        "2026-10-25T02:30:00",
        "2026-03-29T02:30:00",
        "2026-02-30T01:00:00",
        "2026-01-02T00:00:00+00:00",  # UTC with its offset: how sacct --json's times convert
        "2026-01-02T00:00:00+02:00",
    ],
    "End": ["Unknown", "2999-01-01T00:00:00", "2026-10-25T02:30:00", "2025-01-01T00:00:00"],
    "ElapsedRaw": ["", "x", "99999999999999999999", "0", "31708800"],
    "NNodes": ["0", "2K", "", "x", "3"],
    "NCPUS": ["", "x", "0", "100000"],
    "NodeList": ["None assigned", "nid[1001-1002]", "nid[", "(null)"],
    "AllocTRES": ["", "cpu=999,mem=1M,node=1", "cpu=1,mem=1G,node=1", "cpu=x", "billing=1e400"],
    "ReqMem": ["", "3000Mc", "1000Mn", "2147486648Mn", "x"],
    "TimelimitRaw": ["", "UNLIMITED", "Partition_Limit", "x", "99999999999999999999"],
    "ExitCode": ["", "0:0", "x", "1:2:3"],
    "QOS": ["", "q" * 65],
    "JobName": ["", "n" * 257, "x|y", "back\\slash", "a\ttab", "cr\rhere"],
    "ConsumedEnergyRaw": ["", "x", "123", "99999999999999999999"],
    "Partition": ["", "nope", "gpu"],
    "Account": ["", "pawsey0004", "nobody"],
    "User": ["", "u" * 65],
}
HEADER = next(sacct_lines(lines=0, allocations=True)).rstrip("\n").split("|")


@st.composite
def salted_files(draw):
    lines = list(sacct_lines(lines=40, seed=draw(st.integers(0, 10**6)), allocations=True))
    header, rows = lines[0], [line.rstrip("\n").split("|") for line in lines[1:]]
    _salt(draw, HEADER, rows, AWKWARD)
    if draw(st.booleans()):  # a repeated job id, finished or not
        rows.append(list(draw(st.sampled_from(rows))))
        rows[-1][HEADER.index("State")] = draw(st.sampled_from(["COMPLETED", "RUNNING"]))
    extra = draw(st.sampled_from(["", "\n", "junk|line\n", "|" * 25 + "\n"]))
    return header + "".join("|".join(row) + "\n" for row in rows) + extra


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=salted_files(),
    zone=st.sampled_from(
        ["UTC", "Europe/Berlin", "Australia/Perth", "Asia/Kolkata", "Australia/Lord_Howe"]
    ),
)
def test_salted_files_book_the_same_rows_by_columns_as_line_by_line(testbed, text, zone):
    per_line, by_columns = _both_ways_in(testbed, zone, text)
    assert by_columns == per_line


def test_a_dst_gap_and_fold_leave_the_fast_path_or_agree(testbed):
    testbed.timezone = "Europe/Berlin"
    testbed.save(update_fields=["timezone"])
    assert testbed.zoneinfo == ZoneInfo("Europe/Berlin")
    lines = list(sacct_lines(lines=3, seed=1, allocations=True))
    rows = [line.split("|") for line in lines[1:]]
    at = {name: HEADER.index(name) for name in ("Submit", "Start", "End")}
    rows[0][at["Start"]], rows[0][at["End"]] = "2026-03-29T02:30:00", "2026-03-29T03:30:00"
    rows[1][at["Start"]], rows[1][at["End"]] = "2026-10-25T02:30:00", "2026-10-25T02:45:00"
    for row in rows[:2]:
        row[at["Submit"]] = "2026-03-01T00:00:00"
    text = lines[0] + "".join("|".join(row) for row in rows)
    per_line, by_columns = _both_ways(testbed, text)
    assert by_columns == per_line


def test_one_job_id_repeated_resolves_in_memory_and_the_last_line_wins(testbed):
    lines = list(sacct_lines(lines=1, seed=3, allocations=True))
    header, line = lines[0], lines[1].rstrip("\n").split("|")
    elapsed_at = HEADER.index("ElapsedRaw")
    copies = []
    for seconds in range(1, 2001):
        line[elapsed_at] = str(seconds)
        copies.append("|".join(line) + "\n")
    run, summary = jobs_import(cluster=testbed, lines=[header, *copies], source="t")
    # One batch: the 1,999 superseded lines count as imported, the last one is booked.
    assert (summary.lines, summary.charged, summary.imported) == (2000, 1, 1999)
    job = Job.objects.get()
    assert (job.elapsed_seconds, job.line_number) == (2000, 2001)
    assert UsageDaily.objects.get().jobs == 1
    assert run.lines == 2000


def test_an_older_running_line_after_the_finished_one_does_not_unbook_it(testbed):
    lines = list(sacct_lines(lines=1, seed=3, allocations=True))
    header, finished = lines[0], lines[1]
    running = finished.split("|")
    running[HEADER.index("State")], running[HEADER.index("End")] = "RUNNING", "Unknown"
    _, summary = jobs_import(
        cluster=testbed, lines=[header, finished, "|".join(running)], source="t"
    )
    assert (summary.charged, summary.imported, summary.pending) == (1, 1, 0)
    assert Job.objects.get().service_units > Decimal(0)


def test_every_new_row_is_copied_as_text_built_by_columns(testbed, monkeypatch):
    """The ledger's and the key table's COPY text is built a column at a time for the rows of
    both paths (kit.pg_copy); none falls back to psycopg's row-by-row formatting."""
    if connection.vendor != "postgresql":
        pytest.skip("COPY is PostgreSQL's")
    fallbacks: list[int] = []

    def copy_text(columns):
        payload = pg_copy_text(columns)
        if payload is None:
            fallbacks.append(len(columns))
        return payload

    monkeypatch.setattr(pg_copy, "copy_text", copy_text)
    text = "".join(sacct_lines(lines=500, seed=11, allocations=True))
    for path in REAL_FILES:
        _both_ways(testbed, path.read_text())
        _clear()
    _both_ways(testbed, text)
    assert Job.objects.exists()
    assert fallbacks == []

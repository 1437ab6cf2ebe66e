"""Crafted and odd lines through the importer's real entry points on PostgreSQL (COPY path):
no line may crash an import; each lands in one bucket, and a quarantined one says why."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.models import CharField

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.limits import COMPUTED_TEXT, INPUT_LIMITS
from accounting.ledger.pipeline import BUCKETS, jobs_import
from accounting.ledger.sacct_json import parse_sacct_json
from accounting.ledger.sources import import_file
from accounting.models import Cluster, ImportRun, Job, QuarantinedRecord
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"

pytestmark = pytest.mark.django_db

HEADER = (
    "JobID|JobIDRaw|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|NNodes|NodeList|"
    "AllocTRES|QOS|ExitCode"
)


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    Project.objects.create(code="pawsey0001", title="Project pawsey0001")
    return Cluster.objects.get(name="slurm-testbed")


def _line(job, *, raw=None, user="alice", state="COMPLETED", start="2026-03-01T10:00:00",
          end="2026-03-01T11:00:00", qos="normal", exit_code="0:0", partition="work"):  # fmt: skip
    return (
        f"{job}|{raw or job}|{user}|pawsey0001|{partition}|{state}|{start}|{start}|{end}|3600|1|"
        f"nid1001|cpu=128,mem=245000M,node=1|{qos}|{exit_code}"
    )


def _summed(summary):
    return sum(getattr(summary, name) for name in BUCKETS)


def _via_jobs_import(cluster, data: bytes):
    text = data.decode("utf-8", errors="replace")
    return jobs_import(cluster=cluster, lines=text.splitlines(keepends=True), source="t")[1]


def _via_command(cluster, data: bytes, tmp_path):
    path = tmp_path / "crafted.psv"
    path.write_bytes(data)
    out = StringIO()
    call_command("import_sacct", str(path), "--cluster", cluster.name, "--json", stdout=out)
    return out.getvalue()


def _via_file_import(cluster, data: bytes, tmp_path):
    path = tmp_path / "crafted-upload.psv"
    path.write_bytes(data)
    run = ImportRun.objects.create(cluster=cluster, source="upload")
    run, summary = import_file(run=run, path=path)
    assert summary is not None, run.error
    return summary


# Each crafted line, and the column its quarantine names (None: imported, with a warning).
CRAFTED = {
    "long JobIDRaw": (_line("9001", raw="9" * 70), "JobIDRaw"),
    "long JobID": (_line("9" * 70, raw="9002"), "JobID"),
    "long user": (_line("9003", user="u" * 70), "User"),
    "long state": (_line("9004", state="COMPLETED" + " by " + "1" * 60), "State"),
    "long array task id": (_line("9005_" + "7" * 70, raw="9005"), "JobID"),
    "long partition": (_line("9006", partition="p" * 70), "Partition"),
    "long qos": (_line("9007", qos="q" * 70), None),
    "long exit code": (_line("9008", exit_code="0:" + "1" * 30), None),
    "End in 9999": (_line("9009", end="9999-12-31T12:00:00"), "End"),
    "Start and End in 9999": (
        _line("9010", start="9999-12-31T10:00:00", end="9999-12-31T23:59:59"),
        "Submit",
    ),
    "End in year 1": (
        _line("9011", start="0001-01-01T00:00:00", end="0001-01-01T01:00:00"),
        "Submit",
    ),
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
@pytest.mark.parametrize("entry", ["jobs_import", "command", "file_import"])
def test_a_crafted_line_is_quarantined_never_a_crash(testbed, tmp_path, name, entry):
    line, column = CRAFTED[name]
    data = "\r\n".join([HEADER, _line("9000"), line, ""]).encode()
    if entry == "jobs_import":
        summary = _via_jobs_import(testbed, data)
    elif entry == "command":
        summary = json.loads(_via_command(testbed, data, tmp_path))
    else:
        summary = _via_file_import(testbed, data, tmp_path).as_dict()
    if not isinstance(summary, dict):
        summary = summary.as_dict()
    assert sum(summary[name] for name in BUCKETS) == summary["lines"] == 2
    assert Job.objects.filter(job_id_raw="9000").exists()
    quarantined = list(QuarantinedRecord.objects.values_list("field", "reason"))
    if column is None:
        assert quarantined == []
        assert Job.objects.get(line_number=3).warnings
    else:
        assert [field for field, _ in quarantined] == [column], quarantined
        assert summary["quarantined"] == 1


@pytest.mark.parametrize("entry", ["jobs_import", "command", "file_import"])
def test_a_nul_byte_in_a_crlf_file_never_crashes_the_import(testbed, tmp_path, entry):
    data = "\r\n".join(
        [HEADER, _line("9000"), _line("9010", user="al\x00ice"), _line("9011", qos="no\x00rmal"),
         _line("9012", exit_code="0:\x000"), ""]
    ).encode()  # fmt: skip
    if entry == "jobs_import":
        summary = _via_jobs_import(testbed, data)
    elif entry == "command":
        _via_command(testbed, data, tmp_path)
        summary = None
    else:
        summary = _via_file_import(testbed, data, tmp_path)
    if summary is not None:
        assert _summed(summary) == summary.lines == 4
    assert Job.objects.filter(job_id_raw="9000").exists()
    # A column the charge needs: quarantined naming it; an optional one: left out, noted.
    assert list(QuarantinedRecord.objects.values_list("field", flat=True)) == ["User"]
    assert "\x00" not in QuarantinedRecord.objects.get().raw  # kept, shown as U+2400
    qos = Job.objects.get(job_id_raw="9011")
    assert (qos.qos, qos.warnings) == ("", ["QOS held a NUL byte: left out (optional column)"])
    assert Job.objects.get(job_id_raw="9012").exit_code == ""


def test_every_text_column_of_the_ledger_is_checked_before_a_row_is_written():
    checked = {limit.attname for limit in INPUT_LIMITS} | set(COMPUTED_TEXT)
    text_columns = {f.attname for f in Job._meta.concrete_fields if isinstance(f, CharField)}
    assert text_columns <= checked, text_columns - checked


def test_a_runaway_job_is_quarantined_with_what_the_operator_should_do(testbed):
    line = (
        "9020|9020|alice|pawsey0001|work|RUNNING|2022-01-10T10:00:00|2022-01-10T10:00:00|"
        "Unknown|99999999|1|nid1001|cpu=128,mem=245000M,node=1|normal|0:0"
    )
    # ElapsedRaw as sacct prints it for a job it still thinks is running: up to now.
    import_started = datetime.now(UTC)
    elapsed = int((import_started - datetime(2022, 1, 10, 10, tzinfo=UTC)).total_seconds())
    line = line.replace("|99999999|", f"|{elapsed}|")
    summary = jobs_import(cluster=testbed, lines=[HEADER, line], source="t")[1]
    assert summary.quarantined == 1
    reason = QuarantinedRecord.objects.get().reason
    assert "runaway job" in reason
    assert "sacctmgr show runawayjobs" in reason


# --- sacct --json: Slurm's NO_VAL and dbv0.0.37's start ------------------------------------

VERSIONS = ROOT / "tests" / "data" / "sacct_versions"
REAL_24_11 = VERSIONS / "slurmweb_slurmrestd-24.11.5_v0.0.42_job-completed.json"


def _real_24_11_job(**changes):
    """The real 24.11.5 job of tests/data/sacct_versions, moved onto the testbed's cluster,
    account and partition."""
    document = json.loads(REAL_24_11.read_text())
    job = document["jobs"][0]
    job.update(cluster="setonix", account="pawsey0001", partition="work", user="alice")
    job.update(changes)
    return document, job


def test_a_24_11_job_that_never_started_is_recorded_not_quarantined(testbed):
    # Made by hand from the real 24.11.5 dump: a job cancelled while it was pending, as 24.11
    # writes it (no file of that form was at hand): "start" is NO_VAL, nothing allocated.
    document, job = _real_24_11_job(allocation_nodes=0, nodes="None assigned", steps=[])
    job["time"].update(start=4294967294, elapsed=0, end=1762788800)
    job["state"]["current"] = ["CANCELLED"]
    job["tres"]["allocated"] = []
    stream = io.BytesIO(json.dumps(document).encode())
    summary = jobs_import(cluster=testbed, json_stream=stream, source="t")[1]
    assert (summary.quarantined, summary.imported) == (0, 1), QuarantinedRecord.objects.first()
    job = Job.objects.get(job_id_raw="6362")
    assert (job.start, job.service_units) == (None, 0)


@pytest.mark.parametrize("unset", [4294967294, 4294967295, 18446744073709551614, -2])
def test_no_val_and_infinite_read_as_unknown_in_every_json_number(unset):
    document, job = _real_24_11_job()
    job["time"]["submission"] = unset
    job["time"]["limit"] = {"set": True, "infinite": False, "number": unset}
    job["tres"]["allocated"].append({"type": "fs", "name": "disk", "id": 6, "count": unset})
    (record, _step) = parse_sacct_json(io.BytesIO(json.dumps(document).encode()))
    assert (record.submit, record.timelimit_minutes) == (None, None)
    assert "fs/disk" not in record.alloc_tres
    assert record.consumed_energy_joules is None  # the real file's energy count of -2
    assert record.warnings == ()


def test_dbv0_0_37_takes_start_as_end_less_elapsed(testbed):
    # dbv0.0.37 (Slurm 21.08) in the real format (made by hand: no 21.08 dump was at hand):
    # time.start holds the job's eligible time, 50 minutes before it really started.
    document, job = _real_24_11_job(steps=[])
    # Slurm writes "meta" first: the reader knows the version before the jobs.
    document = {
        "meta": {"plugin": {"type": "openapi/dbv0.0.37", "name": "Slurm OpenAPI DB"}},
        "jobs": document["jobs"],
    }
    job["time"].update(eligible=1762785000, start=1762785000, end=1762788837, elapsed=61)
    job["state"]["current"] = "COMPLETED"
    stream = io.BytesIO(json.dumps(document).encode())
    summary = jobs_import(cluster=testbed, json_stream=stream, source="t")[1]
    assert summary.charged == 1
    stored = Job.objects.get(job_id_raw="6362")
    assert stored.start == datetime.fromtimestamp(1762788837 - 61, UTC)
    assert (stored.end - stored.start).total_seconds() == stored.elapsed_seconds == 61


# --- Timelimit without TimelimitRaw ----------------------------------------------------------


@pytest.mark.parametrize(
    ("timelimit", "minutes"),
    [("01:00:00", 60), ("6-23:59:00", 10079), ("30:00", 30), ("UNLIMITED", None),
     ("Partition_Limit", None)],
)  # fmt: skip
def test_a_formatted_timelimit_is_read_when_timelimit_raw_is_absent(testbed, timelimit, minutes):
    # The form sacct prints for --format=...,Timelimit (Slurm's mins2time_str), as in
    # dumps made for XDMoD and by hand; written here in that format.
    header = HEADER + "|Timelimit"
    line = _line("9030", state="RUNNING", end="Unknown") + f"|{timelimit}"
    jobs_import(cluster=testbed, lines=[header, line], source="t")
    job = Job.objects.get(job_id_raw="9030")
    assert (job.timelimit_minutes, job.warnings) == (minutes, [])


def test_timelimit_raw_wins_over_the_formatted_timelimit(testbed):
    header = HEADER + "|TimelimitRaw|Timelimit"
    line = _line("9031") + "|90|01:00:00"
    jobs_import(cluster=testbed, lines=[header, line], source="t")
    assert Job.objects.get(job_id_raw="9031").timelimit_minutes == 90


# --- Memory used without TRESUsageInTot ------------------------------------------------------

USAGE_DUMP = ROOT / "tests" / "data" / "efficiency" / "sacct_usage.psv"


def _usage_dump_without(*dropped: str) -> list[str]:
    """The real 22.05 dump of tests/data/efficiency with columns left out, as an older Slurm
    (TRESUsageInTot came with 18.08) or a shorter --format prints it."""
    rows = [line.rstrip("\n").split("|") for line in USAGE_DUMP.open()]
    kept = [at for at, name in enumerate(rows[0]) if name not in dropped]
    return ["|".join(row[at] for at in kept) for row in rows]


def _mib(kib: int) -> Decimal:
    return (Decimal(kib) / 1024).quantize(Decimal("0.001"))


@pytest.fixture
def usage_testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    Project.objects.create(code="root", title="The testbed's jobs")
    return Cluster.objects.get(name="slurm-testbed")


def test_without_tres_usage_in_tot_memory_is_max_rss_times_the_steps_tasks(usage_testbed):
    # Job 15's step .2 ran 2 tasks: MaxRSS 540280K is one task's peak, TRESUsageInTot's
    # mem=818284K the sum; step .1 (one task) peaked at 1064576K.
    jobs_import(cluster=usage_testbed, lines=_usage_dump_without("TRESUsageInTot"), source="t")
    job = Job.objects.get(job_id_raw="15")
    assert job.memory_peak_mb == _mib(540280 * 2)
    assert any("x the step's tasks (NTasks)" in warning for warning in job.warnings)


def test_without_ntasks_either_the_page_says_it_is_one_tasks_peak(usage_testbed):
    lines = _usage_dump_without("TRESUsageInTot", "NTasks")
    jobs_import(cluster=usage_testbed, lines=lines, source="t")
    job = Job.objects.get(job_id_raw="15")
    assert job.memory_peak_mb == _mib(1064576)
    assert any("MaxRSS) alone" in warning for warning in job.warnings)


def test_with_tres_usage_in_tot_memory_is_the_sum_over_tasks_and_no_note(usage_testbed):
    jobs_import(cluster=usage_testbed, lines=_usage_dump_without(), source="t")
    job = Job.objects.get(job_id_raw="15")
    assert job.memory_peak_mb == _mib(1064576)  # step .1; .2 summed to 818284K
    assert not any(warning.startswith("Memory used") for warning in job.warnings)


@pytest.mark.parametrize("value", ["al\u0000ice", "al\ud800ice"])
def test_a_nul_or_lone_surrogate_in_json_is_quarantined_and_kept(testbed, value):
    # JSON escapes (\u0000, \ud800) give what no PostgreSQL text column holds.
    document, _job = _real_24_11_job(user=value)
    text = json.dumps(document)  # ASCII, with the escapes as sacct would write them
    summary = jobs_import(cluster=testbed, json_stream=io.BytesIO(text.encode()), source="t")[1]
    assert summary.quarantined == 1
    assert sum(getattr(summary, name) for name in BUCKETS) == summary.lines
    record = QuarantinedRecord.objects.get()
    assert record.field == "User"
    assert record.reason.startswith("User holds a")
    assert "\x00" not in record.raw


def test_a_nul_in_a_json_job_name_is_left_out_with_a_warning(testbed):
    document, _job = _real_24_11_job(name="wr\u0000ap", steps=[])
    stream = io.BytesIO(json.dumps(document).encode())
    summary = jobs_import(cluster=testbed, json_stream=stream, source="t")[1]
    assert (summary.charged, summary.quarantined) == (1, 0)
    job = Job.objects.get(job_id_raw="6362")
    assert (job.job_name, job.warnings) == (
        "",
        ["JobName held a NUL byte: left out (optional column)"],
    )


def test_the_months_of_year_9999_end_without_an_overflow():
    from datetime import date

    from accounting.ledger_storage import _bound, _month_after_or_none, months_between

    assert months_between(date(9999, 11, 1), date(9999, 12, 31)) == [
        date(9999, 11, 1),
        date(9999, 12, 1),
    ]
    assert _bound(_month_after_or_none(date(9999, 12, 1))) == "10000-01-01 00:00:00+00"

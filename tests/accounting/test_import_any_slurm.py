"""sacct from any Slurm: other versions' text, --noheader dumps, sacct --json, and lines that
must not crash or skew an import (issue "sacct from any Slurm")."""

from __future__ import annotations

import dataclasses
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import BUCKETS, ImportSummary, jobs_import, quarantine_retry
from accounting.ledger.sacct import MAX_LINE_CHARS, SacctLineError, bounded_lines
from accounting.ledger.sacct_json import JSON_HEADER
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    QuarantinedRecord,
    UsageDaily,
    UtilisationHourly,
)
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ACCOUNTS = ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004")

pytestmark = pytest.mark.django_db

HEADER = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|NNodes|"
    "NCPUS|NodeList|AllocTRES|ReqMem|ExitCode|TimelimitRaw"
)
GOOD = {
    "JobID": "9100",
    "JobIDRaw": "9100",
    "JobName": "run",
    "User": "alice",
    "Account": "pawsey0001",
    "Partition": "work",
    "State": "COMPLETED",
    "Submit": "2026-03-01T10:00:00",
    "Start": "2026-03-01T10:00:00",
    "End": "2026-03-01T11:00:00",
    "ElapsedRaw": "3600",
    "NNodes": "1",
    "NCPUS": "64",
    "NodeList": "nid1001",
    "AllocTRES": "billing=64,cpu=64,mem=122500M,node=1",
    "ReqMem": "122500M",
    "ExitCode": "0:0",
    "TimelimitRaw": "120",
}


def line(header: str = HEADER, **values: str) -> str:
    row = {**GOOD, **values}
    return "|".join(row[name] for name in header.split("|"))


@pytest.fixture
def testbed() -> Cluster:
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ACCOUNTS:
        Project.objects.create(code=code, title=f"Project {code}")
    return Cluster.objects.get(name="slurm-testbed")


def _import(cluster: Cluster, lines: list[str], **options: Any) -> ImportSummary:
    return jobs_import(cluster=cluster, lines=lines, source="test", **options)[1]


def _adds_up(summary: ImportSummary) -> bool:
    return sum(getattr(summary, name) for name in BUCKETS) == summary.lines


def _open_reasons() -> dict[int, tuple[str, str]]:
    return {
        record.line_number: (record.field, record.reason)
        for record in QuarantinedRecord.objects.filter(resolved_at__isnull=True)
    }


# --------------------------------------------------------------------------------------
# Old Slurm text


def test_old_req_mem_suffixes_no_longer_quarantine_a_job(testbed: Cluster) -> None:
    lines = [
        HEADER,
        line(JobID="9101", JobIDRaw="9101", ReqMem="31000Mn"),
        line(JobID="9102", JobIDRaw="9102", ReqMem="3000Mc"),
        line(JobID="9103", JobIDRaw="9103", ReqMem="62.50Gn"),
        line(JobID="9104", JobIDRaw="9104", ReqMem="0n"),
    ]

    summary = _import(testbed, lines)

    assert (summary.charged, summary.quarantined) == (4, 0)
    # ReqMem is not what charging reads: every job costs what AllocTRES says.
    assert set(Job.objects.values_list("service_units", flat=True)) == {Decimal(64)}


def test_a_bad_optional_value_is_a_warning_on_the_job_and_never_costs_its_charge(
    testbed: Cluster,
) -> None:
    summary = _import(
        testbed,
        [HEADER, line(ReqMem="lots", ExitCode="oops", TimelimitRaw="1:00:00", JobName="x" * 300)],
    )

    job = Job.objects.get()
    assert (summary.charged, summary.quarantined) == (1, 0)
    assert job.service_units == 64
    assert job.exit_code == ""
    assert job.timelimit_minutes is None
    assert job.job_name == "x" * 256
    assert len(job.warnings) == 4
    assert any(w.startswith("ReqMem") for w in job.warnings)
    assert any("JobName: 300 characters" in w for w in job.warnings)


@pytest.mark.parametrize(
    ("values", "field", "reason_part"),
    [
        ({"User": "u" * 65}, "User", "65 characters long"),
        ({"ElapsedRaw": "99999999999999999999"}, "ElapsedRaw", "out of range"),
        ({"NNodes": "99999999999"}, "NNodes", "out of range"),
        # Within the column, beyond any cluster: refused by the engine, not split in memory.
        ({"NNodes": "2000000000"}, "AllocTRES", "more than any cluster has"),
        ({"End": "2999-01-01T00:00:00"}, "End", "more than a day after this import"),
        ({"Start": "2025-01-01T00:00:00"}, "End", "over a year"),
        ({"AllocTRES": "cpu=64,mem=99999999999999999999M,node=1"}, "AllocTRES", "beyond"),
        ({"JobID": "9" * 70, "JobIDRaw": "9" * 70}, "JobID", "70 characters long"),
    ],
)
def test_a_value_no_column_can_hold_quarantines_the_line_naming_the_field(
    testbed: Cluster, values: dict[str, str], field: str, reason_part: str
) -> None:
    lines = [HEADER, line(**values), line(JobID="9199", JobIDRaw="9199")]

    summary = _import(testbed, lines)

    assert (summary.charged, summary.quarantined) == (1, 1)
    [(got_field, reason)] = _open_reasons().values()
    assert got_field == field
    assert reason_part in reason
    assert Job.objects.get().job_id_raw == "9199"


def test_a_job_ending_in_the_year_2999_adds_no_hourly_rows(testbed: Cluster) -> None:
    # Before: the hourly utilisation rows of 973 years, 9.3 GB, and the process died.
    _import(testbed, [HEADER, line(End="2999-01-01T00:00:00", ElapsedRaw="0")])

    assert not UtilisationHourly.objects.exists()
    assert QuarantinedRecord.objects.count() == 1


def test_a_running_job_whose_elapsed_runs_past_the_import_is_quarantined(testbed: Cluster) -> None:
    start = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    summary = _import(
        testbed,
        [HEADER, line(State="RUNNING", Start=start, End="Unknown", ElapsedRaw=str(10**9))],
        tz=UTC,
    )

    assert summary.quarantined == 1
    assert not UtilisationHourly.objects.exists()


def test_the_same_bad_line_twice_is_two_quarantined_lines_in_one_record(testbed: Cluster) -> None:
    bad = line(User="u" * 100)

    summary = _import(testbed, [HEADER, bad, bad, line(JobID="9199", JobIDRaw="9199")])

    assert (summary.lines, summary.quarantined, summary.charged) == (3, 2, 1)
    assert QuarantinedRecord.objects.count() == 1


def test_a_job_that_never_ran_without_a_partition_is_nothing_to_charge(testbed: Cluster) -> None:
    never = line(
        State="CANCELLED by 20001", Partition="", Start="Unknown", End="2026-03-01T10:05:00",
        ElapsedRaw="0", NNodes="0", NodeList="None assigned", AllocTRES="",
    )  # fmt: skip

    summary = _import(testbed, [HEADER, never])

    assert (summary.imported, summary.quarantined) == (1, 0)
    assert not QuarantinedRecord.objects.exists()


def test_blank_lines_are_their_own_bucket(testbed: Cluster) -> None:
    summary = _import(testbed, [HEADER, "", line(), "\r\n", "   "])

    assert (summary.lines, summary.blank, summary.charged, summary.quarantined) == (4, 3, 1, 0)
    assert _adds_up(summary)
    assert ImportRun.objects.get().blank == 3


# --------------------------------------------------------------------------------------
# Quarantine that follows the jobs


def test_a_corrected_line_of_the_same_job_closes_its_quarantined_line(testbed: Cluster) -> None:
    _import(testbed, [HEADER, line(Partition="wrok")])
    assert QuarantinedRecord.objects.filter(resolved_at__isnull=True).count() == 1

    _import(testbed, [HEADER, line()])

    record = QuarantinedRecord.objects.get()
    assert record.resolved_at is not None
    assert "job booked from another line" in record.resolution


def test_a_line_the_parser_refused_is_closed_when_its_job_is_booked(testbed: Cluster) -> None:
    _import(testbed, [HEADER, line(State="EXPLODED")])
    assert QuarantinedRecord.objects.get().job_id_raw == "9100"

    _import(testbed, [HEADER, line()])

    assert QuarantinedRecord.objects.get().resolved_at is not None


def test_a_retry_reads_each_line_with_the_header_of_its_own_file(testbed: Cluster) -> None:
    other_order = "|".join(reversed(HEADER.split("|")))
    _import(testbed, [HEADER, line(Account="newproj")])
    _import(
        testbed, [other_order, line(other_order, JobID="9200", JobIDRaw="9200", Account="newproj")]
    )
    assert QuarantinedRecord.objects.filter(resolved_at__isnull=True).count() == 2

    Project.objects.create(code="newproj")
    summary = quarantine_retry(cluster=testbed)

    assert summary.charged == 2
    assert not QuarantinedRecord.objects.filter(resolved_at__isnull=True).exists()


# --------------------------------------------------------------------------------------
# Cluster names


def test_rows_of_other_slurm_clusters_are_counted_and_skipped(testbed: Cluster) -> None:
    lines = [
        HEADER + "|Cluster",
        line() + "|setonix",
        line(JobID="9300", JobIDRaw="9300") + "|other",
    ]

    summary = _import(testbed, lines)

    assert (summary.charged, summary.other_clusters) == (1, 1)
    assert _adds_up(summary)


def test_slurm_cluster_name_selects_the_rows_of_that_name(testbed: Cluster) -> None:
    lines = [
        HEADER + "|Cluster",
        line() + "|setonix",
        line(JobID="9300", JobIDRaw="9300") + "|slurm-testbed",
    ]

    summary = _import(testbed, lines)

    assert (summary.charged, summary.other_clusters) == (1, 1)
    assert Job.objects.get().job_id_raw == "9100"


# --------------------------------------------------------------------------------------
# --noheader dumps


def test_import_sacct_reads_a_noheader_dump_with_columns(testbed: Cluster, tmp_path: Path) -> None:
    path = tmp_path / "noheader.psv"
    path.write_text("\n".join([line(), line(JobID="9101", JobIDRaw="9101")]) + "\n")
    out = io.StringIO()

    call_command(
        "import_sacct", str(path), "--cluster", "slurm-testbed", "--columns",
        HEADER.replace("|", ","), "--json", stdout=out,
    )  # fmt: skip

    assert '"charged": 2' in out.getvalue()
    assert set(Job.objects.values_list("line_number", flat=True)) == {1, 2}


def test_a_noheader_dump_without_columns_fails_with_what_to_do(
    testbed: Cluster, tmp_path: Path
) -> None:
    from django.core.management.base import CommandError

    path = tmp_path / "noheader.psv"
    path.write_text(line() + "\n")

    with pytest.raises(CommandError, match="--columns"):
        call_command("import_sacct", str(path), "--cluster", "slurm-testbed")
    assert ImportRun.objects.get().status == ImportRun.Status.FAILED


# --------------------------------------------------------------------------------------
# sacct --json gives the ledger of sacct --parsable2


_NOT_COMPARED = {"id", "import_run", "line_number", "source_hash", "charged_at", "updated_at"}


def _ledger() -> dict[tuple[str, str], dict[str, Any]]:
    fields = [f.attname for f in Job._meta.concrete_fields if f.name not in _NOT_COMPARED]
    return {(row["job_id_raw"], row["run"]): row for row in Job.objects.values(*fields)}


def _daily() -> set[tuple[Any, ...]]:
    return set(
        UsageDaily.objects.values_list(
            "project_id", "partition_id", "username", "day", "service_units", "core_hours",
            "gpu_hours", "energy_wh", "jobs",
        )
    )  # fmt: skip


def _forget_the_ledger() -> None:
    Job.objects.all().delete()
    UsageDaily.objects.all().delete()
    UtilisationHourly.objects.all().delete()
    QuarantinedRecord.objects.all().delete()


def test_json_and_parsable2_dumps_of_the_same_jobs_give_the_same_ledger(testbed: Cluster) -> None:
    with (SAMPLE / "sacct_all_duplicates.psv").open() as text:
        from_text = jobs_import(cluster=testbed, lines=text, source="psv")[1]
    text_ledger, text_daily = _ledger(), _daily()
    text_hourly = set(
        UtilisationHourly.objects.values_list(
            "partition_id", "hour_start", "core_seconds", "gpu_seconds"
        )
    )
    _forget_the_ledger()
    # The JSON names Slurm's cluster; the portal's cluster has another name.
    Cluster.objects.filter(pk=testbed.pk).update(slurm_cluster_name="setonix")
    testbed.refresh_from_db()

    with (SAMPLE / "sacct.json").open("rb") as stream:
        from_json = jobs_import(cluster=testbed, json_stream=stream, source="json")[1]

    assert from_json.as_dict() == from_text.as_dict()
    json_ledger = _ledger()
    assert json_ledger.keys() == text_ledger.keys()
    differing: dict[str, int] = {}
    for key, row in text_ledger.items():
        for name, value in row.items():
            if json_ledger[key][name] != value:
                differing[name] = differing.get(name, 0) + 1
    # What Slurm's JSON does not say: the uid that cancelled a job (sacct prints
    # "CANCELLED by 20001"; the JSON names the user) and, up to v0.0.39, a normal exit's
    # status (every one is "0:0"). Nothing that is charged or counted differs. And what the
    # jobs used: the text sample was dumped without the usage columns, while the JSON always
    # carries its steps' usage (tests/accounting/test_efficiency_real_slurm.py compares both
    # formats on a dump that has it in both).
    usage = {"cpu_seconds_used", "memory_peak_mb", "right_sized_service_units"}
    assert set(differing) <= {"state_raw", "exit_code", *usage}
    assert _daily() == text_daily
    assert (
        set(
            UtilisationHourly.objects.values_list(
                "partition_id", "hour_start", "core_seconds", "gpu_seconds"
            )
        )
        == text_hourly
    )


def test_the_example_spec_names_the_slurm_cluster_its_dumps_came_from(testbed: Cluster) -> None:
    # slurm.conf of the testbed says ClusterName=setonix; sacct.json carries that name.
    assert testbed.slurm_name == "setonix"
    cluster_apply(
        definition=dataclasses.replace(cluster_definition_load(SPEC), slurm_cluster_name="")
    )
    testbed.refresh_from_db()
    assert testbed.slurm_name == "slurm-testbed"


def test_json_quarantined_records_are_kept_under_the_json_header(testbed: Cluster) -> None:
    Cluster.objects.filter(pk=testbed.pk).update(slurm_cluster_name="")
    testbed.refresh_from_db()
    with (SAMPLE / "sacct.json").open("rb") as stream:
        summary = jobs_import(cluster=testbed, json_stream=stream, source="json")[1]

    # setonix is not this cluster's Slurm name: every allocation is another cluster's.
    assert summary.other_clusters == 227
    assert _adds_up(summary)
    assert ImportRun.objects.get().header == JSON_HEADER


# --------------------------------------------------------------------------------------
# No junk line changes what the real lines book


REAL = (SAMPLE / "sacct_allocations.psv").read_text().splitlines()
REAL_HEADER, REAL_LINES = REAL[0], REAL[1:41]


def _with(real_line: str, **values: str) -> str:
    names = REAL_HEADER.split("|")
    fields = dict(zip(names, real_line.split("|"), strict=True))
    fields.update(values)
    return "|".join(fields[name] for name in names)


def _junk() -> st.SearchStrategy[str]:
    stranger = st.integers(9_000_000, 9_999_999).map(str)
    real = st.sampled_from(REAL_LINES)
    return st.one_of(
        st.sampled_from(["", " ", "\t", "\r", REAL_HEADER]),
        st.text(max_size=200),  # any characters: NUL, '|', surrogates replaced, ...
        st.binary(max_size=120).map(lambda raw: raw.decode("utf-8", errors="replace")),
        st.tuples(real, st.integers(1, 200)).map(lambda pair: pair[0][: pair[1]]),  # truncated
        st.builds(
            lambda line, job: _with(line, JobID=job, JobIDRaw=job, User="u" * 80), real, stranger
        ),
        st.builds(
            lambda line, job: _with(line, JobID=job, JobIDRaw=job, ElapsedRaw="9" * 25),
            real,
            stranger,
        ),
        st.builds(
            lambda line, job: _with(line, JobID=job, JobIDRaw=job, End="2999-01-01T00:00:00"),
            real,
            stranger,
        ),
        st.builds(
            lambda line, job: _with(line, JobID=job, JobIDRaw=job, Account="nobody"), real, stranger
        ),
        st.builds(lambda line: _with(line, State="EXPLODED"), real),  # a broken copy of a real job
    )


def _booked() -> tuple[
    dict[tuple[str, str], tuple[Any, ...]], set[tuple[Any, ...]], set[tuple[Any, ...]]
]:
    jobs = {
        (row[0], row[1]): row[2:]
        for row in Job.objects.values_list(
            "job_id_raw", "run", "charge_state", "service_units", "pending_service_units",
            "project_id", "partition_id", "start", "end", "cpus", "memory_mb", "gpus",
        )
    }  # fmt: skip
    # The hourly rows Q(T) reads: junk must add no hour to any partition (an End of 2999, or
    # an Elapsed of years, would have pushed utilisation past 100 %).
    hourly = set(
        UtilisationHourly.objects.values_list(
            "partition_id", "hour_start", "core_seconds", "gpu_seconds"
        )
    )
    return jobs, _daily(), hourly


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_junk_lines_anywhere_never_change_what_the_real_lines_book(
    testbed: Cluster, data: st.DataObject
) -> None:
    _forget_the_ledger()
    clean = _import(testbed, [REAL_HEADER, *REAL_LINES], batch_size=7)
    expected = _booked()
    _forget_the_ledger()
    lines = list(REAL_LINES)
    junk = data.draw(st.lists(_junk(), min_size=1, max_size=12))
    for item in junk:
        lines.insert(data.draw(st.integers(0, len(lines))), item)

    summary = _import(testbed, [REAL_HEADER, *lines], batch_size=7)

    assert summary.lines == len(lines)
    assert _adds_up(summary)
    assert _booked() == expected
    # Every junk line is blank, quarantined, a repeated header (quarantined) or nothing else.
    assert summary.charged == clean.charged
    assert summary.blank + summary.quarantined == clean.quarantined + len(junk)


def test_the_portal_runs_sacct_for_slurm_s_name_of_the_cluster(testbed: Cluster) -> None:
    from accounting.ledger.sources import sacct_command

    window = {"since": datetime(2026, 3, 1, tzinfo=UTC), "until": datetime(2026, 3, 2, tzinfo=UTC)}
    assert "--clusters=setonix" in sacct_command(cluster=testbed, **window)

    testbed.slurm_cluster_name = ""
    assert "--clusters=slurm-testbed" in sacct_command(cluster=testbed, **window)

    testbed.sacct_arguments = "-a --parsable2 --allocations -M all"
    command = sacct_command(cluster=testbed, **window)
    assert not any(argument.startswith("--clusters") for argument in command)


# --------------------------------------------------------------------------------------
# Memory stays bounded whatever the input


def test_an_endless_line_is_cut_as_it_is_read_and_quarantined(
    testbed: Cluster, tmp_path: Path
) -> None:
    path = tmp_path / "endless.psv"
    with path.open("w") as out:
        out.write(HEADER + "\n" + line() + "\n")
        out.write("x" * (3 * MAX_LINE_CHARS))  # 3 M characters, no newline until here
        out.write("\n" + line(JobID="9101", JobIDRaw="9101") + "\n")

    call_command("import_sacct", str(path), "--cluster", "slurm-testbed", stdout=io.StringIO())

    assert set(Job.objects.values_list("job_id_raw", flat=True)) == {"9100", "9101"}
    record = QuarantinedRecord.objects.get()
    assert record.line_number == 3
    assert "longer than 1,048,576 characters" in record.reason
    assert len(record.raw) < 5000


def test_bounded_lines_holds_one_cut_line_at_a_time() -> None:
    stream = io.StringIO("a|b\n" + "y" * 10_000 + "\nc|d")

    lines = list(bounded_lines(stream, limit=100))

    assert lines == ["a|b\n", "y" * 101, "c|d"]


def test_a_json_value_beyond_any_sacct_job_stops_the_reader(monkeypatch) -> None:
    from accounting.ledger import sacct_json

    monkeypatch.setattr(sacct_json._JobsReader, "MAX_VALUE_CHARS", 5_000)
    monkeypatch.setattr(sacct_json._JobsReader, "CHUNK", 1_000)
    body = '{"jobs": [{"job_id": 1, "name": "' + "n" * 50_000 + '"}]}'

    [error] = list(sacct_json.parse_sacct_json(io.BytesIO(body.encode())))

    assert isinstance(error, SacctLineError)
    assert "longer than 5,000 characters" in error.reason

"""The sacct parser against the real Slurm 22.05 dumps in examples/sacct and hand-written lines.

Pure tests: no database, no settings.
"""

from __future__ import annotations

import csv
import dataclasses
import random
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from accounting.clusters.units import parse_memory_mb
from accounting.ledger.sacct import (
    EMPTY_LINE_REASON,
    MAX_REASON_LENGTH,
    REPEATED_HEADER_REASON,
    REQUIRED_FIELDS,
    SacctHeaderError,
    SacctLineError,
    SacctRecord,
    SacctStep,
    header_delimiter,
    parse_elapsed,
    parse_sacct,
    parse_tres,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sacct"
SACCT_FILES = sorted(EXAMPLES.glob("sacct_*.psv")) + sorted(EXAMPLES.glob("midrun/*.psv"))
# Row counts stated in examples/sacct/README.md.
DOCUMENTED_ROWS = {
    "sacct_allocations.psv": 225,
    "sacct_all.psv": 727,
    "sacct_allocations_allstates.psv": 234,
    "sacct_all_allstates.psv": 736,
    "sacct_all_duplicates.psv": 733,
}
HEADER = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|"
    "Elapsed|ElapsedRaw|NNodes|NCPUS|NodeList|ReqTRES|AllocTRES|ReqMem|ConsumedEnergyRaw|"
    "TimelimitRaw"
)
# Job 1332598 of sacct_all.psv, the base of the hand-written lines.
BASE_LINE = (
    "1332598|1332598|single-core|root|pawsey0001|work|exhausted|COMPLETED|0:0|"
    "2026-11-22T02:00:23|2026-11-22T02:00:26|2026-11-22T02:00:42|00:00:16|16|1|1|"
    "nid1001|billing=1,cpu=1,mem=1914M,node=1|billing=1,cpu=1,mem=1914M,node=1|1914M|0|15"
)
BASE_ROW = dict(zip(HEADER.split("|"), BASE_LINE.split("|"), strict=True))


def line_with(header: str = HEADER, **values: str) -> str:
    """A data line for ``header``: BASE_ROW with some columns replaced."""
    row = {**BASE_ROW, **values}
    return "|".join(row[name] for name in header.split("|"))


def parse_one(line: str, header: str = HEADER, **options: object) -> SacctRecord | SacctLineError:
    [parsed] = parse_sacct([header, line], **options)  # type: ignore[call-overload]
    return parsed


def record_from(line: str, header: str = HEADER, **options: object) -> SacctRecord:
    parsed = parse_one(line, header, **options)
    assert isinstance(parsed, SacctRecord), parsed
    return parsed


def error_from(line: str, header: str = HEADER) -> SacctLineError:
    parsed = parse_one(line, header)
    assert isinstance(parsed, SacctLineError), parsed
    return parsed


def parse_file(path: Path, **options: object) -> list[SacctRecord | SacctLineError]:
    with path.open() as lines:
        return list(parse_sacct(lines, **options))  # type: ignore[call-overload]


def records_of(path: Path) -> list[SacctRecord]:
    parsed = parse_file(path)
    errors = [item for item in parsed if isinstance(item, SacctLineError)]
    assert errors == []
    return [item for item in parsed if isinstance(item, SacctRecord)]


def by_job_id(path: Path) -> dict[str, SacctRecord]:
    return {record.job_id: record for record in records_of(path)}


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="|"))


# --------------------------------------------------------------------------------------
# Every line of every real file


def test_the_sample_files_are_copied_into_the_repository() -> None:
    names = {path.name for path in SACCT_FILES}
    assert set(DOCUMENTED_ROWS) <= names
    assert len(list(EXAMPLES.glob("midrun/*.psv"))) == 3
    for name in ("sacctmgr_assoc.psv", "job_node_alloc.json", "billing_check.csv"):
        assert (EXAMPLES / name).is_file()
    assert (EXAMPLES.parent / "clusters" / "slurm-testbed.json").is_file()
    for name, rows in DOCUMENTED_ROWS.items():
        assert len(records_of(EXAMPLES / name)) == rows


@pytest.mark.parametrize("path", SACCT_FILES, ids=lambda path: path.name)
def test_every_data_line_yields_exactly_one_record(path: Path) -> None:
    data_lines = path.read_text().splitlines()[1:]

    parsed = parse_file(path)

    assert len(parsed) == len(data_lines)
    assert all(isinstance(item, SacctRecord) for item in parsed)
    assert [item.line_number for item in parsed] == list(range(2, len(data_lines) + 2))
    assert [item.raw for item in parsed] == data_lines


@pytest.mark.parametrize("path", SACCT_FILES, ids=lambda path: path.name)
def test_allocation_and_step_counts_match_an_independent_count(path: Path) -> None:
    rows = csv_rows(path)
    steps_expected = sum("." in row["JobIDRaw"] for row in rows)

    records = records_of(path)

    assert sum(record.kind == "step" for record in records) == steps_expected
    assert sum(record.kind == "allocation" for record in records) == len(rows) - steps_expected
    assert all((record.step is None) == (record.kind == "allocation") for record in records)


@pytest.mark.parametrize("path", SACCT_FILES, ids=lambda path: path.name)
def test_elapsed_text_agrees_with_elapsed_raw_in_real_output(path: Path) -> None:
    for row in csv_rows(path):
        assert parse_elapsed(row["Elapsed"]) == int(row["ElapsedRaw"])


@pytest.mark.parametrize("path", SACCT_FILES, ids=lambda path: path.name)
def test_expanded_node_lists_have_nnodes_entries(path: Path) -> None:
    for record in records_of(path):
        if record.nodes:
            assert len(record.nodes) == record.nnodes, record.job_id


def test_sacctmgr_output_is_rejected_with_the_missing_columns_listed() -> None:
    with pytest.raises(SacctHeaderError) as raised:
        parse_file(EXAMPLES / "sacctmgr_assoc.psv")

    assert "JobIDRaw" in str(raised.value)
    assert "NodeList" in raised.value.missing_fields
    assert "Account" not in raised.value.missing_fields


def test_billing_cpus_memory_and_gpus_agree_with_billing_check_csv() -> None:
    allocations = by_job_id(EXAMPLES / "sacct_allocations.psv")
    checked = csv_rows_comma(EXAMPLES / "billing_check.csv")
    assert len(checked) == len(allocations) == 225

    for row in checked:
        record = allocations[row["JobID"]]
        assert record.billing == Decimal(row["slurm_billing"])
        assert record.cpus == int(row["cpu"])
        assert record.memory_mb == Decimal(row["mem_mb"])
        assert record.gpus == int(row["gpu"])
        assert record.nnodes == int(row["NNodes"])
        assert record.partition == row["Partition"]


def csv_rows_comma(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


# --------------------------------------------------------------------------------------
# Specific real rows


def test_array_task_uses_the_array_meta_job_id_only_for_the_last_task() -> None:
    jobs = by_job_id(EXAMPLES / "sacct_all.psv")

    last = jobs["1332642_3"]
    first = jobs["1332642_0"]

    assert (last.job_id_raw, last.array_job_id, last.array_task_id) == ("1332642", "1332642", "3")
    assert (first.job_id_raw, first.array_job_id, first.array_task_id) == (
        "1332643",
        "1332642",
        "0",
    )
    assert last.kind == "allocation"
    assert not last.array_pending
    step = jobs["1332642_3.batch"]
    assert (step.kind, step.step, step.job_id_raw, step.array_task_id) == (
        "step",
        "batch",
        "1332642.batch",
        "3",
    )


def test_pending_array_range_is_one_allocation_marked_pending() -> None:
    record = by_job_id(EXAMPLES / "sacct_allocations_allstates.psv")["1332724_[2-8%1]"]

    assert record.kind == "allocation"
    assert record.array_pending
    assert (record.array_job_id, record.array_task_id, record.job_id_raw) == (
        "1332724",
        "[2-8%1]",
        "1332724",
    )
    assert record.start is None
    assert record.nodes == ()
    assert record.nodelist == ""


def test_het_job_components_have_their_own_raw_id_partition_and_billing() -> None:
    jobs = by_job_id(EXAMPLES / "sacct_all.psv")

    first, second = jobs["1332628+0"], jobs["1332628+1"]

    assert (first.job_id_raw, first.partition, first.billing) == ("1332628", "work", 4)
    assert (second.job_id_raw, second.partition, second.billing) == ("1332629", "gpu", 64)
    assert (first.het_job_id, first.het_offset) == ("1332628", 0)
    assert (second.het_job_id, second.het_offset) == ("1332628", 1)
    assert second.gpus == 1
    step = jobs["1332628+1.1"]
    assert (step.kind, step.step, step.job_id_raw, step.het_offset) == ("step", "1", "1332629.1", 1)


def test_cancelled_by_uid_is_split_from_the_state() -> None:
    records = records_of(EXAMPLES / "sacct_all_allstates.psv")

    by_root = [record for record in records if record.state_raw == "CANCELLED by 0"]
    by_carol = [record for record in records if record.state_raw == "CANCELLED by 20003"]
    plain = [record for record in records if record.state_raw == "CANCELLED"]

    assert by_root
    assert by_carol
    assert plain
    assert {(record.state, record.cancelled_by_uid) for record in by_root} == {("CANCELLED", 0)}
    assert {record.cancelled_by_uid for record in by_carol} == {20003}
    assert {record.cancelled_by_uid for record in plain} == {None}


def test_fractional_gibibytes_become_whole_mebibytes() -> None:
    records = records_of(EXAMPLES / "sacct_allocations.psv")

    big = [record for record in records if record.alloc_tres.get("mem") == "478.50G"]
    half = [record for record in records if record.alloc_tres.get("mem") == "62.50G"]

    assert big
    assert half
    assert {record.memory_mb for record in big} == {Decimal(489984)}
    assert {record.memory_mb for record in half} == {Decimal(64000)}


def test_gpu_count_comes_from_gres_gpu() -> None:
    jobs = by_job_id(EXAMPLES / "sacct_allocations.psv")

    assert jobs["1332683"].gpus == 8
    assert jobs["1332683"].billing == 512
    assert jobs["1332598"].gpus == 0


def test_none_assigned_node_list_gives_no_nodes() -> None:
    records = records_of(EXAMPLES / "sacct_allocations_allstates.psv")

    never_started = [record for record in records if record.raw.count("|None assigned|")]

    assert len(never_started) == 9
    for record in never_started:
        assert (record.nodelist, record.nodes, record.start) == ("", (), None)
        assert (record.cpus, record.memory_mb, record.billing) == (0, 0, None)
        assert record.req_tres["cpu"] == str(record.ncpus)
        assert record.is_finished


def test_running_and_pending_jobs_in_a_midrun_dump_have_unknown_times() -> None:
    records = records_of(EXAMPLES / "midrun/sacct_midrun_all.psv")

    running = [record for record in records if record.state == "RUNNING"]
    pending = [record for record in records if record.state == "PENDING"]

    assert running
    assert pending
    assert all(record.end is None and record.start is not None for record in running)
    assert all(record.start is None and record.end is None for record in pending)
    assert not any(record.is_finished for record in running + pending)
    assert all(record.is_finished for record in records if record.state == "COMPLETED")


def test_node_list_with_a_comma_is_expanded_with_hostlist() -> None:
    record = by_job_id(EXAMPLES / "sacct_allocations.psv")["1332747"]

    assert record.nodelist == "nid[1001,1004]"
    assert record.nodes == ("nid1001", "nid1004")
    assert record.nnodes == 2
    assert record.req_tres["node"] == "1"


def test_node_range_is_expanded_in_order() -> None:
    record = record_from(line_with(NodeList="nid[1001-1004]", NNodes="4"))

    assert record.nodes == ("nid1001", "nid1002", "nid1003", "nid1004")


def test_requeued_job_gives_two_runs_with_different_run_keys() -> None:
    records = records_of(EXAMPLES / "sacct_all_duplicates.psv")

    runs = [record for record in records if record.job_id == "1332601"]

    assert [record.state for record in runs] == ["REQUEUED", "COMPLETED"]
    assert len({record.run_key for record in runs}) == 2
    assert runs[0].start is not None
    assert runs[0].run_key == runs[0].start.isoformat()
    assert runs[1].run_key == ""  # the current incarnation keeps one row from submit to end
    assert all(record.is_finished for record in runs)


def test_run_key_of_a_job_that_never_started_is_its_current_incarnation() -> None:
    record = by_job_id(EXAMPLES / "sacct_allocations_allstates.psv")["1332724_[2-8%1]"]

    assert record.run_key == ""


def test_empty_exit_code_is_allowed() -> None:
    record = record_from(line_with(ExitCode="", State="CANCELLED"))

    assert record.exit_code is None


def test_exit_code_keeps_status_and_signal() -> None:
    records = records_of(EXAMPLES / "sacct_all.psv")

    assert {"0:0", "0:9", "0:15", "127:0"} <= {record.exit_code for record in records}


def test_timelimit_raw_is_read_as_minutes_and_is_absent_on_steps() -> None:
    records = records_of(EXAMPLES / "sacct_all.psv")

    limits = {record.timelimit_minutes for record in records if record.kind == "allocation"}
    step_limits = {record.timelimit_minutes for record in records if record.kind == "step"}

    assert limits == {1, 5, 10, 15, 30, 60, 120, 240, 1440}
    assert step_limits == {None}


def test_unlimited_time_limit_has_no_minutes() -> None:
    assert record_from(line_with(TimelimitRaw="UNLIMITED")).timelimit_minutes is None
    assert record_from(line_with(TimelimitRaw="Partition_Limit")).timelimit_minutes is None


def test_step_rows_are_records_with_blank_user_and_partition() -> None:
    jobs = by_job_id(EXAMPLES / "sacct_all.psv")

    batch, extern = jobs["1332598.batch"], jobs["1332598.extern"]

    assert (batch.kind, batch.step, batch.user, batch.partition, batch.qos) == (
        "step",
        "batch",
        "",
        "",
        None,
    )
    assert batch.account == "pawsey0001"
    assert batch.billing is None
    assert extern.billing == 1
    assert batch.req_tres == {}
    assert batch.req_mem_mb is None


def test_allocation_row_has_all_typed_fields() -> None:
    record = by_job_id(EXAMPLES / "sacct_all.psv")["1332598"]

    assert record == SacctRecord(
        line_number=2,
        raw=line_with(),
        job_id="1332598",
        job_id_raw="1332598",
        kind="allocation",
        step=None,
        array_job_id=None,
        array_task_id=None,
        array_pending=False,
        het_job_id=None,
        het_offset=None,
        cluster=None,
        user="root",
        account="pawsey0001",
        partition="work",
        qos="exhausted",
        job_name="single-core",
        state="COMPLETED",
        state_raw="COMPLETED",
        cancelled_by_uid=None,
        exit_code="0:0",
        submit=datetime(2026, 11, 22, 2, 0, 23, tzinfo=UTC),
        start=datetime(2026, 11, 22, 2, 0, 26, tzinfo=UTC),
        end=datetime(2026, 11, 22, 2, 0, 42, tzinfo=UTC),
        elapsed_seconds=16,
        nnodes=1,
        ncpus=1,
        nodelist="nid1001",
        nodes=("nid1001",),
        alloc_tres={"billing": "1", "cpu": "1", "mem": "1914M", "node": "1"},
        cpus=1,
        memory_mb=Decimal(1914),
        gpus=0,
        billing=Decimal(1),
        req_tres={"billing": "1", "cpu": "1", "mem": "1914M", "node": "1"},
        req_mem_mb=Decimal(1914),
        consumed_energy_joules=0,
        timelimit_minutes=15,
        usage=None,  # the sample has no usage columns
    )


def test_empty_consumed_energy_is_none() -> None:
    assert record_from(line_with(ConsumedEnergyRaw="")).consumed_energy_joules is None
    assert record_from(line_with(ConsumedEnergyRaw="123456")).consumed_energy_joules == 123456


# --------------------------------------------------------------------------------------
# Column order, header, cluster


def test_shuffled_columns_give_identical_records() -> None:
    path = EXAMPLES / "sacct_all_allstates.psv"
    rows = [line.split("|") for line in path.read_text().splitlines()]
    order = list(range(len(rows[0])))
    random.Random(2026).shuffle(order)
    assert order != sorted(order)
    shuffled = ["|".join(row[index] for index in order) for row in rows]

    original = records_of(path)
    reordered = list(parse_sacct(shuffled))

    assert [dataclasses.replace(record, raw="") for record in original] == [
        dataclasses.replace(record, raw="")
        for record in reordered
        if isinstance(record, SacctRecord)
    ]


def test_unknown_columns_are_ignored_and_names_are_case_insensitive() -> None:
    header = HEADER.lower().replace("jobname", "JobName") + "|Comment"
    line = line_with(header=HEADER) + "|anything at all"

    assert record_from(line, header) == dataclasses.replace(record_from(line_with()), raw=line)


def test_missing_required_columns_are_all_named() -> None:
    header = HEADER.replace("NodeList|", "").replace("|Account", "")

    with pytest.raises(SacctHeaderError, match="Account, NodeList") as raised:
        parse_sacct([header])

    assert raised.value.missing_fields == ("Account", "NodeList")


def test_without_alloc_tres_the_job_is_read_from_ncpus_req_mem_and_the_gpus_asked_for() -> None:
    header = HEADER.replace("|AllocTRES", "") + "|ReqGRES"
    line = line_with(
        header=HEADER,
        NCPUS="12",
        NNodes="2",
        NodeList="nid[1001-1002]",
        ReqMem="31000Mn",
        ReqTRES="cpu=12,node=2",
    )
    line = line.replace("|billing=1,cpu=1,mem=1914M,node=1|31000Mn", "|31000Mn") + "|gpu:2"

    record = record_from(line, header)

    assert (record.cpus, record.memory_mb, record.gpus, record.billing) == (12, 62000, 2, None)
    assert record.warnings == (
        "no AllocTRES column: charged from NCPUS, ReqMem and the GPUs requested",
    )


@pytest.mark.parametrize(
    ("header", "delimiter"),
    [("JobID|JobIDRaw", "|"), ("JobID;|;JobIDRaw", ";|;"), ("jobid\u2603jobidraw\u2603", "\u2603")],
)
def test_the_delimiter_is_read_from_the_header(header: str, delimiter: str) -> None:
    assert header_delimiter(header) == delimiter


def test_a_dump_with_another_delimiter_and_a_trailing_one_reads_as_parsable2() -> None:
    # sacct --parsable --delimiter=';|;': every line ends with the delimiter too.
    header = HEADER.replace("|", ";|;") + ";|;"
    line = line_with().replace("|", ";|;") + ";|;"

    assert record_from(line, header) == dataclasses.replace(record_from(line_with()), raw=line)


def test_the_mem_per_cpu_flag_bit_of_old_slurm_is_read_as_per_cpu() -> None:
    # Open XDMoD's 2016 reference data: 2147486648Mn with ReqTRES mem=24000M for 8 CPUs.
    line = line_with(ReqMem="2147486648Mn", NCPUS="8", AllocTRES="cpu=8,mem=24000M,node=1")

    assert record_from(line).req_mem_mb == 24000


def test_one_of_elapsed_raw_or_elapsed_is_required() -> None:
    header = HEADER.replace("|Elapsed|ElapsedRaw", "")

    with pytest.raises(SacctHeaderError, match="ElapsedRaw or Elapsed"):
        parse_sacct([header])


def test_empty_input_is_a_header_error_listing_the_required_columns() -> None:
    with pytest.raises(SacctHeaderError) as raised:
        parse_sacct(["", "   \n"])

    assert "empty input" in str(raised.value)
    assert raised.value.missing_fields == REQUIRED_FIELDS


def test_header_error_is_raised_by_the_call_not_the_first_iteration() -> None:
    with pytest.raises(SacctHeaderError):
        parse_sacct(iter(["JobID|State"]))


def test_repeated_header_columns_are_a_header_error() -> None:
    with pytest.raises(SacctHeaderError, match="repeats columns: State"):
        parse_sacct([HEADER + "|State"])


def test_blank_lines_before_the_header_are_skipped_but_counted() -> None:
    [record] = parse_sacct(["\n", "  \n", HEADER + "\n", line_with() + "\n"])

    assert isinstance(record, SacctRecord)
    assert record.line_number == 4


def test_crlf_line_endings_are_stripped() -> None:
    [record] = parse_sacct([HEADER + "\r\n", line_with() + "\r\n"])

    assert isinstance(record, SacctRecord)
    assert record.raw == line_with()
    assert record.timelimit_minutes == 15


def test_cluster_argument_is_set_on_every_record_unless_a_cluster_column_says_otherwise() -> None:
    assert record_from(line_with(), cluster="setonix").cluster == "setonix"

    header = HEADER + "|Cluster"
    assert record_from(line_with() + "|other", header, cluster="setonix").cluster == "other"
    assert record_from(line_with() + "|", header, cluster="setonix").cluster == "setonix"


def test_elapsed_is_read_when_there_is_no_elapsed_raw_column() -> None:
    header = HEADER.replace("|ElapsedRaw", "")

    record = record_from(line_with(header=header, Elapsed="1-02:03:04"), header)

    assert record.elapsed_seconds == 93784


# --------------------------------------------------------------------------------------
# Time zones


def test_time_in_perth_is_eight_hours_ahead_of_utc() -> None:
    in_utc = record_from(line_with())
    in_perth = record_from(line_with(), tz=ZoneInfo("Australia/Perth"))

    assert in_perth.submit == datetime(2026, 11, 21, 18, 0, 23, tzinfo=UTC)
    assert in_utc.submit is not None
    assert in_perth.submit is not None
    assert in_utc.submit - in_perth.submit == timedelta(hours=8)
    assert in_perth.submit.tzinfo is UTC


def test_ambiguous_time_in_a_dst_fold_is_read_as_the_first_occurrence() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    # Clocks go back from 03:00 CEST to 02:00 CET on 2026-10-25: 02:30 happens twice.
    record = record_from(line_with(Submit="2026-10-25T02:30:00"), tz=berlin)

    assert record.submit == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)


def test_time_in_a_dst_gap_is_read_with_the_offset_before_the_gap() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    # Clocks jump from 02:00 CET to 03:00 CEST on 2026-03-29: 02:30 never happens.
    record = record_from(line_with(Submit="2026-03-29T02:30:00"), tz=berlin)

    assert record.submit == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)


def test_a_naive_or_missing_time_zone_is_refused() -> None:
    with pytest.raises(TypeError):
        parse_sacct([HEADER], tz=None)  # type: ignore[call-overload]


# --------------------------------------------------------------------------------------
# Hand-written lines for what the testbed could not produce


def test_typed_gpus_are_summed() -> None:
    tres = "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu:h100=1,gres/gpumem=80G,mem=8G,node=1"

    record = record_from(line_with(AllocTRES=tres))

    assert record.gpus == 3
    assert record.alloc_tres["gres/gpu:a100"] == "2"


def test_untyped_gpu_total_wins_over_typed_entries() -> None:
    tres = "cpu=8,gres/gpu=4,gres/gpu:a100=4,mem=8G,node=1"

    assert record_from(line_with(AllocTRES=tres)).gpus == 4


@pytest.mark.parametrize(
    ("elapsed", "seconds"),
    [
        ("00:00:16", 16),
        ("12:34", 754),
        ("12:34.567", 754),
        ("1-00:00:00", 86400),
        ("2-03:04:05", 183845),
        ("10-00:00:01", 864001),
    ],
)
def test_elapsed_forms_printed_by_sacct(elapsed: str, seconds: int) -> None:
    header = HEADER.replace("|ElapsedRaw", "")

    assert record_from(line_with(header=header, Elapsed=elapsed), header).elapsed_seconds == seconds


@pytest.mark.parametrize(
    ("memory", "memory_mb"),
    [
        ("512K", Decimal("0.5")),
        ("1914M", Decimal(1914)),
        ("100G", Decimal(102400)),
        ("478.50G", Decimal(489984)),
        ("2T", Decimal(2 * 1024 * 1024)),
        ("245000", Decimal(245000)),
    ],
)
def test_memory_units_are_powers_of_1024_from_mebibytes(memory: str, memory_mb: Decimal) -> None:
    record = record_from(line_with(AllocTRES=f"cpu=1,mem={memory},node=1", ReqMem=memory))

    assert record.memory_mb == memory_mb
    assert record.req_mem_mb == memory_mb
    assert str(parse_memory_mb(memory)) == str(memory_mb)


@pytest.mark.parametrize("state", ["OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "TIMEOUT", "FAILED"])
def test_terminal_states_are_kept_and_finished(state: str) -> None:
    record = record_from(line_with(State=state, ExitCode="0:125"))

    assert (record.state, record.state_raw, record.cancelled_by_uid) == (state, state, None)
    assert record.is_finished


@pytest.mark.parametrize("state", ["RUNNING", "PENDING", "SUSPENDED", "COMPLETING"])
def test_active_states_are_not_finished_even_with_an_end_time(state: str) -> None:
    assert not record_from(line_with(State=state)).is_finished


def test_req_mem_falls_back_to_req_tres_without_a_req_mem_column() -> None:
    header = HEADER.replace("|ReqMem", "")

    record = record_from(line_with(header=header, ReqTRES="cpu=1,mem=4G,node=1"), header)

    assert record.req_mem_mb == 4096


def test_large_node_count_printed_with_a_unit_is_expanded() -> None:
    assert record_from(line_with(NNodes="2K", NodeList="")).nnodes == 2048


# --------------------------------------------------------------------------------------
# Bad lines become errors, never exceptions, and the next line still parses


@pytest.mark.parametrize(
    ("column", "value", "reason_part"),
    [
        ("JobID", "abc", "not a Slurm job id"),
        ("JobID", "123.", "empty step"),
        ("JobIDRaw", "x1", "does not start with a number"),
        ("JobIDRaw", "1332598.batch", "is a step"),
        ("State", "EXPLODED", "unknown job state"),
        ("State", "CANCELLED by root", "numeric uid"),
        ("Submit", "22/11/2026", "not YYYY-MM-DDTHH:MM:SS"),
        ("Start", "2026-13-01T00:00:00", "not YYYY-MM-DDTHH:MM:SS"),
        ("End", "soon", "not YYYY-MM-DDTHH:MM:SS"),
        ("ElapsedRaw", "-5", "not a whole number"),
        ("NNodes", "one", "not a whole number"),
        ("NodeList", "nid[1001-", "not a hostlist"),
        ("NodeList", "nid[9-1]", "not a hostlist"),
        ("AllocTRES", "cpu=1,mem", "not name=value"),
        ("AllocTRES", "cpu=x,mem=1G", "cpu count"),
        ("AllocTRES", "cpu=1,mem=lots", "memory"),
        ("AllocTRES", "cpu=1,cpu=2", "appears twice"),
    ],
)
def test_a_bad_field_gives_a_line_error_naming_the_field(
    column: str, value: str, reason_part: str
) -> None:
    line = line_with(**{column: value})

    error = error_from(line)

    assert error.field == column
    assert reason_part in error.reason
    assert (error.line_number, error.raw) == (2, line)


@pytest.mark.parametrize(
    ("column", "value", "reason_part", "attribute"),
    [
        ("ExitCode", "0", "status:signal", "exit_code"),
        ("NCPUS", "1.5", "not a whole number", "ncpus"),
        ("ReqTRES", "billing=NaN", "billing", "req_tres"),
        ("ReqMem", "4000Xn", "memory", "req_mem_mb"),
        ("ConsumedEnergyRaw", "1e6", "not a whole number", "consumed_energy_joules"),
        ("TimelimitRaw", "01:00:00", "not a whole number", "timelimit_minutes"),
    ],
)
def test_a_bad_optional_field_is_a_warning_on_the_record_never_an_error(
    column: str, value: str, reason_part: str, attribute: str
) -> None:
    good = record_from(line_with())

    record = record_from(line_with(**{column: value}))

    (warning,) = record.warnings
    assert warning.startswith(column)
    assert reason_part in warning
    assert "ignored" in warning
    assert getattr(record, attribute) in (None, {})
    # What charging reads is untouched.
    assert (record.cpus, record.memory_mb, record.gpus, record.elapsed_seconds) == (
        good.cpus,
        good.memory_mb,
        good.gpus,
        good.elapsed_seconds,
    )
    assert good.warnings == ()


@pytest.mark.parametrize(
    ("req_mem", "nnodes", "ncpus", "expected_mb"),
    [
        ("31000Mn", "2", "64", Decimal(62000)),  # Slurm 16.05-20.11: per node
        ("62.50Gn", "1", "8", Decimal(64000)),
        ("0n", "1", "8", Decimal(0)),  # 20.11 prints 0n for no explicit request
        ("3000Mc", "1", "4", Decimal(12000)),  # per CPU: times NCPUS
        ("1914M", "1", "1", Decimal(1914)),  # 21.08 and later: the job's total
    ],
)
def test_old_req_mem_suffixes_are_per_node_or_per_cpu(
    req_mem: str, nnodes: str, ncpus: str, expected_mb: Decimal
) -> None:
    line = line_with(
        ReqMem=req_mem,
        NNodes=nnodes,
        NCPUS=ncpus,
        NodeList="nid[1001-1002]" if nnodes == "2" else "nid1001",
        AllocTRES=f"cpu={ncpus},mem=12000M,node={nnodes}",
    )

    record = record_from(line)

    assert record.req_mem_mb == expected_mb
    assert record.memory_mb == 12000
    assert record.warnings == ()


def test_old_per_cpu_alloc_tres_memory_is_multiplied_by_the_cpus() -> None:
    # Slurm 16.05 printed AllocTRES mem= per CPU for --mem-per-cpu jobs: 32 nodes, 256 CPUs.
    line = line_with(
        ReqMem="3000Mc",
        NNodes="32",
        NCPUS="256",
        NodeList="nid[1001-1032]",
        AllocTRES="cpu=256,mem=3000M,node=32",
    )

    record = record_from(line)

    assert record.memory_mb == 256 * 3000
    assert record.req_mem_mb == 256 * 3000
    (warning,) = record.warnings
    assert "per CPU" in warning


def test_a_per_cpu_req_mem_with_a_total_alloc_tres_is_left_alone() -> None:
    # Slurm 17.02-20.11: ReqMem per CPU, AllocTRES mem= the job's total.
    line = line_with(ReqMem="3000Mc", NCPUS="4", AllocTRES="cpu=4,mem=12000M,node=1")

    record = record_from(line)

    assert (record.memory_mb, record.req_mem_mb, record.warnings) == (12000, 12000, ())


def test_a_line_error_carries_the_job_id_when_the_line_has_the_header_shape() -> None:
    assert error_from(line_with(State="EXPLODED")).job_id_raw == "1332598"
    assert error_from(line_with(JobName="a|b")).job_id_raw == ""
    assert error_from(line_with(JobIDRaw="x1")).job_id_raw == ""


def test_a_huge_bad_value_gives_a_short_reason() -> None:
    error = error_from(line_with(NodeList="nid[" + "1," * 100_000))

    assert error.field == "NodeList"
    assert len(error.reason) == MAX_REASON_LENGTH


def test_wrong_number_of_fields_is_a_line_error() -> None:
    error = error_from(line_with(JobName="a|b"))

    assert error.field is None
    assert "expected 22 fields, found 23" in error.reason


def test_errors_do_not_stop_the_following_lines() -> None:
    lines = [HEADER, line_with(), "garbage", "", HEADER, line_with(NNodes="x"), line_with()]

    parsed = list(parse_sacct(lines))

    assert [type(item).__name__ for item in parsed] == [
        "SacctRecord",
        "SacctLineError",
        "SacctLineError",
        "SacctLineError",
        "SacctLineError",
        "SacctRecord",
    ]
    assert [item.line_number for item in parsed] == [2, 3, 4, 5, 6, 7]
    reasons = [item.reason for item in parsed if isinstance(item, SacctLineError)]
    assert reasons[1:3] == [EMPTY_LINE_REASON, REPEATED_HEADER_REASON]


# --------------------------------------------------------------------------------------
# Records as values


def test_records_are_frozen_hashable_and_their_tres_read_only() -> None:
    record = record_from(line_with())

    with pytest.raises(dataclasses.FrozenInstanceError):
        record.state = "FAILED"  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.alloc_tres["cpu"] = "2"  # type: ignore[index]
    assert type(record) is SacctRecord
    assert len({record, record_from(line_with())}) == 1


def test_parsed_records_equal_records_built_by_the_constructor() -> None:
    for record in records_of(EXAMPLES / "sacct_all_duplicates.psv"):
        values = {field.name: getattr(record, field.name) for field in dataclasses.fields(record)}
        assert SacctRecord(**values) == record


def test_field_helpers_parse_what_sacct_prints() -> None:
    assert parse_tres("billing=1,cpu=1,mem=1914M,node=1") == {
        "billing": "1",
        "cpu": "1",
        "mem": "1914M",
        "node": "1",
    }
    assert parse_tres("") == {}
    assert parse_elapsed("1-00:00:01") == 86401
    assert parse_memory_mb("62.50G") == 64000


# --------------------------------------------------------------------------------------
# Streaming


def synthetic_lines(count: int) -> Iterator[str]:
    """A header and ``count`` realistic lines (a job and two steps each), made on the fly."""
    template = (
        line_with(
            JobID="{job_id}",
            JobIDRaw="{job_id}",
            Submit="{moment}",
            Start="{moment}",
            End="{moment}",
            ElapsedRaw="{elapsed}",
            NodeList="nid[{first:04d}-{last:04d}]",
            NNodes="2",
        )
        + "\n"
    )
    yield HEADER + "\n"
    start = datetime(2026, 1, 1)
    for number in range(count):
        job_id = f"{5_000_000 + number // 3}{('', '.batch', '.extern')[number % 3]}"
        yield template.format(
            job_id=job_id,
            moment=(start + timedelta(seconds=number // 3)).isoformat(),
            elapsed=number % 86400,
            first=1000 + number % 50,
            last=1001 + number % 50,
        )


def test_parsing_streams_without_accumulating_records() -> None:
    # tracemalloc slows parsing about sevenfold; 60,000 lines are plenty to see growth.
    lines = 60_000
    tracemalloc.start()
    try:
        count = sum(1 for item in parse_sacct(synthetic_lines(lines)) if item.line_number > 0)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert count == lines
    # Keeping the records would take hundreds of MB; the parser's caches are bounded.
    assert peak_bytes < 8 * 1024 * 1024


def test_step_lines_can_be_counted_without_being_read() -> None:
    path = EXAMPLES / "sacct_all.psv"
    with path.open() as handle:
        full = list(parse_sacct(handle))
    with path.open() as handle:
        counted = list(parse_sacct(handle, steps=False))
    assert len(full) == len(counted)
    for parsed, quick in zip(full, counted, strict=True):
        assert parsed.line_number == quick.line_number
        is_step = isinstance(parsed, SacctRecord) and parsed.kind == "step"
        assert is_step == isinstance(quick, SacctStep)
        if not isinstance(quick, SacctStep):
            assert quick == parsed


def test_a_broken_step_line_is_still_an_error_when_steps_are_only_counted() -> None:
    items = list(parse_sacct([HEADER, "1.batch|1.batch|x"], steps=False))
    assert isinstance(items[0], SacctLineError)


# --------------------------------------------------------------------------------------
# --noheader dumps read with the column list they were made with


def test_a_noheader_dump_is_read_with_the_columns_given() -> None:
    lines = (EXAMPLES / "sacct_allocations.psv").read_text().splitlines()
    columns = lines[0].replace("|", ",")

    with_header = list(parse_sacct(lines))
    without = list(parse_sacct(lines[1:], columns=columns))

    assert len(without) == len(with_header) == 225
    assert [r.line_number for r in without] == [r.line_number - 1 for r in with_header]
    assert [dataclasses.replace(r, line_number=0) for r in without] == [
        dataclasses.replace(r, line_number=0) for r in with_header
    ]


def test_a_noheader_dump_without_columns_says_how_to_read_it() -> None:
    lines = (EXAMPLES / "sacct_allocations.psv").read_text().splitlines()

    with pytest.raises(SacctHeaderError, match="--noheader dump give the columns"):
        parse_sacct(lines[1:])


def test_a_column_list_with_an_empty_name_is_refused() -> None:
    with pytest.raises(SacctHeaderError, match="empty name"):
        parse_sacct([], columns="JobID,,JobIDRaw")

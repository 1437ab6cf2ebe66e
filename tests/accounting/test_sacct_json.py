"""The ``sacct --json`` reader against the real Slurm 22.05 dump and per-version fixtures.

Pure tests: no database, no settings.
"""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from accounting.ledger.sacct import (
    SacctHeaderError,
    SacctLineError,
    SacctRecord,
    SacctStep,
    parse_sacct,
)
from accounting.ledger.sacct_json import (
    INVALID_JSON_REASON,
    JSON_HEADER,
    detect_format,
    job_lines,
    parse_sacct_json,
)

DATA = Path(__file__).resolve().parents[2] / "examples" / "sacct"
SACCT_JSON = DATA / "sacct.json"
# sacct.json is `sacct -a --json` over the same window as sacct_all_duplicates.psv: the JSON
# lists requeued incarnations even without --duplicates, so that is the dump with the same
# 227 allocations and 506 steps (733 rows).
SACCT_PSV = DATA / "sacct_all_duplicates.psv"
UIDS = DATA / "uids.txt"


TYPED_FIELDS = (
    "job_id",
    "job_id_raw",
    "kind",
    "step",
    "user",
    "account",
    "partition",
    "qos",
    "job_name",
    "state",
    "cancelled_by_uid",
    "exit_code",
    "submit",
    "start",
    "end",
    "elapsed_seconds",
    "nnodes",
    "ncpus",
    "nodes",
    "cpus",
    "memory_mb",
    "gpus",
    "billing",
    "req_mem_mb",
    "timelimit_minutes",
    "consumed_energy_joules",
    "array_job_id",
    "array_task_id",
    "het_job_id",
    "het_offset",
    "alloc_tres",
    "req_tres",
)


def _user_ids() -> dict[str, int]:
    pairs = (line.strip().split(":") for line in UIDS.read_text().splitlines() if line.strip())
    return {name: int(uid) for name, uid in pairs}


def _json_records(**options) -> list:
    with SACCT_JSON.open("rb") as stream:
        return list(parse_sacct_json(stream, user_ids=_user_ids(), **options))


def _psv_records() -> list:
    with SACCT_PSV.open() as stream:
        return list(parse_sacct(stream))


def _by_run(records: list) -> dict:
    # The JSON lists jobs in another order than sacct's text; a requeued job's two runs share
    # JobIDRaw (and so do their steps), the start tells them apart.
    keyed = {(record.job_id_raw, record.start): record for record in records}
    assert len(keyed) == len(records)
    return keyed


# --------------------------------------------------------------------------------------
# The real dump


def test_every_json_job_and_step_becomes_a_record_like_the_psv_row():
    json_records = _json_records()
    psv_records = _psv_records()

    assert all(isinstance(record, SacctRecord) for record in json_records)
    assert len(json_records) == len(psv_records) == 733
    assert _by_run(json_records).keys() == _by_run(psv_records).keys()


def test_json_records_equal_psv_records_field_by_field_except_lost_exit_statuses():
    json_by_run = _by_run(_json_records())
    exit_code_losses = []
    for key, expected in _by_run(_psv_records()).items():
        actual = json_by_run[key]
        for name in TYPED_FIELDS:
            if name == "exit_code" and actual.exit_code != expected.exit_code:
                exit_code_losses.append((expected.exit_code, actual.exit_code))
                continue
            assert getattr(actual, name) == getattr(expected, name), (key, name)

    # dbv0.0.38 writes every normal exit as SUCCESS with return code 0 (Slurm's dumper), so
    # exit statuses other than 0 cannot be read from this JSON: 24 rows, all N:0 with N > 0.
    assert len(exit_code_losses) == 24
    assert all(json_code == "0:0" for _, json_code in exit_code_losses)
    assert all(text.endswith(":0") and text != "0:0" for text, _ in exit_code_losses)


def test_synthesized_lines_are_the_psv_text_apart_from_times_and_lost_exit_statuses():
    psv_columns = SACCT_PSV.open().readline().rstrip("\n").split("|")
    json_columns = JSON_HEADER.split("|")
    json_by_run = _by_run(_json_records())
    for key, expected in _by_run(_psv_records()).items():
        text = dict(zip(psv_columns, expected.raw.split("|"), strict=True))
        synthesized = dict(zip(json_columns, json_by_run[key].raw.split("|"), strict=True))
        for column in json_columns:
            if column in {"Cluster", "Submit", "Start", "End"} or (
                column == "ExitCode" and text[column] != "0:0"
            ):
                continue
            assert synthesized[column] == text[column], (key, column)


def test_cancelled_jobs_name_the_uid_that_cancelled_them():
    cancelled = {
        r.job_id: r for r in _json_records() if r.state == "CANCELLED" and r.kind != "step"
    }

    assert cancelled["1332654"].state_raw == "CANCELLED by 0"
    assert cancelled["1332618"].cancelled_by_uid == 20001


def test_without_user_ids_only_root_is_known_as_canceller():
    with SACCT_JSON.open("rb") as stream:
        records = {r.job_id: r for r in parse_sacct_json(stream)}

    assert records["1332654"].cancelled_by_uid == 0
    assert records["1332618"].state_raw == "CANCELLED"
    assert records["1332618"].cancelled_by_uid is None


def test_steps_false_yields_bare_steps_with_the_same_line_numbers():
    full = _json_records()
    counted = _json_records(steps=False)

    assert [r.line_number for r in counted] == [r.line_number for r in full]
    assert [isinstance(r, SacctStep) for r in counted] == [r.kind == "step" for r in full]


def test_line_numbers_follow_the_synthesized_text_with_the_header_first():
    records = _json_records()

    assert [r.line_number for r in records] == list(range(2, 2 + len(records)))
    assert records[0].cluster == "setonix"


# --------------------------------------------------------------------------------------
# Junk and broken input


def _jobs_stream(*jobs: object, tail: str = "]}") -> io.BytesIO:
    body = ",".join(json.dumps(job) for job in jobs)
    return io.BytesIO(f'{{"meta": {{}}, "errors": [], "jobs": [{body}{tail}'.encode())


def _v38_job(**changes: object) -> dict:
    job = json.loads(json.dumps(V38_JOB))
    job.update(changes)
    return job


def test_junk_job_objects_yield_line_errors_and_the_stream_goes_on():
    no_start = _v38_job(time={**V38_JOB["time"], "start": "soon"})
    no_user = _v38_job()
    del no_user["user"]
    bad_step = _v38_job(steps=[{"step": {"id": []}}])

    results = list(parse_sacct_json(_jobs_stream(no_start, 42, no_user, bad_step, _v38_job())))

    errors = [r for r in results if isinstance(r, SacctLineError)]
    assert [e.reason for e in errors] == [
        "JSON job #1: time.start is not a number",
        "JSON job #2: the job is not an object",
        "JSON job #3: user is missing",
        "JSON job #4: steps[0].step.id is not a step id",
    ]
    assert [e.line_number for e in errors] == [2, 3, 4, 5]
    assert errors[1].raw == "42"
    assert '"start":"soon"' in errors[0].raw
    assert [r.job_id for r in results if isinstance(r, SacctRecord)][:2] == [
        "1332642_3",
        "1332642_3.batch",
    ]


def test_a_huge_bad_job_keeps_a_bounded_raw():
    huge = _v38_job(name=None, comment="x" * 100_000, time=None)

    (error, *_) = parse_sacct_json(_jobs_stream(huge))

    assert isinstance(error, SacctLineError)
    assert error.reason == "JSON job #1: time is not an object"
    assert len(error.raw) <= 2000


def test_broken_json_after_some_jobs_yields_one_error_and_stops():
    results = list(parse_sacct_json(_jobs_stream(_v38_job(), tail=', {"job_id": 1, !!! ]}')))

    *records, error = results
    assert all(isinstance(r, SacctRecord) for r in records)
    assert len(records) == 4
    assert isinstance(error, SacctLineError)
    assert error.reason.startswith(INVALID_JSON_REASON)
    assert error.line_number == 6


def test_input_without_a_jobs_array_is_not_sacct_json():
    with pytest.raises(SacctHeaderError, match='no "jobs" array'):
        parse_sacct_json(io.BytesIO(b'{"meta": {}, "errors": []}'))
    with pytest.raises(SacctHeaderError):
        parse_sacct_json(io.BytesIO(b"JobID|JobIDRaw\n1|1\n"))


def test_an_empty_jobs_array_yields_nothing():
    assert list(parse_sacct_json(io.BytesIO(b'\xef\xbb\xbf{"jobs": [], "errors": []}'))) == []


def test_a_pipe_in_a_job_name_keeps_the_line_shape():
    (record, *_) = parse_sacct_json(_jobs_stream(_v38_job(name="a|b")))

    assert isinstance(record, SacctRecord)
    assert record.job_name == "a\u00a6b"


def test_text_streams_are_read_too():
    text = _jobs_stream(_v38_job()).getvalue().decode()

    assert len(list(parse_sacct_json(io.StringIO(text)))) == 4


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        (b'{"meta"', "json"),
        (b'\xef\xbb\xbf \n {"jobs"', "json"),
        ("\ufeff{", "json"),
        (b"JobID|JobIDRaw", "parsable"),
        ("", "parsable"),
        (b"\n\n", "parsable"),
    ],
)
def test_detect_format_looks_at_the_first_character(chunk, expected):
    assert detect_format(chunk) == expected


# --------------------------------------------------------------------------------------
# Memory


class _GeneratedJson(io.RawIOBase):
    """A file object over a generator: the JSON text never exists in memory as a whole."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.pending = b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.pending) < size:
            chunk = next(self.chunks, None)
            if chunk is None:
                break
            self.pending += chunk
        if size < 0:
            size = len(self.pending)
        data, self.pending = self.pending[:size], self.pending[size:]
        return data


_SMALL_JOB = json.dumps(
    {
        "job_id": 0,
        "user": "alice",
        "account": "acct",
        "partition": "work",
        "nodes": "nid1001",
        "allocation_nodes": 1,
        "state": {"current": ["COMPLETED"]},
        "time": {"submission": 1795312917, "start": 1795312917, "end": 1, "elapsed": 6},
        "tres": {"allocated": [{"type": "cpu", "name": "", "id": 1, "count": 2}]},
    }
)


def _many_jobs(count: int) -> Iterator[bytes]:
    # Ends and job ids differ per job, so no cache can make the stream look small.
    template = _SMALL_JOB.replace('"job_id": 0', '"job_id": %d').replace('"end": 1', '"end": %d')
    yield b'{"meta": {}, "jobs": ['
    for number in range(count):
        job = template % (1000 + number, 1795312923 + number)
        yield (b"," if number else b"") + job.encode()
    yield b"]}"


def test_memory_stays_flat_over_forty_thousand_jobs():
    stream = _GeneratedJson(_many_jobs(40_000))
    tracemalloc.start()
    try:
        count = 0
        for record in parse_sacct_json(stream):
            assert isinstance(record, SacctRecord)
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert count == 40_000
    # The generated document is about 25 MB and its 40,000 records would take far more; the
    # reader holds one 1 MiB chunk of text (twice while it appends the next) and one job.
    assert peak < 10 * 1024 * 1024


# --------------------------------------------------------------------------------------
# One fixture per data_parser version.
#
# These job objects are CONSTRUCTED, not captured: each follows what Slurm's dumper of that
# version writes (src/plugins/openapi/dbv0.0.3{7,8}/parse.c for 21.08 and 22.05,
# src/plugins/data_parser/v0.0.{39..43}/parsers.c for 23.02 to 25.05), cut down to the keys
# the reader looks at. All describe one job: array task 1332642_3 (JobIDRaw 1332642),
# cancelled by alice while running, with .batch (killed by SIGTERM), .extern and a step .0
# that exited 1.

V38_JOB = {
    "account": "pawsey0001",
    "allocation_nodes": 1,
    "array": {
        "job_id": 1332642,
        "limits": {"max": {"running": {"tasks": 0}}},
        "task": None,
        "task_id": 3,
    },
    "cluster": "setonix",
    "exit_code": {"status": "SUCCESS", "return_code": 0},
    "het": {"job_id": 0, "job_offset": None},
    "job_id": 1332642,
    "name": "array",
    "nodes": "nid1001",
    "partition": "work",
    "qos": "normal",
    "kill_request_user": "alice",
    "state": {"current": "CANCELLED", "reason": "None"},
    "time": {
        "elapsed": 12,
        "eligible": 1795312917,
        "end": 1795312929,
        "start": 1795312917,
        "submission": 1795312900,
        "suspended": 0,
        "limit": 10,
    },
    "tres": {
        "allocated": [
            {"type": "cpu", "name": None, "id": 1, "count": 2},
            {"type": "mem", "name": None, "id": 2, "count": 3828},
            {"type": "node", "name": None, "id": 4, "count": 1},
            {"type": "billing", "name": None, "id": 5, "count": 2},
        ],
        "requested": [
            {"type": "cpu", "name": None, "id": 1, "count": 2},
            {"type": "mem", "name": None, "id": 2, "count": 3828},
            {"type": "node", "name": None, "id": 4, "count": 1},
            {"type": "billing", "name": None, "id": 5, "count": 2},
        ],
    },
    "user": "alice",
    "steps": [
        {
            "nodes": {"list": ["nid1001"], "count": 1, "range": "nid1001"},
            "tres": {
                "allocated": [
                    {"type": "cpu", "name": None, "id": 1, "count": 2},
                    {"type": "mem", "name": None, "id": 2, "count": 3828},
                    {"type": "node", "name": None, "id": 4, "count": 1},
                ]
            },
            "time": {"elapsed": 12, "end": 1795312929, "start": 1795312917},
            "exit_code": {
                "status": "SIGNALED",
                "return_code": None,
                "signal": {"signal_id": 15, "name": "Terminated"},
            },
            "kill_request_user": None,
            "state": "CANCELLED",
            "statistics": {"energy": {"consumed": 0}},
            "step": {"job_id": 1332642, "het": {"component": None}, "id": "batch", "name": "batch"},
        },
        {
            "nodes": {"list": ["nid1001"], "count": 1, "range": "nid1001"},
            "tres": {
                "allocated": [
                    {"type": "billing", "name": None, "id": 5, "count": 2},
                    {"type": "cpu", "name": None, "id": 1, "count": 2},
                    {"type": "mem", "name": None, "id": 2, "count": 3828},
                    {"type": "energy", "name": None, "id": 3, "count": None},
                    {"type": "node", "name": None, "id": 4, "count": 1},
                ]
            },
            "time": {"elapsed": 12, "end": 1795312929, "start": 1795312917},
            "exit_code": {"status": "SUCCESS", "return_code": 0},
            "kill_request_user": None,
            "state": "COMPLETED",
            "statistics": {"energy": {"consumed": 0}},
            "step": {
                "job_id": 1332642,
                "het": {"component": None},
                "id": "extern",
                "name": "extern",
            },
        },
        {
            "nodes": {"list": ["nid1001"], "count": 1, "range": "nid1001"},
            "tres": {
                "allocated": [
                    {"type": "cpu", "name": None, "id": 1, "count": 1},
                    {"type": "mem", "name": None, "id": 2, "count": 1914},
                    {"type": "node", "name": None, "id": 4, "count": 1},
                ]
            },
            "time": {"elapsed": 2, "end": 1795312920, "start": 1795312918},
            # dbv0.0.37 to v0.0.39 write exit 1 as SUCCESS with return code 0.
            "exit_code": {"status": "SUCCESS", "return_code": 0},
            "kill_request_user": None,
            "state": "FAILED",
            "statistics": {"energy": {"consumed": 0}},
            "step": {"job_id": 1332642, "het": {"component": None}, "id": 0, "name": "false"},
        },
    ],
}


def _no_val(number: int | None, *, infinite: bool = False) -> dict:
    # UINT32_NO_VAL / UINT64_NO_VAL / TIMESTAMP_NO_VAL from v0.0.39 on.
    if number is None:
        return {"set": False, "infinite": infinite, "number": 0}
    return {"set": True, "infinite": False, "number": number}


def _v39_job() -> dict:
    # 23.02: numbers that may be unset become {set, infinite, number}; step.id is an object
    # whose step_id is a string; states and exit codes are still dbv0.0.38's.
    job = json.loads(json.dumps(V38_JOB))
    job["array"]["task_id"] = _no_val(3)
    job["het"]["job_offset"] = _no_val(None)
    job["time"]["limit"] = _no_val(10)
    for step in job["steps"]:
        name = step["step"].pop("id")
        del step["step"]["het"]
        step["step"]["id"] = {"job_id": 1332642, "step_id": str(name)}
        step["statistics"]["energy"]["consumed"] = _no_val(0)
        if step["exit_code"]["status"] == "SIGNALED":
            step["exit_code"]["return_code"] = -127
    return job


def _v40_job() -> dict:
    # 23.11 to 25.05: states are flag lists, exit codes name their status in a list and
    # carry return_code and signal.id as {set, infinite, number}, step.id is "<job>.<step>",
    # step times are TIMESTAMP_NO_VAL, and step .0's exit 1 is finally written as such.
    job = _v39_job()
    job["state"]["current"] = ["CANCELLED"]
    job["exit_code"] = {
        "status": ["SUCCESS"],
        "return_code": _no_val(0),
        "signal": {"id": _no_val(None), "name": ""},
    }
    batch, extern, srun = job["steps"]
    batch["exit_code"] = {
        "status": ["SIGNALED"],
        "return_code": _no_val(None),
        "signal": {"id": _no_val(15), "name": "SIGTERM"},
    }
    extern["exit_code"] = job["exit_code"]
    srun["exit_code"] = {
        "status": ["ERROR"],
        "return_code": _no_val(1),
        "signal": {"id": _no_val(None), "name": ""},
    }
    for step in job["steps"]:
        step["state"] = [step["state"]]
        step["step"]["id"] = f"1332642.{step['step']['id']['step_id']}"
        for key in ("start", "end"):
            step["time"][key] = _no_val(step["time"][key])
        for item in step["tres"]["allocated"]:
            item["name"] = ""
    for item in job["tres"]["allocated"] + job["tres"]["requested"]:
        item["name"] = ""
    job["required"] = {"CPUs": 2, "memory_per_cpu": _no_val(1914), "memory_per_node": _no_val(None)}
    return job


def _document(plugin: str, job: dict) -> bytes:
    meta = {"plugin": {"type": "", "name": "", "data_parser": plugin}}
    if plugin.startswith("dbv"):
        meta = {"plugin": {"type": f"openapi/{plugin}", "name": "Slurm OpenAPI DB"}}
    return json.dumps({"meta": meta, "errors": [], "warnings": [], "jobs": [job]}).encode()


VERSION_FIXTURES = {
    "dbv0.0.37": V38_JOB,
    "dbv0.0.38": V38_JOB,
    "v0.0.39": _v39_job(),
    "v0.0.40": _v40_job(),
    "v0.0.41": _v40_job(),
    "v0.0.42": _v40_job(),
    "v0.0.43": _v40_job(),
}

EXPECTED_LINES = [
    "setonix|1332642_3|1332642|array|alice|pawsey0001|work|normal|CANCELLED by 20001|0:0"
    "|2026-11-22T02:01:40+00:00|2026-11-22T02:01:57+00:00|2026-11-22T02:02:09+00:00|12|1|2"
    "|nid1001|billing=2,cpu=2,mem=3828M,node=1|billing=2,cpu=2,mem=3828M,node=1|3828M|0|10",
    "setonix|1332642_3.batch|1332642.batch|batch||pawsey0001|||CANCELLED|0:15"
    "|2026-11-22T02:01:57+00:00|2026-11-22T02:01:57+00:00|2026-11-22T02:02:09+00:00|12|1|2"
    "|nid1001||cpu=2,mem=3828M,node=1||0|",
    "setonix|1332642_3.extern|1332642.extern|extern||pawsey0001|||COMPLETED|0:0"
    "|2026-11-22T02:01:57+00:00|2026-11-22T02:01:57+00:00|2026-11-22T02:02:09+00:00|12|1|2"
    "|nid1001||billing=2,cpu=2,mem=3828M,node=1||0|",
    "setonix|1332642_3.0|1332642.0|false||pawsey0001|||FAILED|{exit}"
    "|2026-11-22T02:01:58+00:00|2026-11-22T02:01:58+00:00|2026-11-22T02:02:00+00:00|2|1|1"
    "|nid1001||cpu=1,mem=1914M,node=1||0|",
]


@pytest.mark.parametrize("plugin", sorted(VERSION_FIXTURES))
def test_each_data_parser_version_gives_the_same_lines(plugin):
    # Exit 1 of step .0 survives only from v0.0.40 on.
    step_exit = "0:0" if plugin in {"dbv0.0.37", "dbv0.0.38", "v0.0.39"} else "1:0"
    expected = [line.replace("{exit}", step_exit) for line in EXPECTED_LINES]

    assert job_lines(VERSION_FIXTURES[plugin], user_ids={"alice": 20001}) == expected


@pytest.mark.parametrize("plugin", sorted(VERSION_FIXTURES))
def test_each_data_parser_version_gives_the_expected_records(plugin):
    stream = io.BytesIO(_document(plugin, VERSION_FIXTURES[plugin]))

    job, batch, extern, srun = parse_sacct_json(stream, user_ids={"alice": 20001})

    assert isinstance(job, SacctRecord)
    assert (job.job_id, job.job_id_raw, job.array_job_id, job.array_task_id) == (
        "1332642_3",
        "1332642",
        "1332642",
        "3",
    )
    assert (job.state, job.cancelled_by_uid, job.exit_code) == ("CANCELLED", 20001, "0:0")
    assert job.start == datetime(2026, 11, 22, 2, 1, 57, tzinfo=UTC)
    assert (job.cpus, job.memory_mb, job.billing, job.req_mem_mb) == (
        2,
        Decimal(3828),
        Decimal(2),
        Decimal(3828),
    )
    assert job.timelimit_minutes == 10
    assert [batch.step, extern.step, srun.step] == ["batch", "extern", "0"]
    assert (batch.state, batch.exit_code) == ("CANCELLED", "0:15")
    assert srun.state == "FAILED"
    assert srun.line_number == 5


def test_het_components_and_het_steps_get_sacct_job_ids():
    job = _v40_job()
    job["array"] = {"job_id": 0, "task": None, "task_id": _no_val(None)}
    job["het"] = {"job_id": 1332628, "job_offset": _no_val(1)}
    job["job_id"] = 1332629
    job["steps"] = job["steps"][2:]
    job["steps"][0]["step"]["id"] = "1332629.1+1"

    first, step = job_lines(job)

    assert first.split("|")[1:3] == ["1332628+1", "1332629"]
    assert step.split("|")[1:3] == ["1332628+1.1+1", "1332629.1+1"]


def test_state_flags_are_printed_like_job_state_string():
    job = _v40_job()
    job["state"]["current"] = ["COMPLETED", "REQUEUED"]
    job["steps"] = []

    (line,) = job_lines(job)

    assert line.split("|")[8] == "REQUEUED"


def test_unset_times_and_limits_read_as_unknown_and_unlimited():
    job = _v40_job()
    job["time"].update(start=0, end=0, limit=_no_val(None, infinite=True))
    job["steps"] = []

    (record,) = parse_sacct_json(io.BytesIO(_document("v0.0.41", job)))

    assert isinstance(record, SacctRecord)
    assert (record.start, record.end, record.timelimit_minutes) == (None, None, None)
    assert record.raw.split("|")[-1] == "UNLIMITED"


@pytest.mark.parametrize(
    ("megabytes", "text"),
    [(1914, "1914M"), (102400, "100G"), (489984, "478.50G"), (1049088, "1024.50G"), (0, "0")],
)
def test_memory_is_written_like_sacct_without_rounding(megabytes, text):
    job = _v40_job()
    job["tres"]["requested"] = [{"type": "mem", "name": "", "id": 2, "count": megabytes}]
    job["steps"] = []

    (line,) = job_lines(job)

    assert line.split("|")[19] == text

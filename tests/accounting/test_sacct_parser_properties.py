"""Property tests for the sacct parser: whatever the input, one object per line and no raise."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting.clusters.units import parse_memory_mb
from accounting.ledger.sacct import (
    SacctLineError,
    SacctRecord,
    parse_elapsed,
    parse_sacct,
    parse_sacct_time,
    parse_tres,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sacct"
REAL_LINES = (EXAMPLES / "sacct_all_allstates.psv").read_text().splitlines()
HEADER, REAL_ROWS = REAL_LINES[0], REAL_LINES[1:]
COLUMNS = HEADER.split("|")
MEMORY_UNITS_MB = {
    "K": Decimal(1) / 1024,
    "M": Decimal(1),
    "G": Decimal(1024),
    "T": Decimal(1024**2),
}
ZONES = [UTC, ZoneInfo("Australia/Perth"), ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")]

# Hypothesis runs each property many times; the parser's first call warms its caches.
PROPERTY_SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

digits = st.integers(min_value=0, max_value=10**9).map(str)
garbage = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\n\r"),
    max_size=40,
)


def parse_all(lines: list[str]) -> list[SacctRecord | SacctLineError]:
    return list(parse_sacct([HEADER, *lines]))


def assert_one_object_per_line(lines: list[str]) -> list[SacctRecord | SacctLineError]:
    parsed = parse_all(lines)
    assert len(parsed) == len(lines)
    assert [item.line_number for item in parsed] == list(range(2, len(lines) + 2))
    for item, line in zip(parsed, lines, strict=True):
        assert isinstance(item, SacctRecord | SacctLineError)
        assert item.raw == line
        if isinstance(item, SacctLineError):
            assert item.reason
            assert item.field is None or item.field in COLUMNS
    return parsed


# --------------------------------------------------------------------------------------
# Generated valid lines


@st.composite
def job_ids(draw: st.DrawFn) -> tuple[str, str, str]:
    """(JobID, JobIDRaw, kind) in every shape sacct prints."""
    job = draw(st.integers(min_value=1, max_value=2**31))
    raw = draw(st.integers(min_value=1, max_value=2**31))
    shape = draw(st.sampled_from(["plain", "array", "pending", "het"]))
    if shape == "plain":
        base, raw_base = str(job), str(job)
    elif shape == "array":
        base, raw_base = f"{job}_{draw(st.integers(0, 10**6))}", str(raw)
    elif shape == "pending":
        base, raw_base = (
            f"{job}_[{draw(st.integers(0, 99))}-{draw(st.integers(100, 999))}%1]",
            str(job),
        )
    else:
        base, raw_base = f"{job}+{draw(st.integers(0, 9))}", str(raw)
    if shape != "pending" and draw(st.booleans()):
        step = draw(st.sampled_from(["batch", "extern", "interactive"]) | digits)
        return f"{base}.{step}", f"{raw_base}.{step}", "step"
    return base, raw_base, "allocation"


times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)).map(
    lambda moment: moment.replace(microsecond=0).isoformat()
)
memories = st.builds(
    lambda number, unit: f"{number}{unit}",
    st.integers(0, 10**7),
    st.sampled_from(["", "K", "M", "G", "T"]),
)
states = st.sampled_from(
    ["COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "RUNNING"]
) | st.integers(0, 2**32).map(lambda uid: f"CANCELLED by {uid}")


@st.composite
def valid_rows(draw: st.DrawFn) -> dict[str, str]:
    job_id, job_id_raw, _ = draw(job_ids())
    cpus, gpus, elapsed = draw(digits), draw(st.integers(0, 64)), draw(st.integers(0, 10**8))
    tres = f"billing={draw(digits)},cpu={cpus},gres/gpu={gpus},mem={draw(memories)},node=1"
    first_node = draw(st.integers(0, 9000))
    return {
        "JobID": job_id,
        "JobIDRaw": job_id_raw,
        "JobName": draw(garbage.map(lambda text: text.replace("|", ""))),
        "User": draw(st.sampled_from(["", "alice", "root"])),
        "Account": "pawsey0001",
        "Partition": draw(st.sampled_from(["", "work", "gpu"])),
        "QOS": draw(st.sampled_from(["", "normal"])),
        "State": draw(states),
        "ExitCode": draw(st.sampled_from(["", "0:0", "1:0", "0:9"])),
        "Submit": draw(times),
        "Start": draw(times | st.sampled_from(["Unknown", "None"])),
        "End": draw(times | st.just("Unknown")),
        "Elapsed": "00:00:00",
        "ElapsedRaw": str(elapsed),
        "NNodes": "2",
        "NCPUS": cpus,
        "NodeList": f"nid[{first_node:04d}-{first_node + 1:04d}]",
        "ReqTRES": draw(st.sampled_from(["", tres])),
        "AllocTRES": tres,
        "ReqMem": draw(st.sampled_from(["", "1914M", "478.50G"])),
        "ConsumedEnergyRaw": draw(st.sampled_from(["", "0"]) | digits),
        "TimelimitRaw": draw(st.sampled_from(["", "UNLIMITED"]) | digits),
    }


@PROPERTY_SETTINGS
@given(rows=st.lists(valid_rows(), min_size=1, max_size=5))
def test_valid_generated_lines_become_records_with_their_values(rows: list[dict[str, str]]) -> None:
    lines = ["|".join(row[column] for column in COLUMNS) for row in rows]

    parsed = assert_one_object_per_line(lines)

    for record, row in zip(parsed, rows, strict=True):
        assert isinstance(record, SacctRecord), record
        assert (record.job_id, record.job_id_raw) == (row["JobID"], row["JobIDRaw"])
        assert record.kind == ("step" if "." in row["JobIDRaw"] else "allocation")
        assert record.elapsed_seconds == int(row["ElapsedRaw"])
        assert record.cpus == int(row["NCPUS"])
        assert record.memory_mb == parse_memory_mb(parse_tres(row["AllocTRES"])["mem"])
        assert len(record.nodes) == 2
        assert record.submit is not None
        assert record.submit.tzinfo is UTC


# --------------------------------------------------------------------------------------
# Broken lines


@PROPERTY_SETTINGS
@given(lines=st.lists(garbage | st.text(max_size=300), max_size=8))
def test_random_text_never_raises_and_gives_one_object_per_line(lines: list[str]) -> None:
    assert_one_object_per_line([line.replace("\n", " ").replace("\r", " ") for line in lines])


@PROPERTY_SETTINGS
@given(
    row=st.sampled_from(REAL_ROWS),
    column=st.integers(0, len(COLUMNS) - 1),
    value=garbage,
)
def test_a_real_line_with_one_garbage_field_gives_one_object(
    row: str, column: int, value: str
) -> None:
    fields = row.split("|")
    fields[column] = value
    line = "|".join(fields)

    [item] = assert_one_object_per_line([line])

    if isinstance(item, SacctLineError) and "|" not in value:
        assert item.field == COLUMNS[column] or COLUMNS[column] in {"JobID", "JobIDRaw"}


@PROPERTY_SETTINGS
@given(
    row=st.sampled_from(REAL_ROWS),
    drop=st.integers(0, len(COLUMNS) - 1),
    extra=st.integers(1, 3),
)
def test_a_missing_or_extra_field_is_a_line_error_not_an_exception(
    row: str, drop: int, extra: int
) -> None:
    fields = row.split("|")
    shorter = "|".join(fields[:drop] + fields[drop + 1 :])
    longer = row + "|" * extra

    parsed = assert_one_object_per_line([shorter, longer, row])

    assert [type(item) for item in parsed] == [SacctLineError, SacctLineError, SacctRecord]
    assert all(item.field is None for item in parsed[:2] if isinstance(item, SacctLineError))


@PROPERTY_SETTINGS
@given(
    lines=st.lists(
        st.sampled_from(REAL_ROWS) | st.just("") | st.just(HEADER) | garbage, max_size=20
    )
)
def test_mixed_good_and_bad_lines_keep_their_order_and_numbers(lines: list[str]) -> None:
    parsed = assert_one_object_per_line(lines)

    for item, line in zip(parsed, lines, strict=True):
        if line in REAL_ROWS:
            assert isinstance(item, SacctRecord)


# --------------------------------------------------------------------------------------
# Field helpers


@given(number=st.integers(0, 10**12), unit=st.sampled_from(sorted(MEMORY_UNITS_MB)))
def test_memory_with_a_unit_is_the_number_times_a_power_of_1024(number: int, unit: str) -> None:
    assert parse_memory_mb(f"{number}{unit}") == number * MEMORY_UNITS_MB[unit]


@given(
    hundredths=st.integers(0, 10**9),
    unit=st.sampled_from(sorted(MEMORY_UNITS_MB)),
)
def test_fractional_memory_round_trips(hundredths: int, unit: str) -> None:
    text = f"{hundredths // 100}.{hundredths % 100:02d}{unit}"

    memory_mb = parse_memory_mb(text)

    assert memory_mb == Decimal(hundredths) / 100 * MEMORY_UNITS_MB[unit]
    assert parse_memory_mb(str(memory_mb)) == memory_mb


@given(text=garbage)
def test_memory_parser_accepts_only_numbers_with_a_unit(text: str) -> None:
    try:
        memory_mb = parse_memory_mb(text)
    except ValueError:
        return
    assert memory_mb >= 0
    assert memory_mb.is_finite()


def sacct_elapsed(seconds: int) -> str:
    """Format seconds the way sacct prints Elapsed (print.c, _elapsed_time)."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}"


@given(seconds=st.integers(0, 10**9))
def test_elapsed_round_trips_through_sacct_format(seconds: int) -> None:
    assert parse_elapsed(sacct_elapsed(seconds)) == seconds


@given(seconds=st.integers(0, 3599), milliseconds=st.integers(0, 999))
def test_elapsed_with_milliseconds_keeps_whole_seconds(seconds: int, milliseconds: int) -> None:
    text = f"{seconds // 60:02d}:{seconds % 60:02d}.{milliseconds:03d}"

    assert parse_elapsed(text) == seconds


@given(text=garbage)
def test_elapsed_parser_raises_only_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        assert parse_elapsed(text) >= 0


@given(
    tres=st.dictionaries(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz/:", min_size=1, max_size=12),
        st.text(alphabet="0123456789.KMGT", min_size=1, max_size=8),
        max_size=6,
    )
)
def test_tres_string_round_trips(tres: dict[str, str]) -> None:
    text = ",".join(f"{name}={value}" for name, value in tres.items())

    assert parse_tres(text) == tres


@given(
    moment=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1)),
    zone=st.sampled_from(ZONES),
)
def test_sacct_time_is_the_local_wall_time_converted_to_utc(
    moment: datetime, zone: ZoneInfo
) -> None:
    local = moment.replace(microsecond=0)

    parsed = parse_sacct_time(local.isoformat(), zone)

    assert parsed is not None
    assert parsed.tzinfo is UTC
    # Compare wall times: PEP 495 makes a time in a DST gap unequal to any other zone's.
    offset = local.replace(tzinfo=zone, fold=0).utcoffset()
    assert offset is not None
    assert parsed.replace(tzinfo=None) == local - offset
    assert abs(parsed.replace(tzinfo=None) - local) <= timedelta(hours=14)

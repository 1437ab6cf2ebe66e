"""The roll-up deltas of a batch's new rows in columns (``rollups_add_new``) equal those of
``rollup_add`` row by row: the daily, efficiency, shape and hourly sums, key by key, in zones
with DST, with half-hour offsets and with the seconds of local mean time, for jobs spanning
hours, days and months, zero-core, measured and running jobs and sizes the columns leave."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.ledger.rollups import Deltas, _array_param, rollup_add, rollups_add_new
from accounting.models import Job

ZONES = ["UTC", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe", "America/St_Johns"]
# 1850 (local mean time, offsets with seconds) to 2040; most of them in 2024-2026 (DST).
FIRST, LAST = -3_786_825_600, 2_208_988_800
RECENT = (1_704_067_200, 1_798_761_600)


def _amount(quanta: int) -> Decimal:
    return Decimal(quanta).scaleb(-6)


@st.composite
def job_rows(draw: st.DrawFn, zone: ZoneInfo) -> dict[str, Any]:
    start_seconds = draw(
        st.one_of(st.integers(*RECENT), st.integers(FIRST, LAST), st.just(RECENT[0] + 3600))
    )
    duration = draw(
        st.one_of(st.integers(0, 7200), st.integers(0, 45 * 86_400), st.sampled_from([0, 3600]))
    )
    state = draw(st.sampled_from(list(Job.ChargeState)))
    running = state == Job.ChargeState.PENDING and draw(st.booleans())
    start = datetime.fromtimestamp(start_seconds, draw(st.sampled_from([zone, UTC])))
    end = None if running else start + timedelta(seconds=duration)
    joules = draw(st.one_of(st.none(), st.just(0), st.integers(1, 10**12)))
    return {
        "project_id": draw(st.sampled_from([1, 2])),
        "partition_id": draw(st.sampled_from([10, 11])),
        "username": draw(st.sampled_from(["alice", "bob"])),
        "start": start,
        "end": end,
        "elapsed_seconds": draw(st.one_of(st.just(duration), st.integers(0, 10**7))),
        "cpus": draw(st.one_of(st.integers(0, 256), st.just(0), st.just(2**40))),
        "gpus": draw(st.one_of(st.just(0), st.integers(0, 8))),
        "nnodes": draw(st.integers(1, 4)),
        "memory_mb": draw(st.sampled_from([Decimal("1914"), Decimal("1.46484375"), 4096])),
        "service_units": _amount(draw(st.integers(0, 10**15))),
        "energy_wh": _amount(draw(st.integers(0, 10**12))),
        "cost": draw(st.one_of(st.none(), st.just(Decimal("1.25")))),
        "consumed_energy_joules": joules,
        "charge_state": state,
        "right_sized_service_units": None,
    }


@st.composite
def batches(draw: st.DrawFn) -> tuple[ZoneInfo, list[dict[str, Any]]]:
    zone = ZoneInfo(draw(st.sampled_from(ZONES)))
    return zone, draw(st.lists(job_rows(zone), max_size=40))


def _row_by_row(rows: list[dict[str, Any]], zone: ZoneInfo) -> Deltas:
    deltas = Deltas()
    for values in rows:
        rollup_add(deltas, values, zone, +1)
    return deltas


def _in_columns(rows: list[dict[str, Any]], zone: ZoneInfo) -> Deltas:
    deltas = Deltas()
    rollups_add_new(deltas, rows, zone)
    return deltas


def _assert_equal(expected: Deltas, got: Deltas) -> None:
    assert got.daily == expected.daily
    assert got.shapes == expected.shapes
    assert got.hourly == expected.hourly
    assert got.efficiency == expected.efficiency
    assert got.buckets == expected.buckets


@settings(max_examples=300, deadline=None)
@given(batches())
def test_new_rows_in_columns_add_what_each_row_adds(batch: tuple[ZoneInfo, list[Any]]) -> None:
    zone, rows = batch
    _assert_equal(_row_by_row(rows, zone), _in_columns(rows, zone))


def test_a_batch_of_many_jobs_adds_the_same_in_columns() -> None:
    """Many jobs sharing days, shapes and hours (the sums of a group, not one row each), in a
    zone with DST, including the night the clocks go back."""
    zone = ZoneInfo("Europe/Berlin")
    night = datetime(2026, 10, 25, 0, 0, tzinfo=zone)
    rows = []
    for index in range(500):
        start = night + timedelta(minutes=7 * index)
        rows.append(
            {
                "project_id": 1 + index % 3, "partition_id": 10 + index % 2,
                "username": f"user{index % 4}", "start": start,
                "end": start + timedelta(seconds=61 * index + 1),
                "elapsed_seconds": 61 * index + 1, "cpus": 1 + index % 64,
                "gpus": index % 3, "nnodes": 1, "memory_mb": Decimal(1914 + index % 5),
                "service_units": _amount(1_000_001 * index + 7),
                "energy_wh": _amount(333_333 * index),
                "cost": None, "consumed_energy_joules": 3_601 * (index % 2),
                "charge_state": Job.ChargeState.CHARGED if index % 7 else Job.ChargeState.REFUNDED,
                "right_sized_service_units": None,
            }
        )  # fmt: skip
    expected = _row_by_row(rows, zone)
    got = _in_columns(rows, zone)
    _assert_equal(expected, got)
    assert len(got.hourly) > 24
    assert len(got.daily) > 10


def test_local_mean_time_hours_are_split_row_by_row() -> None:
    """Berlin kept its local mean time (+0:53:28) until April 1893: its hours are not UTC
    hours, and a job that ran then is split by the per-row code."""
    zone = ZoneInfo("Europe/Berlin")
    start = datetime(1893, 3, 31, 20, 0, tzinfo=UTC)
    row = {
        "project_id": 1, "partition_id": 10, "username": "alice", "start": start,
        "end": start + timedelta(hours=5), "elapsed_seconds": 18_000, "cpus": 4, "gpus": 0,
        "nnodes": 1, "memory_mb": Decimal(100), "service_units": _amount(5),
        "energy_wh": _amount(1), "cost": None, "consumed_energy_joules": None,
        "charge_state": Job.ChargeState.CHARGED, "right_sized_service_units": None,
    }  # fmt: skip
    expected = _row_by_row([row], zone)
    assert any(hour.minute for _, hour in expected.hourly)  # not on UTC hours
    _assert_equal(expected, _in_columns([row], zone))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "column"),
    [
        ("bigint", (0, -1, 2**62, 7)),
        ("numeric", (Decimal("1E+1"), Decimal("-0.000001"), Decimal("-0"), Decimal("12.500000"))),
        ("date", (date(1970, 1, 2), date(2026, 2, 28), date(9999, 12, 31))),
    ],
)
def test_an_upsert_column_sent_as_array_text_reads_as_its_values(kind, column) -> None:
    """The roll-ups' upserts send a column of numbers or dates as the text of its array: the
    database reads the same values as from the list the driver adapts."""
    if connection.vendor != "postgresql":
        pytest.skip("arrays are PostgreSQL's")
    param = _array_param(column)
    assert isinstance(param, str)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT %s::{kind}[] = %s::{kind}[], %s::{kind}[]::text", [param, list(column), param]
        )
        same, text = cursor.fetchone()
    assert same
    assert text.count(",") == len(column) - 1


def test_an_upsert_column_of_text_or_mixed_values_is_left_to_the_driver() -> None:
    for column in (("alice", "bob"), (1, None), (1, True), (Decimal("NaN"),), (1, Decimal(1))):
        assert isinstance(_array_param(column), list)

"""COPY text built a column at a time (``kit.pg_copy.copy_text``) reads back as the same values
as psycopg's ``write_row`` of each row: awkward strings, NULLs, decimals of any exponent,
times in any zone, whole numbers and JSON text, into the ledger's own column types."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.db.models import TextChoices
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.pg_copy import copy_text

# A column of each type the import writes, as the ledger declares it.
COLUMNS = {
    "job_id_raw": "varchar(64) NOT NULL",
    "nodelist": "text",
    "het_offset": "integer",
    "elapsed_seconds": "bigint",
    "memory_mb": "numeric(14, 3)",
    "service_units": "numeric(20, 6)",
    "billing": "numeric(20, 6)",
    "end": "timestamptz",
    "warnings": "jsonb",
    "charge_state": "varchar(16)",
}


class Outcome(StrEnum):
    CHARGED = "charged"


class Choice(TextChoices):
    REFUNDED = "refunded", "not charged by policy"


ZONES = [UTC, ZoneInfo("Europe/Berlin"), ZoneInfo("Asia/Kolkata"), ZoneInfo("America/St_Johns")]

texts = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=20,
) | st.sampled_from(["\\", "\\N", "\\.", "a\tb", "a\nb", "a\rb", "\\\\t", ""])
decimals = st.decimals(
    min_value=Decimal("-99999999"), max_value=Decimal("99999999"), allow_nan=False,
    allow_infinity=False, places=None,
).map(lambda value: value.quantize(Decimal("0.00000001")))  # fmt: skip
times = st.builds(
    lambda seconds, zone: datetime.fromtimestamp(seconds, zone),
    st.integers(-30_000_000_000, 250_000_000_000),
    st.sampled_from(ZONES),
)


@st.composite
def rows(draw: st.DrawFn) -> tuple[Any, ...]:
    exponent = draw(st.sampled_from([0, -3, -6, 2]))
    return (
        draw(texts.filter(bool)),
        draw(st.none() | texts),
        draw(st.none() | st.integers(0, 32767)),
        draw(st.integers(0, 2**62)),
        draw(decimals),
        draw(st.integers(0, 10**11).map(lambda quanta: Decimal(quanta).scaleb(exponent))),
        draw(st.none() | decimals),
        draw(st.none() | times),
        draw(st.sampled_from(["[]", '["ReqMem per CPU"]', '["a\\tb \\\\ \\"q\\""]'])),
        draw(st.sampled_from([Outcome.CHARGED, Choice.REFUNDED, "pending"])),
    )


def _copied(table: str, values: list[tuple[Any, ...]], *, by_columns: bool) -> list[Any]:
    names = ", ".join(f'"{name}"' for name in COLUMNS)
    with connection.cursor() as cursor:
        declared = ", ".join(f'"{name}" {kind}' for name, kind in COLUMNS.items())
        cursor.execute(f"CREATE TEMP TABLE {table} (n serial, {declared})")
        with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            if by_columns:
                payload = copy_text([list(column) for column in zip(*values, strict=True)])
                assert payload is not None
                copy.write(payload)
            else:
                for row in values:
                    copy.write_row(row)
        cursor.execute(f"SELECT {names} FROM {table} ORDER BY n")  # noqa: S608
        copied = cursor.fetchall()
        cursor.execute(f"DROP TABLE {table}")
    return copied


@pytest.mark.django_db
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rows(), min_size=1, max_size=30))
def test_rows_copied_by_columns_read_back_as_written_row_by_row(
    values: list[tuple[Any, ...]],
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("COPY is PostgreSQL's")
    expected = _copied("copy_by_rows", values, by_columns=False)
    assert _copied("copy_by_columns", values, by_columns=True) == expected


@pytest.mark.parametrize(
    "column",
    [
        [True, False],  # bool is not formatted as a number
        [1.5],  # floats are left to psycopg
        [1, "1"],  # mixed types
        [Decimal("NaN")],
        [datetime(2026, 1, 1)],  # naive
        ["a\x00b"],  # a NUL: write_row refuses it as before
        ["\ud800"],  # not UTF-8
        [[]],
    ],
)
def test_a_column_of_another_type_is_left_to_write_row(column: list[Any]) -> None:
    assert copy_text([column]) is None


def test_nulls_numbers_and_escapes_are_spelled_as_copy_reads_them() -> None:
    payload = copy_text(
        [[None, None], [1, None], ["a\\b\tc", "d\ne\rf"], [Decimal("1.500"), Decimal("2E+1")]]
    )
    assert payload == b"\\N\t1\ta\\\\b\\tc\t1.500\n\\N\t\\N\td\\ne\\rf\t2E+1\n"
    assert copy_text([[], []]) == b""

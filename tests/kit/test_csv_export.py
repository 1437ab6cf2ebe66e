"""CSV formula injection (issue 32): the one helper every CSV of the portal is written with,
and a scan of the code that fails on a CSV writer not made by it. The export paths themselves
are in tests/accounting/test_csv_injection.py."""

from __future__ import annotations

import ast
import csv
import io
from decimal import Decimal
from pathlib import Path

import pytest

from kit.csv_export import csv_cell, csv_writer

ROOT = Path(__file__).resolve().parents[2]
# The portal's packages (docs/architecture.md). benchmarks/ and scripts/ are tools of the
# developers, not exports of the portal; tests/ read CSV back.
PORTAL_PACKAGES = ("accounting", "allocations", "kit", "people", "portal", "projects")
THE_HELPER = ROOT / "kit" / "csv_export.py"
WRITERS = {"writer", "DictWriter"}

# OWASP's five, from the review of issue 32.
PAYLOADS = (
    '=HYPERLINK("http://x","y")',
    "+1+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+9)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_cell_that_begins_like_a_formula_becomes_text(payload):
    assert csv_cell(payload) == "'" + payload


@pytest.mark.parametrize("value", ["plain", "", "a=b", "x-1", " =1", "2026-11-22T00:00:00Z"])
def test_other_text_is_unchanged(value):
    assert csv_cell(value) == value


@pytest.mark.parametrize("value", [-5, Decimal("-5.25"), -0.5, 0, None, True])
def test_numbers_stay_numbers(value):
    assert csv_cell(value) is value


@pytest.mark.parametrize("text", ["-5", "-0.25", "+3", "-1e3", "-.5"])
def test_text_that_is_a_plain_number_stays_a_number(text):
    """The portal formats some numbers before writing them: -5 is no formula."""
    assert csv_cell(text) == text


def test_anything_else_is_written_as_its_text_and_neutralised():
    class Named:
        def __str__(self) -> str:
            return "=1+1"

    assert csv_cell(Named()) == "'=1+1"


def test_the_writer_neutralises_every_cell_and_reads_back_as_written():
    out = io.StringIO()
    writer = csv_writer(out, lineterminator="\n")
    writer.writerow(["name", "su"])
    writer.writerows([[payload, Decimal("-5")] for payload in PAYLOADS])
    rows = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert rows[0] == ["name", "su"]
    assert [row[0] for row in rows[1:]] == ["'" + payload for payload in PAYLOADS]
    assert {row[1] for row in rows[1:]} == {"-5"}


def test_a_streamed_row_is_returned_as_the_line_written():
    class Echo:
        def write(self, text: str) -> str:
            return text

    assert csv_writer(Echo()).writerow(["=1", 2]) == "'=1,2\r\n"


def _csv_writers_in(path: Path, root: Path = ROOT) -> list[str]:
    """``csv.writer(...)``/``csv.DictWriter(...)`` calls and ``from csv import writer``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "csv":
            found += [
                f"{path.relative_to(root)}:{node.lineno} from csv import {alias.name}"
                for alias in node.names
                if alias.name in WRITERS | {"*"}
            ]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in WRITERS
            and isinstance(node.value, ast.Name)
            and node.value.id == "csv"
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno} csv.{node.attr}")
    return found


def test_every_csv_writer_of_the_portal_is_the_neutralising_one():
    """A new export that calls ``csv.writer`` itself fails here: use ``kit.csv_export``."""
    found = []
    for package in PORTAL_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != THE_HELPER:
                found += _csv_writers_in(path)
    assert not found, (
        "CSV written without kit.csv_export.csv_writer (formula injection): " + "; ".join(found)
    )


def test_the_scan_finds_a_writer_that_bypasses_the_helper(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("import csv\nfrom csv import DictWriter\nw = csv.writer(open('x'))\n")
    assert _csv_writers_in(sneaky, tmp_path) == [
        "sneaky.py:2 from csv import DictWriter",
        "sneaky.py:3 csv.writer",
    ]

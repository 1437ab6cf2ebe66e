"""A project's research outputs written out: CSV (one row per output, every column) and BibTeX
(what a reference manager or a paper's bibliography takes).

BibTeX: a publication is ``@inproceedings`` (its venue is ``booktitle``) when the venue names
proceedings, a conference, a workshop or a symposium, ``@article`` (``journal``) when it has
another venue, ``@misc`` when it has none; each with its DOI. A grant, a data set, software or
another output is ``@misc`` with its URL and a ``note`` saying what it is (a grant's funder,
number, amount and period). Written with bibtexparser, the library the upload reads with, so
what the portal writes it reads back. Braces and backslashes are left out of the values: they
would be LaTeX, and an unbalanced one would break the file. Pure: no Django.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from datetime import date
from decimal import Decimal
from typing import Protocol

import bibtexparser
from bibtexparser.library import Library
from bibtexparser.model import Entry, Field

from kit.csv_export import csv_writer

CSV_COLUMNS = (
    "id", "kind", "title", "authors", "year", "venue", "doi", "funder", "grant_number",
    "amount", "currency", "period_start", "period_end", "url", "added_by", "added_at",
)  # fmt: skip
_PROCEEDINGS = re.compile(r"proceedings|conference|workshop|symposium", re.IGNORECASE)
_NOT_IN_VALUES = re.compile(r"[{}\\]")
_NOT_IN_KEYS = re.compile(r"[^A-Za-z0-9_:-]")


class Output(Protocol):
    """What an export reads of an output (``ResearchOutput`` has it)."""

    @property
    def pk(self) -> int | None: ...

    @property
    def kind(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def authors(self) -> str: ...

    @property
    def year(self) -> int | None: ...

    @property
    def venue(self) -> str: ...

    @property
    def doi(self) -> str: ...

    @property
    def funder(self) -> str: ...

    @property
    def grant_number(self) -> str: ...

    @property
    def amount(self) -> Decimal | None: ...

    @property
    def currency(self) -> str: ...

    @property
    def period_start(self) -> date | None: ...

    @property
    def period_end(self) -> date | None: ...

    @property
    def url(self) -> str: ...


def outputs_csv(outputs: Iterable[tuple[Output, str, str]]) -> str:
    """CSV with a header of ``CSV_COLUMNS``: each output with who added it and when (ISO 8601),
    given as ``(output, added_by, added_at)``."""
    buffer = io.StringIO()
    writer = csv_writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for output, added_by, added_at in outputs:
        writer.writerow(
            [
                output.pk, output.kind, output.title, output.authors, output.year, output.venue,
                output.doi, output.funder, output.grant_number, output.amount, output.currency,
                output.period_start.isoformat() if output.period_start else "",
                output.period_end.isoformat() if output.period_end else "",
                output.url, added_by, added_at,
            ]
        )  # fmt: skip
    return buffer.getvalue()


def outputs_bibtex(outputs: Iterable[Output], *, key_prefix: str) -> str:
    """A BibTeX file of ``outputs``; each key is ``<key_prefix>-<id>``, unique and stable."""
    library = Library()
    for output in outputs:
        entry_type, values = _bibtex_fields(output)
        key = _NOT_IN_KEYS.sub("-", f"{key_prefix}-{output.pk}")
        fields = [Field(name, _value(value)) for name, value in values if _value(value)]
        library.add(Entry(entry_type, key, fields))
    return str(bibtexparser.write_string(library))


def _value(text: str) -> str:
    return " ".join(_NOT_IN_VALUES.sub("", text).split())


def _bibtex_fields(output: Output) -> tuple[str, list[tuple[str, str]]]:
    year = str(output.year) if output.year else ""
    if output.kind == "publication":
        if not output.venue:
            entry_type, venue_field = "misc", "howpublished"
        elif _PROCEEDINGS.search(output.venue):
            entry_type, venue_field = "inproceedings", "booktitle"
        else:
            entry_type, venue_field = "article", "journal"
        return entry_type, [
            ("title", output.title), ("author", output.authors), (venue_field, output.venue),
            ("year", year), ("doi", output.doi), ("url", output.url),
        ]  # fmt: skip
    return "misc", [
        ("title", output.title), ("author", output.authors), ("year", year),
        ("url", output.url), ("note", _note(output)),
    ]  # fmt: skip


def _note(output: Output) -> str:
    if output.kind == "grant":
        parts = [
            "Funding grant",
            output.funder,
            output.grant_number and f"no. {output.grant_number}",
        ]
        if output.amount is not None:
            parts.append(f"{output.amount} {output.currency}".strip())
        if output.period_start and output.period_end:
            parts.append(f"{output.period_start:%Y-%m-%d} to {output.period_end:%Y-%m-%d}")
        return ", ".join(part for part in parts if part)
    return {"dataset": "Data set", "software": "Software"}.get(output.kind, "Research output")

"""Every CSV the portal writes goes through here, so that no cell reaches a spreadsheet as a
formula (CSV or formula injection: a job named ``=HYPERLINK("http://x","y")`` by ``sbatch -J``).

OWASP's rule: a cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
is read as a formula by Excel, LibreOffice and Google Sheets; a single quote before it makes it
text, which the spreadsheet shows without the quote. Only text is neutralised: a number the
portal writes (an int, a ``Decimal``, a float: an adjustment of -5 SU) stays a number, and so
does text that is a plain number and nothing else (``-5``, ``-0.25``, ``+1e3``), which no
spreadsheet evaluates as a formula. Anything else (dates, names, a model's ``str``) is text.

``tests/kit/test_csv_export.py`` fails on any ``csv.writer`` or ``csv.DictWriter`` of the
portal that does not come from here (docs/api.md, "CSV").

Pure: no Django.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Protocol

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class Writable(Protocol):
    def write(self, text: str, /) -> Any: ...


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell no spreadsheet evaluates: numbers and ``None`` unchanged, text
    that begins like a formula prefixed with ``'``."""
    if value is None or isinstance(value, int | float | Decimal):
        return value
    text = value if isinstance(value, str) else str(value)
    if text.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def _breaks_a_line(cell: Any) -> bool:
    return isinstance(cell, str) and ("\r" in cell or "\n" in cell)


class CsvWriter:
    """``csv.writer`` whose every cell went through :func:`csv_cell`.

    ``csv.writer`` quotes a cell holding a line break only if the break is in its
    ``lineterminator``: with ``lineterminator="\n"`` a cell ``'\r=1+1`` would be written bare, and
    a spreadsheet would start a new row at the ``\r`` with the formula ``=1+1``. A row with a
    line break in a cell is therefore written with every cell quoted."""

    def __init__(self, out: Writable, **fmtparams: Any) -> None:
        self._writer = csv.writer(out, **fmtparams)
        self._quoting_all = csv.writer(out, **{**fmtparams, "quoting": csv.QUOTE_ALL})

    def writerow(self, row: Iterable[Any]) -> Any:
        """Write one row; returns what ``out.write`` returned (a streamed response's line)."""
        cells = [csv_cell(value) for value in row]
        if any(_breaks_a_line(cell) for cell in cells):
            return self._quoting_all.writerow(cells)
        return self._writer.writerow(cells)

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(out: Writable, **fmtparams: Any) -> CsvWriter:
    """The portal's one way to write CSV: ``csv.writer``'s arguments, every cell neutralised."""
    return CsvWriter(out, **fmtparams)

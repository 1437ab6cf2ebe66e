"""PostgreSQL ``COPY ... FROM STDIN`` text built a column at a time.

psycopg's ``Copy.write_row`` formats each value of each row by its type: for the ledger's 51
columns that was the import's largest piece of Python after the COPY itself. Here each column
is formatted once by the type all its values share (``str`` of whole numbers and decimals,
``isoformat`` of aware times, strings escaped only in a column that holds a character COPY
must escape), and the rows are joined in one go. A column of values of any other type, or
mixed types, is not formatted here: :func:`copy_text` then returns None and the caller writes
the rows with ``write_row`` as before. Either way the database reads the same values
(``tests/kit/test_pg_copy.py`` copies awkward rows both ways and compares them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

_NULL = "\\N"
# What COPY's text format reads specially inside a value (a NUL cannot be stored: those go to
# write_row, which fails on them as it always did).
_SPECIAL = ("\\", "\t", "\n", "\r", "\x00")
_NONE = type(None)


def _strings(column: Sequence[Any]) -> list[str] | None:
    text = "".join(column)
    if not any(special in text for special in _SPECIAL):
        return list(column)
    if "\x00" in text:
        return None
    return [
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
        for value in column
    ]


def _format(column: Sequence[Any]) -> list[str] | None:
    """The column's values as COPY text, or None for a type not formatted here."""
    types = set(map(type, column))
    if _NONE in types:
        present = [value for value in column if value is not None]
        if not present:
            return [_NULL] * len(column)
        formatted = _format(present)
        if formatted is None:
            return None
        texts = iter(formatted)
        return [_NULL if value is None else next(texts) for value in column]
    if not column:
        return []
    first = column[0]
    if len(column) > 1 and all(value is first for value in column):
        # One object in every row (the import's time, its run): formatted once.
        once = _format([first])
        return None if once is None else once * len(column)
    if all(issubclass(kind, str) for kind in types):
        # Text, and str enums (StrEnum, Django's TextChoices): psycopg dumps those as str too,
        # their characters being their value.
        return _strings(column)
    if len(types) > 1:
        return None
    (kind,) = types
    if kind is int:
        return list(map(str, column))
    if kind is Decimal:
        # NaN and the infinities are spelled differently by psycopg; whole numbers and
        # decimals read back as the same numeric whatever their exponent.
        return list(map(str, column)) if all(map(Decimal.is_finite, column)) else None
    if kind is datetime:
        # An aware time as ISO text with its offset: the same instant for timestamptz.
        if None in map(datetime.utcoffset, column):
            return None
        return list(map(datetime.isoformat, column))
    return None


def copy_text(columns: Sequence[Sequence[Any]]) -> bytes | None:
    """The rows whose values ``columns`` holds (one sequence per column, all of one length) as
    the text of ``COPY ... FROM STDIN``, UTF-8; None when a column holds a type this does not
    format (or text UTF-8 cannot encode), for the caller to write row by row."""
    formatted = []
    for column in columns:
        texts = _format(column)
        if texts is None:
            return None
        formatted.append(texts)
    if not formatted or not formatted[0]:
        return b""
    lines = map("\t".join, zip(*formatted, strict=True))
    try:
        return ("\n".join(lines) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return None


# Rows per piece of text: the server reads one piece while the next is built (the whole
# batch built first and sent at once left it idle meanwhile, and cost more than write_row).
_PIECE_ROWS = 500


def rows_copy(copy: Any, rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> None:
    """Write ``rows`` (their values of ``names``, in order) into psycopg's ``copy``: as text
    built by :func:`copy_text` a piece at a time, or by ``write_row`` for a piece it leaves."""
    for first in range(0, len(rows), _PIECE_ROWS):
        piece = rows[first : first + _PIECE_ROWS]
        payload = copy_text([[row[name] for row in piece] for name in names])
        if payload is not None:
            copy.write(payload)
            continue
        for row in piece:
            copy.write_row([row[name] for name in names])

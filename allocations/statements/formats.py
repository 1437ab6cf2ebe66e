"""The three formats of a statement: each one's renderer and media type, named once for the
API and the ``statements`` command. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from allocations.statements.assembly import Statement, StatementError
from allocations.statements.render_csv import statement_csv
from allocations.statements.render_pdf import statement_pdf
from allocations.statements.render_xlsx import statement_xlsx


@dataclass(frozen=True)
class Format:
    render: Callable[[Statement], bytes]
    content_type: str


FORMATS = {
    "pdf": Format(statement_pdf, "application/pdf"),
    "xlsx": Format(
        statement_xlsx, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    ),
    "csv": Format(statement_csv, "text/csv; charset=utf-8"),
}


def format_get(name: str) -> Format:
    """The format ``name`` (pdf, xlsx or csv); any other is refused with the choices."""
    if name not in FORMATS:
        raise StatementError(f"{name!r} is not a statement format: use pdf, xlsx or csv")
    return FORMATS[name]

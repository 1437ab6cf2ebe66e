"""Statements written to files, for every project at once (the ``statements`` command,
docs/costs.md, "Statements")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.utils import timezone

from allocations.statements.assembly import month_parse, statement_filename
from allocations.statements.formats import format_get
from allocations.statements.selectors import (
    finance_statement_get,
    projects_for_statements,
    statement_get,
)


@dataclass(frozen=True)
class WrittenStatement:
    path: Path
    provisional: bool


def statements_write(
    *,
    month: str,
    file_format: str,
    out_dir: Path,
    project_code: str | None = None,
    finance_code: str | None = None,
) -> list[WrittenStatement]:
    """Write the month's statements in ``file_format`` into ``out_dir``: one per project (all
    projects, or ``project_code``), or with ``finance_code`` alone one for that code's
    projects together. Every argument is checked, and every statement made, before the first
    file is written: a refusal (a month to come, an unknown project or finance code, an
    unknown format) writes nothing."""
    first_day = month_parse(month, today=timezone.localdate())
    renderer = format_get(file_format)
    projects = projects_for_statements(project_code=project_code, finance_code=finance_code)
    if finance_code and not project_code:
        statements = [finance_statement_get(finance_code=finance_code, month=first_day)]
    else:
        statements = [statement_get(project=project, month=first_day) for project in projects]
    files = [
        (
            out_dir
            / statement_filename(
                code=statement.figures.subject, month=first_day, extension=file_format
            ),
            renderer.render(statement),
            statement.figures.provisional,
        )
        for statement in statements
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path, content, provisional in files:
        path.write_bytes(content)
        written.append(WrittenStatement(path=path, provisional=provisional))
    return written

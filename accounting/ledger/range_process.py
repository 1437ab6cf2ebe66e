"""The entry point of a process that imports one range of a text file
(``accounting.ledger.sources.file_import_parallel``).

The process is spawned, not forked: a fork would inherit the parent's open connections (the
broker's and the result backend's among them), and libraries that clean those up after a fork
can block on them. A spawned interpreter sets Django up itself, on the database its parent
named, so this module imports nothing of Django at its top (only the pure parser).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from accounting.ledger.sacct import MAX_LINE_CHARS


def range_import(*, settings_module: str, database_name: str, arguments: dict[str, Any]) -> None:
    """Set Django up on ``database_name`` and import the range ``arguments`` describe."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module)
    import django

    django.setup()
    from django.db import connection

    connection.settings_dict["NAME"] = database_name
    _import_range(**arguments)


def _import_range(
    *, run_id: int, path: str, begin: int, end: int, first_line: int, header: str,
    options: dict[str, Any],
) -> None:  # fmt: skip
    """Import the lines ``[begin, end)`` of a file into the run ``run_id``, leaving the run to
    the process that started this one."""
    from accounting.ledger.pipeline import jobs_import
    from accounting.models import ImportRun

    run = ImportRun.objects.select_related("cluster").get(pk=run_id)
    jobs_import(
        cluster=run.cluster, lines=range_lines(Path(path), begin, end), source=run.source,
        run=run, header=header, first_line_number=first_line, finish_run=False, **options,
    )  # fmt: skip


def range_lines(path: Path, begin: int, end: int) -> Iterator[str]:
    """The lines of the byte range ``[begin, end)``, each cut at MAX_LINE_CHARS + 1 as
    ``accounting.ledger.sacct.bounded_lines`` cuts them."""
    with path.open("rb") as stream:
        stream.seek(begin)
        position = begin
        while position < end:
            raw = stream.readline(MAX_LINE_CHARS + 1)
            if not raw:
                return
            position += len(raw)
            if len(raw) > MAX_LINE_CHARS and not raw.endswith(b"\n"):
                while True:  # the rest of an endless line is read and dropped
                    rest = stream.readline(MAX_LINE_CHARS)
                    position += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
            yield raw.decode("utf-8", errors="replace")

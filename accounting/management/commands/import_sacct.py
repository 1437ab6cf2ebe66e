"""python manage.py import_sacct FILE|- --cluster NAME [--create-projects] [--json]
    [--format auto|parsable|json] [--columns JobID,JobIDRaw,...] [--delimiter STR]
python manage.py import_sacct --run-sacct --cluster NAME --since ISO [--until ISO] [--json]

FILE is ``sacct --parsable2`` (or ``--parsable``) text with its header line, a ``--noheader``
dump read with ``--columns``, or ``sacct --json`` output; ``--format auto`` (the default) tells
text from JSON by the first character.

Exit status is non-zero only for fatal errors (unknown cluster, unreadable file, no header,
sacct failing); quarantined lines are reported in the summary, not as failures.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime
from tqdm import tqdm

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.ledger.pipeline import BUCKETS, ImportFatal, ImportSummary, jobs_import
from accounting.ledger.sources import (
    FORMATS,
    file_import_parallel,
    sacct_stream_import,
    window_reader,
    window_source,
)


def _lines_with_progress(
    stream: Iterable[str], total_bytes: int | None, enabled: bool
) -> Iterator[str]:
    with tqdm(
        total=total_bytes,
        unit="B",
        unit_scale=True,
        disable=not enabled,
        desc="import",
        leave=False,
    ) as bar:
        for line in stream:
            bar.update(len(line))
            yield line


class Command(BaseCommand):
    help = "Import sacct --parsable2 output (a file, stdin or a sacct run) and charge the jobs."
    # Run from cron every few minutes, and by the upload task (which never ran them): Django's
    # system checks import every URL and view for nothing the import uses, about 0.9 s a run,
    # a quarter of a re-import of 100,000 lines. `manage.py check --deploy` is where they run.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", nargs="?", help="sacct --parsable2 output, or - for stdin")
        parser.add_argument("--cluster", required=True)
        parser.add_argument(
            "--create-projects",
            action="store_true",
            help="create a missing project from a job's account instead of quarantining it",
        )
        parser.add_argument(
            "--run-sacct",
            action="store_true",
            help="read a window from the cluster: its sacct, or its slurmrestd when configured",
        )
        parser.add_argument("--since", help="with --run-sacct: window start (ISO 8601)")
        parser.add_argument("--until", help="with --run-sacct: window end (default: now)")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")
        parser.add_argument(
            "--format",
            choices=FORMATS,
            default="auto",
            help="input format: sacct --parsable2 text or sacct --json (default: detected)",
        )
        parser.add_argument(
            "--columns",
            help="for a --noheader dump: the columns it was made with, e.g. JobID,JobIDRaw,...",
        )
        parser.add_argument(
            "--delimiter", help="the --delimiter sacct was given (default: read from the header)"
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            help="processes that import ranges of a text FILE at once (default 1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        if options["run_sacct"] == bool(options["file"]):
            raise CommandError("give a FILE (or -) or --run-sacct, not both")
        try:
            if options["run_sacct"]:
                summary = self._run_sacct(cluster, options)
            else:
                summary = self._import_file(cluster, options)
        except ImportFatal as error:
            raise CommandError(str(error)) from None
        self._report(summary, as_json=options["json"])

    def _import_file(self, cluster: Any, options: dict[str, Any]) -> ImportSummary:
        name = options["file"]
        if options["workers"] > 1:
            return self._import_in_parallel(cluster, options)
        interactive = sys.stderr.isatty() and not options["json"]
        if name == "-":
            stream: Any = sys.stdin.buffer
            size, source = None, "stdin"
        else:
            path = Path(name)
            try:
                stream = path.open("rb")
                size, source = path.stat().st_size, f"file {path.resolve()}"
            except OSError as error:
                raise CommandError(f"{path}: cannot be read ({error.strerror})") from None
        with stream:
            _, summary = sacct_stream_import(
                stream,
                format=options["format"],
                on_text=lambda lines: _lines_with_progress(lines, size, interactive),
                cluster=cluster,
                source=source,
                create_projects=options["create_projects"],
                columns=options["columns"],
                delimiter=options["delimiter"],
            )
        return summary

    def _import_in_parallel(self, cluster: Any, options: dict[str, Any]) -> ImportSummary:
        if options["file"] == "-" or options["columns"]:
            raise CommandError("--workers reads a FILE with its header line (not - or --columns)")
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"{path}: cannot be read (no such file)")
        _, summary = file_import_parallel(
            cluster=cluster,
            path=path,
            workers=options["workers"],
            source=f"file {path.resolve()}",
            create_projects=options["create_projects"],
            delimiter=options["delimiter"],
            format=options["format"],
        )
        return summary

    def _run_sacct(self, cluster: Any, options: dict[str, Any]) -> ImportSummary:
        since = parse_datetime(options["since"] or "")
        until = parse_datetime(options["until"]) if options["until"] else None
        if (
            since is None
            or since.tzinfo is None
            or (options["until"] and (until is None or until.tzinfo is None))
        ):
            raise CommandError("--since (and --until) must be ISO 8601 times with a zone")
        from django.utils import timezone

        until = until or timezone.now()
        reader = window_reader(cluster)
        with window_source(cluster=cluster, since=since, until=until) as source:
            _, summary = jobs_import(
                cluster=cluster,
                **source,
                source=f"{reader} {since.isoformat()} .. {until.isoformat()}",
                create_projects=options["create_projects"],
                tz=UTC,
            )
        return summary

    def _report(self, summary: ImportSummary, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(summary.as_dict()))
            return
        self.stdout.write(f"lines read: {summary.lines}")
        for name in BUCKETS:
            self.stdout.write(f"  {name.replace('_', ' ')}: {getattr(summary, name)}")

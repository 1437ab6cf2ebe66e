"""python manage.py cluster_apply FILE.json [FILE.json ...] [--effective ISO] [--dry-run]"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils.dateparse import parse_datetime

from accounting.clusters.services import ClusterApplyResult, VersionConflict, cluster_apply
from accounting.clusters.specs import SpecFileError, cluster_definition_load


class _DryRun(Exception):
    pass


class Command(BaseCommand):
    help = "Create or update clusters and partitions from spec files (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, help="cluster spec JSON files")
        parser.add_argument(
            "--effective",
            help="ISO 8601 time from which changed specs apply (default: now); must be aware",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="report what would change, change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        effective = None
        if options["effective"]:
            effective = parse_datetime(options["effective"])
            if effective is None or effective.tzinfo is None:
                raise CommandError(
                    "--effective must be an ISO 8601 time with a zone, e.g. 2026-01-01T00:00Z"
                )
        try:
            definitions = [cluster_definition_load(path) for path in options["files"]]
        except SpecFileError as error:
            raise CommandError(str(error)) from None
        try:
            with transaction.atomic():
                for definition in definitions:
                    self._report(cluster_apply(definition=definition, effective_from=effective))
                if options["dry_run"]:
                    raise _DryRun
        except _DryRun:
            self.stdout.write("dry run: nothing was changed")
        except VersionConflict as error:
            raise CommandError(str(error)) from None

    def _report(self, result: ClusterApplyResult) -> None:
        name = result.cluster.name
        state = (
            "created" if result.cluster_created else "updated" if result.changed else "unchanged"
        )
        self.stdout.write(f"cluster {name}: {state}")
        for label, names in (
            ("new", result.created),
            ("new version", result.versioned),
            ("unchanged", result.unchanged),
            ("not in file (kept)", result.not_in_file),
        ):
            for partition in names:
                self.stdout.write(f"  partition {partition}: {label}")

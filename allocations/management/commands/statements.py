"""python manage.py statements --month YYYY-MM [--project CODE] [--finance-code X]
                              --format pdf|xlsx|csv --out DIR

Writes the month's statements (docs/costs.md, "Statements"): one file per project (every
project that is not archived, or --project), or with --finance-code one file for all the
projects billed to that code. A month to come, an unknown project or finance code: the
sentence on stderr, exit status 1, nothing written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from allocations.statements.formats import FORMATS
from allocations.statements.services import statements_write
from kit.errors import ApplicationError


class Command(BaseCommand):
    help = "Write monthly statements of projects (PDF, XLSX or CSV) into a directory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--month", required=True, help="the month, YYYY-MM")
        parser.add_argument("--project", help="only this project (its code)")
        parser.add_argument(
            "--finance-code", help="one statement of the projects billed to this finance code"
        )
        parser.add_argument("--format", required=True, choices=sorted(FORMATS))
        parser.add_argument("--out", required=True, type=Path, help="directory to write into")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            written = statements_write(
                month=options["month"],
                file_format=options["format"],
                out_dir=options["out"],
                project_code=options["project"],
                finance_code=options["finance_code"],
            )
        except ApplicationError as error:
            raise CommandError(str(error)) from error
        for statement in written:
            note = " (provisional)" if statement.provisional else ""
            self.stdout.write(f"wrote {statement.path}{note}")
        self.stdout.write(f"{len(written)} statement(s) written")

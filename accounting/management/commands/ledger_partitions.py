"""python manage.py ledger_partitions [--from YYYY-MM --to YYYY-MM] [--json]

The jobs ledger's monthly partitions on PostgreSQL (docs/importing.md, "A hundred million
jobs"): lists them with PostgreSQL's estimate of their rows, and with ``--from``/``--to``
creates those the range lacks first (before a backfill of old years, or a bulk load in SQL;
the import and a daily beat task create them on their own otherwise).
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.ledger_storage import (
    is_partitioned,
    months_between,
    partitions_ensure,
    partitions_list,
)


def _month(value: str) -> date:
    try:
        year, month = value.split("-")
        return date(int(year), int(month), 1)
    except ValueError:
        raise CommandError(f"{value!r} is not a month (YYYY-MM)") from None


class Command(BaseCommand):
    help = "List the jobs ledger's monthly partitions; create those of a range of months."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="first", help="first month to create (YYYY-MM)")
        parser.add_argument("--to", dest="last", help="last month to create (YYYY-MM)")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        if not is_partitioned():
            raise CommandError("the ledger is partitioned on PostgreSQL only; this is not one")
        created: list[str] = []
        if options["first"] or options["last"]:
            if not (options["first"] and options["last"]):
                raise CommandError("give both --from and --to")
            first, last = _month(options["first"]), _month(options["last"])
            if last < first:
                raise CommandError("--to is before --from")
            if len(months_between(first, last)) > 1200:
                raise CommandError("more than a hundred years of months: check --from and --to")
            created = partitions_ensure(months_between(first, last))
        partitions = partitions_list()
        if options["json"]:
            body = {
                "created": created,
                "partitions": [
                    {
                        "name": p.name,
                        "month": p.month.isoformat()[:7] if p.month else None,
                        "rows_estimate": p.rows,
                    }
                    for p in partitions
                ],
            }
            self.stdout.write(json.dumps(body, indent=2))
            return
        for name in created:
            self.stdout.write(f"created {name}")
        for p in partitions:
            month = p.month.isoformat()[:7] if p.month else "open"
            rows = "not analysed yet" if p.rows < 0 else f"~{p.rows:,} rows"
            self.stdout.write(f"{p.name:28} {month:8} {rows}")

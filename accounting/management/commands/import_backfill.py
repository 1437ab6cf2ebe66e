"""python manage.py import_backfill --cluster NAME --since ISO --until ISO [--window-hours 168]
    [--serial] [--json]

Backfill years of jobs: the range is split into windows, and each window is one task on the
``imports`` queue, so several workers import windows of one cluster at once (each under its own
lock). ``--serial`` imports the windows here, one after the other, instead.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.ledger.pipeline import ImportFatal
from accounting.ledger.sources import backfill_enqueue, backfill_serial


class Command(BaseCommand):
    help = "Backfill a cluster's jobs over a time range, window by window, on several workers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True)
        parser.add_argument("--since", required=True, help="start of the range (ISO 8601)")
        parser.add_argument("--until", required=True, help="end of the range (ISO 8601)")
        parser.add_argument(
            "--window-hours", type=float, default=168, help="hours per window (default a week)"
        )
        parser.add_argument(
            "--serial", action="store_true", help="import the windows here, one after the other"
        )
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        since, until = parse_datetime(options["since"]), parse_datetime(options["until"])
        if since is None or until is None or since.tzinfo is None or until.tzinfo is None:
            raise CommandError("--since and --until must be ISO 8601 times with a zone")
        window = timedelta(hours=options["window_hours"])
        try:
            if options["serial"]:
                count, total = backfill_serial(
                    cluster=cluster, since=since, until=until, window=window
                )
            else:
                windows = backfill_enqueue(cluster=cluster, since=since, until=until, window=window)
        except (ValueError, ImportFatal) as error:
            raise CommandError(str(error)) from None
        if options["serial"]:
            self._say(
                {"windows": count, **total.as_dict()},
                f"{count} windows imported: {total.as_dict()}",
                as_json=options["json"],
            )
            return
        self._say(
            {"enqueued": [[start.isoformat(), end.isoformat()] for start, end in windows]},
            f"{len(windows)} windows enqueued on the imports queue",
            as_json=options["json"],
        )

    def _say(self, data: dict[str, Any], text: str, *, as_json: bool) -> None:
        self.stdout.write(json.dumps(data) if as_json else text)

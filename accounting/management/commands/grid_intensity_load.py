"""python manage.py grid_intensity_load --cluster NAME FILE.csv [--replace]

Load a cluster's grid carbon intensity series (docs/energy-and-carbon.md): a CSV with the
columns ``start`` (ISO 8601; without an offset, the cluster's local time) and ``g_per_kwh``.
All or nothing: a bad line is named and nothing is saved. Loading the same file again changes
nothing; ``--replace`` also removes the steps the file does not have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.carbon.series_csv import IntensityCsvError
from accounting.carbon.services import grid_intensity_csv_load
from accounting.clusters.selectors import NotFound, cluster_get


class Command(BaseCommand):
    help = "Load a cluster's grid carbon intensity series (g CO2e per kWh) from CSV."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="CSV with the columns start,g_per_kwh")
        parser.add_argument("--cluster", required=True, help="cluster name")
        parser.add_argument(
            "--replace", action="store_true", help="also remove the steps the file does not have"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        name = options["file"]
        try:
            with Path(name).open(encoding="utf-8", newline="") as handle:
                result = grid_intensity_csv_load(
                    cluster=cluster, lines=handle, replace=options["replace"]
                )
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"{name}: cannot be read: {error}") from None
        except IntensityCsvError as error:
            raise CommandError(f"{name}: {error}") from None
        self.stdout.write(f"{cluster.name}: grid intensity {result}")

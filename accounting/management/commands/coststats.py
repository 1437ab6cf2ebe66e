"""python manage.py coststats --model FILE --cluster NAME [--start ISO] [--end ISO]
[--increment PERCENT] [--max-runtime HOURS] [--details | --statistics] [--quiet] [--csv]

The batch cost analyser of the PeCoH report (ch. 5.2, 6): the finished jobs of a cluster that
ended in [start, end), priced with a cost model. ``--details`` prints a row per job,
``--statistics`` the table of Listings 7-8 and the cumulative cost distribution; without either,
both. ``--quiet`` keeps only the Total column; ``--csv`` prints machine-readable CSV instead.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.costs.costmodels import (
    SECONDS_PER_HOUR,
    CostModelError,
    NodelistError,
    cost_model_load,
)
from accounting.costs.coststats import (
    DEFAULT_INCREMENT,
    Column,
    CostRow,
    concentration_lines,
    cost_statistics,
    details_cells,
    details_csv_cells,
    details_csv_header,
    details_header,
    quantile_percents,
    statistics_csv_rows,
    statistics_table,
    table_columns,
)
from accounting.costs.services import cost_table_get
from accounting.management.options import moment_option
from kit.csv_export import csv_writer

# Widths of the details table, which is printed while the jobs stream in.
_DETAIL_WIDTHS = {"size": 9, "runtime": 11, "energy": 12, "node_set": 9, "rate": 9, "total": 10}


def _positive(text: str | None, option: str) -> Decimal | None:
    if text is None:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise CommandError(f"{option}: not a number: {text!r}") from None
    if not value.is_finite() or value <= 0:
        raise CommandError(f"{option}: must be a positive number, got {text!r}")
    return value


class Command(BaseCommand):
    help = "Cost statistics of a cluster's finished jobs under a cost model (PeCoH analyser)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, help="cost model file (docs/costs.md)")
        parser.add_argument("--cluster", required=True)
        parser.add_argument(
            "--start", help="jobs that ended at or after (date or time; UTC default)"
        )
        parser.add_argument("--end", help="jobs that ended before")
        parser.add_argument(
            "--increment",
            default=str(DEFAULT_INCREMENT),
            help="quantile step in percent (default 25; the report's chapter 6 uses 1)",
        )
        parser.add_argument(
            "--max-runtime", help="leave out jobs that ran longer than this many hours"
        )
        tables = parser.add_mutually_exclusive_group()
        tables.add_argument("--details", action="store_true", help="only the row of each job")
        tables.add_argument("--statistics", action="store_true", help="only the statistics")
        parser.add_argument("--quiet", action="store_true", help="only the Total column")
        parser.add_argument("--csv", action="store_true", help="CSV instead of aligned text")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            model = cost_model_load(options["model"])
        except CostModelError as error:
            raise CommandError(str(error)) from None
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        increment = _positive(options["increment"], "--increment")
        assert increment is not None
        try:
            quantile_percents(increment)
        except ValueError as error:
            raise CommandError(f"--increment: {error}") from None
        max_hours = _positive(options["max_runtime"], "--max-runtime")
        show_details = not options["statistics"]
        show_statistics = not options["details"]
        totals_only = options["quiet"]
        columns = table_columns(model, totals_only=totals_only)
        on_row = self._details_printer(model, columns, options["csv"]) if show_details else None
        try:
            table = cost_table_get(
                model=model,
                cluster=cluster,
                start=moment_option(options["start"], "--start"),
                end=moment_option(options["end"], "--end"),
                max_runtime_seconds=max_hours * SECONDS_PER_HOUR if max_hours else None,
                on_row=on_row,
            )
        except NodelistError as error:
            raise CommandError(str(error)) from None
        summary = f"{len(table):,} jobs priced"
        if model.nodes_are == "shared":
            summary += ", each for its share of its nodes (nodes-are shared)"
        if max_hours:
            summary += f"; {table.dropped_long_jobs:,} longer than {max_hours} h left out"
        if table.jobs_with_unknown_nodes:
            summary += (
                f"; {table.jobs_with_unknown_nodes:,} ran on nodes in no node set "
                "(those nodes cost nothing)"
            )
        self.stderr.write(summary)
        if not show_statistics:
            return
        stats = cost_statistics(table, increment=increment, totals_only=totals_only)
        if show_details:
            self.stdout.write("")
        if options["csv"]:
            writer = csv_writer(self.stdout, lineterminator="\n")
            writer.writerows(statistics_csv_rows(stats))
            return
        for line in statistics_table(stats):
            self.stdout.write(line)
        self.stdout.write("")
        for line in concentration_lines(stats):
            self.stdout.write(line)

    def _details_printer(self, model: Any, columns: tuple[Column, ...], as_csv: bool) -> Any:
        if as_csv:
            writer = csv_writer(self.stdout, lineterminator="\n")
            writer.writerow(details_csv_header(columns))

            def write_csv(row: CostRow) -> None:
                writer.writerow(details_csv_cells(row, model, columns))

            return write_csv
        widths = [12] + [
            max(len(column.header), _DETAIL_WIDTHS[column.kind] + len(column.unit))
            for column in columns
        ]

        def line(cells: list[str]) -> str:
            first = f"{cells[0]:<{widths[0]}}"
            rest = (f"{cell:>{width}}" for cell, width in zip(cells[1:], widths[1:], strict=True))
            return "  ".join([first, *rest]).rstrip()

        header = line(details_header(columns))
        self.stdout.write(header)
        self.stdout.write("=" * len(header))

        def write_text(row: CostRow) -> None:
            self.stdout.write(line(details_cells(row, model, columns)))

        return write_text

"""python manage.py export_charges --cluster NAME [--start ISO] [--end ISO] [--project CODE]

CSV on standard output (or --output FILE) with a header; times ISO 8601 UTC; SU as decimals.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.ledger.selectors import charges_for_export
from accounting.management.options import moment_option
from kit.csv_export import csv_writer

COLUMNS = (
    "job_id_raw", "job_id", "project", "user", "partition", "state", "start", "end",
    "elapsed_seconds", "service_units", "dominant_resource", "energy_wh",
)  # fmt: skip


def _iso(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if moment else ""


class Command(BaseCommand):
    help = "Export charged jobs as CSV (the file finance and other tools read)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True)
        parser.add_argument(
            "--start", help="jobs that ended at or after (date or time; UTC default)"
        )
        parser.add_argument("--end", help="jobs that ended before")
        parser.add_argument("--project", help="project code (Slurm account)")
        parser.add_argument("--output", help="file to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        jobs = charges_for_export(
            cluster=cluster,
            start=moment_option(options["start"], "--start"),
            end=moment_option(options["end"], "--end"),
            project_code=options["project"],
        )
        out: Any = open(options["output"], "w", newline="") if options["output"] else self.stdout  # noqa: SIM115
        try:
            writer = csv_writer(out, lineterminator="\n")
            writer.writerow(COLUMNS)
            for job in jobs.iterator(chunk_size=5000):
                writer.writerow(
                    (
                        job.job_id_raw, job.job_id, job.project.code, job.username,
                        job.partition.name, job.state, _iso(job.start), _iso(job.end),
                        job.elapsed_seconds, job.service_units, job.dominant_resource,
                        job.energy_wh,
                    )
                )  # fmt: skip
        finally:
            if out is not self.stdout:
                out.close()

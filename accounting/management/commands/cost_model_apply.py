"""python manage.py cost_model_apply FILE --cluster NAME [--effective-from ISO] [--name N]
[--note TEXT]

Attach a cost model file (docs/costs.md, the PeCoH chapter-4 format) to a cluster as its next
version. The first version covers the cluster's whole past unless a date is given; a later one
starts now. The jobs that ended since the version took effect are priced again afterwards (a
Celery task; eager without a broker).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.costs.services import (
    CostModelRejected,
    cost_model_of,
    cost_model_summary,
    cost_model_version_create,
)


def _moment(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--effective-from: not an ISO 8601 time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = "Attach a money cost model (PeCoH chapter-4 format) to a cluster as a new version."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="cost model file")
        parser.add_argument("--cluster", required=True, help="cluster name")
        parser.add_argument(
            "--effective-from", help="ISO 8601 time (UTC without a zone); default: see above"
        )
        parser.add_argument("--name", default="", help="a name for the version (default: file)")
        parser.add_argument("--note", default="", help="change note")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"{path}: cannot read the model: {error}") from None
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        try:
            version = cost_model_version_create(
                cluster=cluster,
                name=options["name"] or path.stem,
                text=text,
                effective_from=_moment(options["effective_from"]),
                change_note=options["note"] or f"cost_model_apply {path.name}",
            )
        except CostModelRejected as error:
            where = f"{path}:{error.line_number}" if error.line_number else str(path)
            raise CommandError(f"{where}: {error.message}") from None
        summary = cost_model_summary(cost_model_of(version))
        self.stdout.write(
            f"{cluster.name}: cost model v{version.number} {version.name!r} in force from "
            f"{version.effective_from.isoformat()} ({version.currency}, "
            f"{summary.node_hour_min}-{summary.node_hour_max} {version.currency} per node-hour, "
            f"nodes {summary.nodes_are})"
        )

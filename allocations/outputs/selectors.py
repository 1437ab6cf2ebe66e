"""Which research outputs a reader gets: one home for the queries the project page, the
exports and a reviewer's record share."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from allocations.models import ResearchOutput
from projects.models import Project


def outputs_since(project: Project, since: datetime | None) -> QuerySet[ResearchOutput]:
    """The project's outputs added at or after ``since`` (all of them when ``None``): what a
    reviewer reads as the outputs "since the last grant"."""
    outputs = ResearchOutput.objects.filter(project=project)
    if since is not None:
        outputs = outputs.filter(added_at__gte=since)
    return outputs.order_by("kind", "-year", "title", "pk")

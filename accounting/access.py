"""Who may see which jobs and ledger pages: the accounting side of the one access layer.

Built on the roles and the project visibility of ``allocations/access.py`` (one definition of
each); pages and the API of every accounting domain ask here and never restate a rule.
"""

from __future__ import annotations

from django.db.models import QuerySet

from accounting.models import Job
from kit.access import Actor, is_staff
from projects.access import projects_visible


def jobs_visible(*, user: Actor) -> QuerySet[Job]:
    """Jobs of the projects ``user`` may see (every job for staff), with the rows their names
    come from (cluster, project, partition, rate version)."""
    jobs = Job.objects.select_related("cluster", "project", "partition", "partition_version")
    if is_staff(user):
        return jobs
    return jobs.filter(project__in=projects_visible(user=user))

"""Read-side of project requests: what a person sees, the approvers' queue, the next code."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Case, IntegerField, Prefetch, Q, QuerySet, Value, When

from accounting.models import Partition
from allocations.access import project_requests_visible
from allocations.models import ProjectRequest, ProjectRequestTransition
from allocations.project_requests.codes import next_project_code
from kit.access import Actor
from projects.models import Project, ResourcePool


def project_requests_detailed(queryset: QuerySet[ProjectRequest]) -> QuerySet[ProjectRequest]:
    """``queryset`` with what a request's page and the API show, in a fixed number of queries."""
    return queryset.select_related("requester", "pi", "decided_by", "project").prefetch_related(
        "amounts__pool",
        "estimates__partition__cluster",
        Prefetch("transitions", ProjectRequestTransition.objects.select_related("actor")),
    )


def project_request_for_user(*, user: Actor, pk: int) -> ProjectRequest | None:
    """The project request ``pk`` if ``user`` may read it; None otherwise (a 404)."""
    return project_requests_detailed(project_requests_visible(user=user)).filter(pk=pk).first()


def _asked_or_named(user: User) -> QuerySet[ProjectRequest]:
    """The requests a person asked for or is named PI in: whose requests are "theirs"."""
    return ProjectRequest.objects.filter(Q(requester=user) | Q(pi=user))


def project_requests_of(*, user: User) -> QuerySet[ProjectRequest]:
    """The requests a person asked for or is named PI in, newest first (their own list: an
    approver's own requests too, not the whole queue)."""
    return project_requests_detailed(_asked_or_named(user)).distinct()


def project_requests_open_of(*, user: User) -> QuerySet[ProjectRequest]:
    """Those of a person's requests not decided yet (asked for, or naming them PI), newest
    first: what the dashboard of someone without a project says is under way. Their title and
    state only, one plain read (the detailed read's joins, prefetches and DISTINCT cost 2 ms of
    every view of a dashboard, staff's among them, mostly to find nothing)."""
    decided = [
        ProjectRequest.State.APPROVED,
        ProjectRequest.State.REJECTED,
        ProjectRequest.State.PI_DECLINED,
    ]
    return (
        _asked_or_named(user).exclude(state__in=decided).only("pk", "title", "state", "created_at")
    )


def project_requests_queue() -> QuerySet[ProjectRequest]:
    """The approvers' queue: every project request its PI confirmed, those waiting for a
    decision first, then the rest; the newest first in each."""
    waiting = Case(
        When(state=ProjectRequest.State.SUBMITTED, then=Value(0)),
        default=Value(1),
        output_field=IntegerField(),
    )
    unconfirmed = [ProjectRequest.State.AWAITING_PI, ProjectRequest.State.PI_DECLINED]
    confirmed = ProjectRequest.objects.exclude(state__in=unconfirmed)
    return project_requests_detailed(confirmed.order_by(waiting, "-created_at"))


def project_requests_waiting() -> int:
    """How many project requests wait for the approvers (the staff dashboard's link)."""
    return ProjectRequest.objects.filter(state=ProjectRequest.State.SUBMITTED).count()


def project_code_next() -> str:
    """The centre's next project code: ``PORTAL_PROJECT_CODE_PREFIX`` and the next number."""
    prefix = settings.PORTAL_PROJECT_CODE_PREFIX
    codes = Project.objects.filter(code__startswith=prefix).values_list("code", flat=True)
    return next_project_code(prefix=prefix, codes=codes)


def pools_offered() -> list[ResourcePool]:
    """The pools a new project may ask SU on: every pool, by name."""
    return list(ResourcePool.objects.select_related("cluster").order_by("name"))


def estimate_partitions() -> list[Partition]:
    """The partitions of the pools, for an estimate line."""
    return list(
        Partition.objects.filter(pool_membership__isnull=False)
        .select_related("cluster")
        .order_by("cluster__name", "name")
    )

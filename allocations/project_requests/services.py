"""Write-side of project requests, a state machine with its history table:

    awaiting_pi ──confirm──> submitted ──approve──> approved (the project, its grants, a plan)
         │                    │   ▲  └──reject───> rejected
         └──decline──> pi_declined  │
                              ask changes ──> changes_requested ──resubmit──┘

A request naming the requester as PI starts ``submitted``. Each operation checks who acts
first (``PermissionDenied``), then the state and the input (``AllocationError``), and does all
of its work or none of it (one transaction). Every transition is recorded with who, when and
why (``ProjectRequestTransition``), and mailed after the commit (``notifications``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounting.clusters.quotes import QuoteRequest
from accounting.models import Partition
from allocations.access import (
    approves_project_requests,
    can_confirm_project_request,
    can_edit_project_request,
)
from allocations.grants.estimates import estimate_line_priced
from allocations.grants.services import allocation_grant, check_rule, su_amount
from allocations.models import (
    ProjectRequest,
    ProjectRequestAmount,
    ProjectRequestEstimate,
    ProjectRequestTransition,
    SlurmSyncRequest,
)
from allocations.project_requests import notifications
from allocations.project_requests.selectors import project_code_next
from kit.access import is_staff, require
from kit.calendar import add_months
from kit.queue import task_enqueue
from projects.models import Membership, Project, ResourcePool
from projects.services import project_create

State = ProjectRequest.State
ZERO = Decimal(0)
CODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # a Slurm account, as the API's codes
MAX_SU = Decimal(10) ** 18  # SU columns hold 24 digits, 6 of them decimals
MAX_DAYS = 3660  # a start-up allocation's longest period: ten years
DECIDERS = "only centre staff and the centre's project approvers decide project requests"


@dataclass(frozen=True)
class EstimateLine:
    """One estimate line to price: ``jobs`` times the quote of one planned job."""

    partition: Partition
    jobs: int
    quote: QuoteRequest
    description: str = ""


# --- Small checks ---------------------------------------------------------------------------


def _su(value: object, what: str) -> Decimal:
    """``value`` as SU (``su_amount``: a number, at most 6 places), not negative, below any
    pool's size; else an ``AllocationError``."""
    amount = su_amount(str(value), what)
    check_rule(amount >= 0, f"{what} cannot be negative")
    check_rule(amount < MAX_SU, f"{what} is more than any pool holds")
    return amount


def _text(value: str, what: str) -> str:
    text = (value or "").strip()
    check_rule(bool(text), f"say {what}")
    return text


def _amounts(amounts: Mapping[str, object], what: str) -> dict[ResourcePool, Decimal]:
    """SU per pool named by its name; an unknown pool or a bad amount is refused."""
    pools = {pool.name: pool for pool in ResourcePool.objects.filter(name__in=list(amounts))}
    decided: dict[ResourcePool, Decimal] = {}
    for name, value in amounts.items():
        check_rule(name in pools, f"unknown pool {name}")
        decided[pools[name]] = _su(value, f"{what} on {name}")
    return decided


def person_named(name: str) -> User:
    """The active user with username ``name``, else the one with that e-mail address."""
    text = _text(name, "who the PI is (a username or an e-mail address)")
    user = User.objects.filter(username=text, is_active=True).first()
    if user is not None:
        return user
    matches = list(User.objects.filter(email__iexact=text, is_active=True)[:2])
    check_rule(len(matches) < 2, f"several people have the address {text}: name the PI by username")
    check_rule(
        bool(matches),
        f"no one with the username or e-mail address {text} has signed in to the portal yet: "
        "ask them to sign in once, then name them",
    )
    return matches[0]


def _transition(request: ProjectRequest, to_state: str, actor: User, note: str = "") -> None:
    ProjectRequestTransition.objects.create(
        request=request, from_state=request.state, to_state=to_state, actor=actor, note=note
    )
    request.state = to_state
    request.save()


def _check_state(request: ProjectRequest, *states: str, doing: str) -> None:
    """Refuse unless the request is in one of ``states``, read again under a row lock: two
    approvers deciding at once are served one after the other, and the second is refused."""
    request.state = (
        ProjectRequest.objects.select_for_update()
        .values_list("state", flat=True)
        .get(pk=request.pk)
    )
    check_rule(
        request.state in states,
        f"this request is {request.get_state_display()}: it cannot be {doing}",
    )


def _amounts_set(request: ProjectRequest, amounts: Mapping[ResourcePool, Decimal]) -> None:
    wanted = {pool: value for pool, value in amounts.items() if value > 0}
    check_rule(bool(wanted), "ask for some SU on a pool")
    request.amounts.exclude(pool__in=list(wanted)).delete()
    for pool, value in wanted.items():
        ProjectRequestAmount.objects.update_or_create(
            request=request, pool=pool, defaults={"requested_su": value}
        )


def _estimate_add(request: ProjectRequest, line: EstimateLine) -> ProjectRequestEstimate:
    return ProjectRequestEstimate.objects.create(
        request=request,
        description=line.description,
        **estimate_line_priced(partition=line.partition, jobs=line.jobs, quote=line.quote),
    )


# --- The requester --------------------------------------------------------------------------


@transaction.atomic
def project_request_create(
    *,
    requester: User,
    title: str,
    abstract: str,
    field_of_science: str,
    amounts: Mapping[str, object],
    pi: str = "",
    estimates: Sequence[EstimateLine] = (),
) -> ProjectRequest:
    """Anyone signed in asks for a new project. ``pi`` names its PI by username or e-mail
    address (blank: the requester); a PI other than the requester confirms first."""
    require(isinstance(requester, User) and requester.is_active, "sign in to ask for a project")
    title_text = _text(title, "the project's title")
    abstract_text = _text(abstract, "what the project is about (the abstract)")
    field_text = _text(field_of_science, "the project's field of science")
    asked = _amounts(amounts, "SU asked")
    lead = person_named(pi) if pi.strip() else requester
    own = lead.pk == requester.pk
    request = ProjectRequest.objects.create(
        title=title_text, abstract=abstract_text, field_of_science=field_text,
        requester=requester, pi=lead, state=State.SUBMITTED if own else State.AWAITING_PI,
        pi_confirmed_at=timezone.now() if own else None,
    )  # fmt: skip
    ProjectRequestTransition.objects.create(
        request=request, to_state=request.state, actor=requester
    )
    _amounts_set(request, asked)
    for line in estimates:
        _estimate_add(request, line)
    if own:
        notifications.notify_submitted(request)
    else:
        notifications.notify_pi_asked(request)
    return request


@transaction.atomic
def project_request_estimate_add(
    *, request: ProjectRequest, actor: User, line: EstimateLine
) -> ProjectRequestEstimate:
    """The requester adds an estimate line while the request waits for changes or its PI."""
    require(can_edit_project_request(actor, request), "only the person who asked edits it")
    _check_state(request, State.AWAITING_PI, State.CHANGES_REQUESTED, doing="edited")
    return _estimate_add(request, line)


@transaction.atomic
def project_request_resubmit(
    *,
    request: ProjectRequest,
    actor: User,
    title: str | None = None,
    abstract: str | None = None,
    field_of_science: str | None = None,
    amounts: Mapping[str, object] | None = None,
) -> ProjectRequest:
    """The requester makes the changes asked for and sends the request back to the
    approvers (the PI confirmed it already)."""
    require(can_edit_project_request(actor, request), "only the person who asked resubmits it")
    _check_state(request, State.CHANGES_REQUESTED, doing="resubmitted")
    if title is not None:
        request.title = _text(title, "the project's title")
    if abstract is not None:
        request.abstract = _text(abstract, "what the project is about (the abstract)")
    if field_of_science is not None:
        request.field_of_science = _text(field_of_science, "the project's field of science")
    if amounts is not None:
        _amounts_set(request, _amounts(amounts, "SU asked"))
    _transition(request, State.SUBMITTED, actor)
    notifications.notify_submitted(request)
    return request


# --- The named PI ---------------------------------------------------------------------------


@transaction.atomic
def project_request_pi_answer(
    *, request: ProjectRequest, actor: User, accept: bool, reason: str = ""
) -> ProjectRequest:
    """The person named PI confirms (the approvers then see the request) or declines."""
    require(can_confirm_project_request(actor, request), "only the person named PI confirms it")
    _check_state(request, State.AWAITING_PI, doing="confirmed or declined")
    if accept:
        request.pi_confirmed_at = timezone.now()
        _transition(request, State.SUBMITTED, actor, note=reason.strip())
        notifications.notify_submitted(request)
    else:
        request.decision_reason = reason.strip()
        _transition(request, State.PI_DECLINED, actor, note=reason.strip())
        notifications.notify_pi_declined(request)
    return request


# --- The approvers --------------------------------------------------------------------------


@transaction.atomic
def project_request_changes_ask(
    *, request: ProjectRequest, actor: User, reason: str
) -> ProjectRequest:
    """An approver sends a waiting request back to its requester, saying what to change."""
    require(approves_project_requests(actor), DECIDERS)
    _check_state(request, State.SUBMITTED, doing="sent back")
    request.decision_reason = _text(reason, "what to change")
    _transition(request, State.CHANGES_REQUESTED, actor, note=request.decision_reason)
    notifications.notify_changes_asked(request)
    return request


@transaction.atomic
def project_request_reject(*, request: ProjectRequest, actor: User, reason: str) -> ProjectRequest:
    """An approver rejects a waiting request, with a reason the requester and PI read."""
    require(approves_project_requests(actor), DECIDERS)
    _check_state(request, State.SUBMITTED, State.CHANGES_REQUESTED, doing="rejected")
    request.decision_reason = _text(reason, "why the request is rejected")
    request.decided_by = actor
    request.decided_at = timezone.now()
    _transition(request, State.REJECTED, actor, note=request.decision_reason)
    notifications.notify_decided(request)
    return request


@transaction.atomic
def project_request_approve(
    *,
    request: ProjectRequest,
    actor: User,
    code: str = "",
    period_start: date | None = None,
    period_end: date | None = None,
    granted: Mapping[str, object] | None = None,
    reason: str = "",
) -> ProjectRequest:
    """An approver approves a waiting request: the project (``code``, by default the centre's
    next), its PI and the requester as its manager; the SU granted per pool (by default as
    asked; a reason when it differs) as start-up allocations from ``period_start`` (today) to
    ``period_end`` (a year later); and, for each cluster, a Slurm plan for staff to review."""
    require(approves_project_requests(actor), DECIDERS)
    _check_state(request, State.SUBMITTED, doing="approved")
    project_code = (code or "").strip() or project_code_next()
    check_rule(
        bool(CODE.match(project_code)),
        f"{project_code!r} is not a Slurm account name: letters, digits, '_', '.' and '-'",
    )
    check_rule(
        not Project.objects.filter(code=project_code).exists(),
        f"a project {project_code} exists already",
    )
    start = period_start or timezone.localdate()
    end = period_end or add_months(start, 12)
    check_rule(start < end, "the allocation must end after it starts")
    check_rule((end - start).days <= MAX_DAYS, "a start-up allocation lasts ten years at most")
    asked = {amount.pool: amount for amount in request.amounts.select_related("pool")}
    decided = {amount.pool: amount.requested_su for amount in asked.values()}
    if granted is not None:
        for pool, value in _amounts(granted, "SU granted").items():
            check_rule(pool in asked, f"the request asked for no SU on {pool}")
            decided[pool] = value
    differs = any(decided[pool] != asked[pool].requested_su for pool in asked)
    check_rule(bool(reason.strip()) or not differs, "say why the grant differs from the request")

    project = project_create(
        code=project_code, title=request.title, pi=request.pi,
        field_of_science=request.field_of_science,
    )  # fmt: skip
    if request.requester_id != request.pi_id:
        # The requester runs the project for its PI (docs/allocations.md, "managers").
        Membership.objects.get_or_create(
            project=project, user=request.requester, defaults={"role": Membership.Role.MANAGER}
        )
    for pool, amount in asked.items():
        amount.granted_su = decided[pool]
        amount.save(update_fields=["granted_su"])
        if decided[pool] > 0:
            allocation_grant(
                project=project, pool=pool, amount=decided[pool], period_start=start,
                period_end=end, actor=actor, project_request=request,
                reason=f"start-up allocation (project request {request.pk})"
                + (f": {reason.strip()}" if reason.strip() else ""),
            )  # fmt: skip
    request.project = project
    request.decided_by = actor
    request.decided_at = timezone.now()
    request.decision_reason = reason.strip()
    planned = _slurm_plans_prepare(request, actor)
    note = reason.strip()
    if planned:
        note += f"{chr(10) if note else ''}Slurm accounts: a plan of {', '.join(planned)} waits"
        note += " for staff to review and apply it."
    _transition(request, State.APPROVED, actor, note=note)
    notifications.notify_decided(request)
    return request


def _slurm_plans_prepare(request: ProjectRequest, actor: User) -> list[str]:
    """Ask, after the commit, for a Slurm plan of each cluster the project got SU on: the
    reviewed provisioning (docs/slurm.md) shows the new accounts to staff, who apply them.
    The clusters' names, for the request's history."""
    clusters = dict(
        request.amounts.filter(~Q(granted_su=0), granted_su__isnull=False)
        .values_list("pool__cluster_id", "pool__cluster__name")
        .distinct()
    )
    for cluster_id in sorted(clusters):
        task_enqueue(
            name="allocations.tasks.slurm_sync_plan",
            kwargs={"cluster_id": cluster_id, "actor_id": actor.pk if is_staff(actor) else None},
            on_unsent=functools.partial(_plan_unsent, cluster_id),
        )
    return sorted(clusters.values())


def _plan_unsent(cluster_id: int, error: Exception) -> None:
    """The Slurm plan a decision asks for, when the task queue does not take it: the Slurm page
    says so (the decision stands; staff plan again from that page)."""
    SlurmSyncRequest.record_unsent(
        cluster_id=cluster_id,
        kind=SlurmSyncRequest.Kind.PLAN,
        error=f"the plan this decision asks for could not be handed to a worker: {error}",
    )

"""Write-side operations of rounds, requests and reviews: a round opens, a PI applies, the
committee reviews and the chair decides (which grants SU through ``allocations.grants``). Each
one checks who is acting first, and either does all of its work or none of it (one transaction)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounting.clusters.quotes import QuoteRequest
from accounting.models import Partition
from allocations import request_states
from allocations.access import (
    can_ask_for_change,
    can_assign_reviewers,
    can_decide,
    has_conflict,
    is_assigned_reviewer,
    is_committee,
)
from allocations.grants.estimates import estimate_line_priced
from allocations.grants.selectors import allocation_in_force, allocations_in_force, pool_today
from allocations.grants.services import (
    adjustment_top_up,
    allocation_extend,
    allocation_grant,
    allocation_raise,
    check_extension_end,
    check_rule,
    su_amount,
)
from allocations.models import (
    AllocationRequest,
    AllocationRound,
    CommitteeMember,
    ProgressReport,
    RequestAmount,
    RequestEstimate,
    RequestTransition,
    ResearchOutput,
    Review,
    ReviewAssignment,
    RoundPool,
)
from allocations.rounds.notifications import (
    notify_decision,
    notify_request_submitted,
    notify_review_assigned,
)
from allocations.rounds.selectors import applications_in_rounds, open_rounds
from kit.access import is_staff, require
from projects.access import project_writable_check
from projects.models import Project, ResourcePool

State = AllocationRequest.State
Kind = AllocationRequest.Kind
ZERO = Decimal(0)


# --- Rounds ---------------------------------------------------------------------------------


def _round_dates_check(
    *, opens_at: datetime, closes_at: datetime, period_start: date, period_end: date
) -> None:
    check_rule(opens_at < closes_at, "a round must open before it closes", field="closes_at")
    check_rule(
        period_start < period_end,
        "the period a round grants must not be empty: its end comes after its start",
        field="period_end",
    )


def _round_name_check(name: str, round_: AllocationRound | None = None) -> None:
    check_rule(bool(name.strip()), "a round needs a name", field="name")
    taken = AllocationRound.objects.filter(name=name)
    if round_ is not None:
        taken = taken.exclude(pk=round_.pk)
    check_rule(not taken.exists(), f"a round named {name!r} exists already", field="name")


@transaction.atomic
def round_create(
    *,
    name: str,
    opens_at: datetime,
    closes_at: datetime,
    period_start: date,
    period_end: date,
    available: Mapping[ResourcePool, Decimal],
    chair: User,
    committee: Iterable[User] = (),
    actor: User,
    requires_progress_report: bool = False,
) -> AllocationRound:
    """Staff open a call: dates, the period grants cover, SU per pool, the committee, and
    whether every renewal in it carries a progress report."""
    require(is_staff(actor), "only centre staff create allocation rounds")
    _round_name_check(name)
    _round_dates_check(
        opens_at=opens_at, closes_at=closes_at, period_start=period_start, period_end=period_end
    )
    round_ = AllocationRound.objects.create(
        name=name, opens_at=opens_at, closes_at=closes_at,
        period_start=period_start, period_end=period_end,
        requires_progress_report=requires_progress_report,
    )  # fmt: skip
    for pool, amount in available.items():
        round_pool_set(round_=round_, pool=pool, available=amount, actor=actor)
    CommitteeMember.objects.create(round=round_, user=chair, is_chair=True)
    for member in committee:
        if member.pk != chair.pk:
            CommitteeMember.objects.get_or_create(round=round_, user=member)
    return round_


@transaction.atomic
def round_update(
    *,
    round_: AllocationRound,
    actor: User,
    name: str,
    opens_at: datetime,
    closes_at: datetime,
    period_start: date,
    period_end: date,
    available: Mapping[ResourcePool, Decimal] | None = None,
    requires_progress_report: bool | None = None,
) -> AllocationRound:
    """Staff change a round's name, window or period, whether its renewals carry a progress
    report (``None``: as it is), and the SU it offers on the pools in ``available``
    (``round_pool_set``), all or nothing. The period stays as it is once the round has
    granted SU: the grants cover it. Renewals submitted before a round required a report keep
    none: the rule is checked at submission."""
    require(is_staff(actor), "only centre staff change allocation rounds")
    round_ = AllocationRound.objects.select_for_update().get(pk=round_.pk)
    _round_name_check(name, round_)
    _round_dates_check(
        opens_at=opens_at, closes_at=closes_at, period_start=period_start, period_end=period_end
    )
    if (period_start, period_end) != (round_.period_start, round_.period_end):
        check_rule(
            not RequestAmount.objects.filter(request__round=round_, granted_su__gt=0).exists(),
            f"the round {round_} has granted SU for its period; the period cannot change",
            field="period_start",
        )
    round_.name, round_.opens_at, round_.closes_at = name, opens_at, closes_at
    round_.period_start, round_.period_end = period_start, period_end
    if requires_progress_report is not None:
        round_.requires_progress_report = requires_progress_report
    round_.save(
        update_fields=[
            "name", "opens_at", "closes_at", "period_start", "period_end",
            "requires_progress_report",
        ]
    )  # fmt: skip
    for pool, amount in (available or {}).items():
        round_pool_set(round_=round_, pool=pool, available=amount, actor=actor)
    return round_


@transaction.atomic
def round_close(*, round_: AllocationRound, actor: User) -> AllocationRound:
    """Staff close an open round now: no more applications or submissions."""
    require(is_staff(actor), "only centre staff close allocation rounds")
    round_ = AllocationRound.objects.select_for_update().get(pk=round_.pk)
    now = timezone.now()
    check_rule(_round_is_open(round_, now), f"the round {round_} is not open")
    round_.closes_at = now
    round_.save(update_fields=["closes_at"])
    return round_


def _granted_in_round(round_: AllocationRound, pool: ResourcePool) -> Decimal:
    total = RequestAmount.objects.filter(
        request__round=round_, request__kind=AllocationRequest.Kind.NEW, pool=pool
    ).aggregate(total=Sum("granted_su"))["total"]
    return total or ZERO


@transaction.atomic
def round_pool_set(
    *, round_: AllocationRound, pool: ResourcePool, available: Decimal, actor: User
) -> RoundPool:
    """Staff set the SU a round offers on a pool (a pool not offered yet is added); never
    below zero nor below what the round has granted on it already."""
    require(is_staff(actor), "only centre staff set what a round offers")
    field = f"pool_{pool.pk}"
    try:
        value = su_amount(available, f"SU available on {pool}")
    except ArithmeticError:  # Decimal("ten"): not a number at all
        value = Decimal("NaN")
    check_rule(value.is_finite(), f"SU available on {pool} must be a number", field=field)
    check_rule(value >= 0, f"SU available on {pool} cannot be negative", field=field)
    granted = _granted_in_round(round_, pool)
    check_rule(
        value >= granted,
        f"the round has granted {granted.normalize():f} SU on {pool} already; it cannot offer less",
        field=field,
    )
    offer, _ = RoundPool.objects.update_or_create(
        round=round_, pool=pool, defaults={"available_su": value}
    )
    return offer


@transaction.atomic
def committee_add(
    *, round_: AllocationRound, user: User, actor: User, chair: bool = False
) -> CommitteeMember:
    """Staff seat someone on a round's committee; as chair, the chair before stays on the
    committee as a member (a round has one chair)."""
    require(is_staff(actor), "only centre staff seat a round's committee")
    check_rule(user.is_active, f"{user} cannot sign in and cannot review", field="user")
    if chair:
        for before in CommitteeMember.objects.filter(round=round_, is_chair=True).exclude(
            user=user
        ):  # one by one, so that the audit log records each
            before.is_chair = False
            before.save(update_fields=["is_chair"])
    seat, created = CommitteeMember.objects.get_or_create(
        round=round_, user=user, defaults={"is_chair": chair}
    )
    if not created and chair and not seat.is_chair:
        seat.is_chair = True
        seat.save(update_fields=["is_chair"])
    return seat


@transaction.atomic
def committee_remove(*, round_: AllocationRound, user: User, actor: User) -> None:
    """Staff take someone off a round's committee; the chair stays until another is named."""
    require(is_staff(actor), "only centre staff change a round's committee")
    seat = CommitteeMember.objects.filter(round=round_, user=user).first()
    check_rule(seat is not None, f"{user} is not on the committee of {round_}")
    assert seat is not None
    check_rule(not seat.is_chair, f"{user} chairs {round_}; name another chair first", field="user")
    seat.delete()


# --- Requests -------------------------------------------------------------------------------
#
# One model for every kind of change (docs/allocations.md, "Changing an allocation"): what
# each kind needs at creation is checked in ``request_create``, what may follow what in
# ``allocations/request_states.py``, who decides in ``allocations.access.deciding_round``.


def _transition(request: AllocationRequest, to_state: str, actor: User, note: str = "") -> None:
    check_rule(
        request_states.allowed(request.kind, request.state, to_state),
        f"a {request.get_state_display()} {request.get_kind_display()} cannot become "
        f"{State(to_state).label}",
    )
    RequestTransition.objects.create(
        request=request, from_state=request.state, to_state=to_state, actor=actor, note=note
    )
    request.state = to_state
    request.save(update_fields=["state", "decided_at", "decision_reason"])


def _round_is_open(round_: AllocationRound, at: datetime) -> bool:
    return round_.opens_at <= at < round_.closes_at


def _pools_offered(request: AllocationRequest) -> tuple[set[int], str]:
    """The pools a request may ask SU on, and where that rule comes from (for the message)."""
    if request.round is not None and request.in_round:
        offered = RoundPool.objects.filter(round=request.round).values_list("pool_id", flat=True)
        return set(offered), f"the round {request.round} offers no SU"
    if request.kind == Kind.APPEAL and request.appeal_of is not None:
        asked = request.appeal_of.amounts.values_list("pool_id", flat=True)
        return set(asked), "the decision appealed gave no SU to ask for"
    if request.grant is not None:
        why = f"a {request.get_kind_display()} adds SU to its grant's pool only, not"
        return {request.grant.pool_id}, why
    offered = RoundPool.objects.filter(round=request.round).values_list("pool_id", flat=True)
    return set(offered), f"the round {request.round} offers no SU"


def _set_amounts(request: AllocationRequest, amounts: Mapping[ResourcePool, Decimal]) -> None:
    offered, why = _pools_offered(request)
    for pool, amount in amounts.items():
        check_rule(pool.pk in offered, f"{why} on {pool}", field="amounts")
        value = su_amount(amount, f"SU requested on {pool}", field="amounts")
        check_rule(value >= 0, f"SU requested on {pool} cannot be negative", field="amounts")
        RequestAmount.objects.update_or_create(
            request=request, pool=pool, defaults={"requested_su": value}
        )


def _grant_in_force(project: Project, amounts: Mapping[ResourcePool, Decimal], what: str) -> Any:
    """The grant a top-up or an extension changes: the project's grant in force today on the
    one pool it names."""
    check_rule(len(amounts) == 1, f"a {what} names one pool and its SU", field="amounts")
    pool = next(iter(amounts))
    grant = allocation_in_force(project=project, pool=pool, on=pool_today(pool))
    check_rule(
        grant is not None,
        f"{project} holds no grant in force on {pool}: a {what} changes a current grant "
        "(apply in a round instead)",
        field="amounts",
    )
    return grant


def renewal_round_for(*, grant: Any) -> AllocationRound | None:
    """The round a renewal of ``grant`` goes into: the open round, closing first, whose period
    starts on or after the grant's end and that offers SU on its pool."""
    return (
        open_rounds()
        .filter(period_start__gte=grant.period_end, pools__pool=grant.pool)
        .order_by("closes_at", "pk")
        .first()
    )


def renewal_amounts(*, project: Project, round_: AllocationRound) -> dict[ResourcePool, Decimal]:
    """A renewal's amounts, pre-filled: what the project's grants in force hold on each pool
    the round offers."""
    offered = {item.pool_id for item in RoundPool.objects.filter(round=round_)}
    return {
        grant.pool: grant.granted_su
        for grant in allocations_in_force(project=project)
        if grant.pool_id in offered
    }


@transaction.atomic
def request_create(
    *,
    project: Project,
    actor: User,
    kind: str = Kind.NEW,
    round_: AllocationRound | None = None,
    justification: str = "",
    amounts: Mapping[ResourcePool, Decimal] | None = None,
    new_end: date | None = None,
    appeal_of: AllocationRequest | None = None,
) -> AllocationRequest:
    """Whoever manages the project starts a request (a draft) of one ``kind``:

    - ``new``: an application in an open ``round_``;
    - ``top_up``: more SU now on the grant in force on the one pool of ``amounts``;
    - ``extension``: that grant to end on ``new_end`` instead, with the SU of ``amounts``;
    - ``renewal``: the next period, in ``round_`` or else the next open round starting at or
      after the grant in force ends; ``amounts`` default to what the grants in force hold;
    - ``appeal``: more SU than ``appeal_of`` (a decision that gave less than asked) granted,
      once per decision; ``amounts`` are the SU asked on top, by default the shortfall.
    """
    if kind == Kind.APPEAL and appeal_of is not None:
        project = appeal_of.project
    require(can_ask_for_change(actor, project), f"only the PI of {project} applies for it")
    project_writable_check(project)
    check_rule(kind in request_states.KINDS, f"unknown kind of request {kind!r}", field="kind")
    amounts = dict(amounts or {})
    grant = None
    if kind in request_states.OUTSIDE_ROUNDS:
        check_rule(round_ is None, f"a {Kind(kind).label} is not made in a round", field="round")
    if kind == Kind.NEW:
        check_rule(round_ is not None, "an application names its round", field="round")
        assert round_ is not None
        check_rule(
            _round_is_open(round_, timezone.now()),
            f"the round {round_} is not open for applications",
            field="round",
        )
    elif kind in (Kind.TOP_UP, Kind.EXTENSION):
        grant = _grant_in_force(project, amounts, Kind(kind).label)
        if kind == Kind.EXTENSION:
            check_rule(new_end is not None, "an extension names its new end", field="new_end")
            assert new_end is not None
            check_extension_end(grant, new_end)
    elif kind == Kind.RENEWAL:
        current = allocations_in_force(project=project)
        check_rule(
            bool(current),
            f"{project} holds no grant in force to renew: apply in a round instead",
            field="kind",
        )
        grant = max(current, key=lambda item: item.period_end)
        if round_ is None:
            round_ = renewal_round_for(grant=grant)
            check_rule(
                round_ is not None,
                f"no open round covers the period after {grant.period_end}: a renewal goes into "
                "the next round when it opens (ask for an extension to go on meanwhile)",
                field="round",
            )
        assert round_ is not None
        check_rule(
            _round_is_open(round_, timezone.now()) and round_.period_start >= grant.period_end,
            f"a renewal goes into an open round whose period starts at or after "
            f"{grant.period_end}; {round_} does not",
            field="round",
        )
        amounts = amounts or renewal_amounts(project=project, round_=round_)
    elif kind == Kind.APPEAL:
        check_rule(
            appeal_of is not None, "an appeal names the decision it appeals", field="appeal_of"
        )
        assert appeal_of is not None
        check_rule(
            appeal_of.kind != Kind.APPEAL, "an appeal's decision is final", field="appeal_of"
        )
        check_rule(
            appeal_of.state in request_states.APPEALABLE,
            f"only a decision that gave less than asked may be appealed; request {appeal_of.pk} "
            f"is {appeal_of.get_state_display()}",
            field="appeal_of",
        )
        check_rule(
            not appeal_of.appeals.exists(),
            f"the decision on request {appeal_of.pk} was appealed already: once per decision",
            field="appeal_of",
        )
        amounts = amounts or {
            amount.pool: amount.requested_su - (amount.granted_su or ZERO)
            for amount in appeal_of.amounts.select_related("pool")
            if amount.requested_su > (amount.granted_su or ZERO)
        }
    if round_ is not None and kind in request_states.IN_ROUND:
        check_rule(
            not applications_in_rounds(projects=[project], rounds=[round_]),
            f"{project} already has an application in {round_}",
            field="round",
        )
    request = AllocationRequest.objects.create(
        round=round_, project=project, kind=kind, justification=justification, created_by=actor,
        grant=grant, new_end=new_end if kind == Kind.EXTENSION else None,
        appeal_of=appeal_of if kind == Kind.APPEAL else None,
    )  # fmt: skip
    RequestTransition.objects.create(request=request, to_state=State.DRAFT, actor=actor)
    _set_amounts(request, amounts)
    return request


def _editable_by(request: AllocationRequest, actor: User) -> None:
    require(
        can_ask_for_change(actor, request.project),
        f"only the PI of {request.project} edits its request",
    )
    project_writable_check(request.project)
    check_rule(
        request.state == State.DRAFT, f"a {request.get_state_display()} request cannot be edited"
    )


@transaction.atomic
def request_update(
    *,
    request: AllocationRequest,
    actor: User,
    justification: str | None = None,
    amounts: Mapping[ResourcePool, Decimal] | None = None,
    report_text: str | None = None,
    report_output_ids: Iterable[int] = (),
) -> AllocationRequest:
    """The PI edits a draft: its justification, its SU per pool and, on a renewal, its progress
    report (``report_text`` and the outputs it cites; written again only when it changed, so
    that who wrote it last stays true)."""
    _editable_by(request, actor)
    if justification is not None:
        request.justification = justification
        request.save(update_fields=["justification"])
    if amounts is not None:
        _set_amounts(request, amounts)
    if report_text is not None:
        wanted = set(report_output_ids)
        report = ProgressReport.objects.filter(request=request).first()
        if (
            report is None
            or report.text != report_text
            or set(report.outputs.values_list("pk", flat=True)) != wanted
        ):
            progress_report_set(
                request=request, actor=actor, text=report_text, output_ids=sorted(wanted)
            )
    return request


@transaction.atomic
def request_estimate_add(
    *,
    request: AllocationRequest,
    actor: User,
    partition: Partition,
    jobs: int,
    quote: QuoteRequest,
    description: str = "",
) -> RequestEstimate:
    """Add an estimate line priced by the quote engine: ``jobs`` times one job's SU."""
    _editable_by(request, actor)
    return RequestEstimate.objects.create(
        request=request,
        description=description,
        **estimate_line_priced(partition=partition, jobs=jobs, quote=quote),
    )


@transaction.atomic
def request_save_and_estimate(
    *,
    request: AllocationRequest,
    actor: User,
    justification: str,
    amounts: Mapping[ResourcePool, Decimal],
    partition: Partition,
    jobs: int,
    quote: QuoteRequest,
    description: str = "",
    report_text: str | None = None,
    report_output_ids: Iterable[int] = (),
) -> RequestEstimate:
    """The PI adds an estimate line from the draft's page, whose button sends the draft's
    figures, justification and progress report as the page shows them (typed, not saved yet):
    they are saved with the line, both or neither, so a refused line leaves the draft as it
    was and the page can show everything as typed again."""
    request_update(
        request=request, actor=actor, justification=justification, amounts=amounts,
        report_text=report_text, report_output_ids=report_output_ids,
    )  # fmt: skip
    return request_estimate_add(
        request=request, actor=actor, partition=partition, jobs=jobs, quote=quote,
        description=description,
    )  # fmt: skip


@transaction.atomic
def progress_report_set(
    *, request: AllocationRequest, actor: User, text: str, output_ids: Iterable[int] = ()
) -> ProgressReport:
    """Whoever manages the project writes a draft renewal's progress report: what the project
    did with the grant it renews, and which of the project's research outputs it led to
    (``output_ids``; another project's output is refused like one that does not exist).
    Written again, it replaces the text and the outputs."""
    _editable_by(request, actor)
    check_rule(
        request.kind == Kind.RENEWAL,
        "only a renewal carries a progress report",
        field="progress_report",
    )
    check_rule(
        bool(text.strip()),
        "a progress report needs its text: what the project did with the grant it renews",
        field="text",
    )
    wanted = sorted(set(output_ids))
    outputs = list(ResearchOutput.objects.filter(project=request.project, pk__in=wanted))
    missing = sorted(set(wanted) - {output.pk for output in outputs})
    check_rule(
        not missing,
        f"research output {', '.join(map(str, missing))} is not an output of {request.project}: "
        "a progress report links the project's own outputs",
        field="outputs",
    )
    report, _ = ProgressReport.objects.update_or_create(
        request=request, defaults={"text": text, "updated_by": actor}
    )
    report.outputs.set(outputs)
    return report


def _progress_report_check(request: AllocationRequest) -> None:
    """A renewal in a round that requires progress reports is submitted with one
    (``request_states.needs_progress_report``)."""
    round_ = request.round
    if round_ is None or not request_states.needs_progress_report(
        request.kind, round_.requires_progress_report
    ):
        return
    report = ProgressReport.objects.filter(request=request).first()
    check_rule(
        report is not None and bool(report.text.strip()),
        f"the round {round_} requires a progress report with every renewal: write it (what the "
        "project did with the grant it renews, and its research outputs) before submitting",
        field="progress_report",
    )


@transaction.atomic
def request_submit(*, request: AllocationRequest, actor: User) -> AllocationRequest:
    """The PI submits a draft: an application or a renewal while its round is open (a renewal
    with its progress report when the round requires one); a top-up, an extension or an
    appeal any time (it goes to ``deciding_round``'s chair, or staff)."""
    _editable_by(request, actor)
    if request.in_round and request.round is not None:
        check_rule(
            _round_is_open(request.round, timezone.now()), f"the round {request.round} is closed"
        )
    check_rule(
        request.amounts.filter(requested_su__gt=0).exists(), "a request must ask for some SU"
    )
    _progress_report_check(request)
    _transition(request, State.SUBMITTED, actor)
    notify_request_submitted(request)
    return request


def request_save_and_submit(
    *,
    request: AllocationRequest,
    actor: User,
    justification: str,
    amounts: Mapping[ResourcePool, Decimal],
    report_text: str | None = None,
    report_output_ids: Iterable[int] = (),
) -> AllocationRequest:
    """The PI submits a draft with the figures (and a renewal's progress report) the page
    shows (typed, or filled from the estimate, and not saved yet): they are saved first, in a
    transaction of their own, so a refused submission (a closed round, no SU asked for) keeps
    what was typed in the draft."""
    request_update(
        request=request, actor=actor, justification=justification, amounts=amounts,
        report_text=report_text, report_output_ids=report_output_ids,
    )  # fmt: skip
    return request_submit(request=request, actor=actor)


@transaction.atomic
def request_review_start(*, request: AllocationRequest, actor: User) -> AllocationRequest:
    """The chair (or staff) opens a submitted request for review."""
    require(
        can_decide(actor, request),
        "only the round's chair opens requests for review, never of a project of their own",
    )
    project_writable_check(request.project)
    check_rule(
        request_states.is_reviewed(request.kind),
        f"a {request.get_kind_display()} is decided without the committee's review",
    )
    check_rule(
        request.state == State.SUBMITTED,
        f"a {request.get_state_display()} request cannot go to review",
    )
    _transition(request, State.UNDER_REVIEW, actor)
    notify_review_assigned(request)
    return request


NOT_ASSIGNED = "the chair assigned other members of the committee to review this request"


@transaction.atomic
def review_assign(*, request: AllocationRequest, reviewer: User, actor: User) -> ReviewAssignment:
    """The chair (or staff) asks a member of the request's round's committee to review it;
    from the first assignment on, only the members assigned review the request and read the
    applicant's record. Never a member with a conflict of interest."""
    require(
        can_assign_reviewers(actor, request),
        "only the round's chair assigns reviewers, never to a request of their own project",
    )
    project_writable_check(request.project)
    check_rule(
        is_committee(reviewer, request.round),
        f"{reviewer} is not on the committee of {request.round}",
        field="reviewer",
    )
    check_rule(
        not has_conflict(reviewer, request.project),
        f"conflict of interest: {reviewer} belongs to {request.project} and cannot review it",
        field="reviewer",
    )
    check_rule(
        request.state in (State.SUBMITTED, State.UNDER_REVIEW),
        f"a {request.get_state_display()} request is not waiting for review",
    )
    assignment, _ = ReviewAssignment.objects.get_or_create(
        request=request, reviewer=reviewer, defaults={"assigned_by": actor}
    )
    return assignment


@transaction.atomic
def review_unassign(*, request: AllocationRequest, reviewer: User, actor: User) -> None:
    """The chair (or staff) takes a reviewer off a request. When the last one goes, the whole
    committee reviews it again. A review already written stays."""
    require(
        can_assign_reviewers(actor, request),
        "only the round's chair assigns reviewers, never to a request of their own project",
    )
    project_writable_check(request.project)
    assignment = ReviewAssignment.objects.filter(request=request, reviewer=reviewer).first()
    check_rule(
        assignment is not None,
        f"{reviewer} is not assigned to review this request",
        field="reviewer",
    )
    assert assignment is not None
    assignment.delete()


@transaction.atomic
def review_submit(
    *, request: AllocationRequest, reviewer: User, score: int, comment: str = ""
) -> Review:
    """A committee member scores (1-5) and comments, never on a project they belong to; when
    the chair assigned reviewers to the request, only those."""
    require(is_committee(reviewer, request.round), "only the round's committee reviews requests")
    require(
        not has_conflict(reviewer, request.project),
        f"conflict of interest: {reviewer} belongs to {request.project}",
    )
    require(is_assigned_reviewer(reviewer, request), NOT_ASSIGNED)
    project_writable_check(request.project)
    check_rule(
        request.state == State.UNDER_REVIEW,
        f"a {request.get_state_display()} request is not under review",
    )
    check_rule(isinstance(score, int) and 1 <= score <= 5, "a score is a whole number from 1 to 5")
    review, _ = Review.objects.update_or_create(
        request=request, reviewer=reviewer, defaults={"score": score, "comment": comment}
    )
    return review


@transaction.atomic
def request_decide(
    *,
    request: AllocationRequest,
    actor: User,
    granted: Mapping[ResourcePool, Decimal],
    reason: str = "",
) -> AllocationRequest:
    """The chair (``deciding_round``'s, or staff) grants SU per pool, possibly other than
    requested, with a reason. What a grant does depends on the kind:

    - an application or a renewal becomes allocations over the round's period, split into
      budget periods;
    - a top-up adds SU to the project's current budget period on its grant's pool;
    - an extension moves its grant's end to the new end and adds budget periods for the added
      span holding the SU granted;
    - an appeal raises the appealed decision's grant by the SU granted (``_appeal_apply``).

    Nothing granted on any pool is a rejection (an extension then keeps its end).
    """
    require(
        can_decide(actor, request),
        "only the round's chair grants SU, never to a project of their own",
    )
    project_writable_check(request.project)
    check_rule(
        request.state == request_states.decidable_from(request.kind),
        f"a {request.get_state_display()} request cannot be decided",
    )
    amounts = {amount.pool_id: amount for amount in request.amounts.select_related("pool")}
    for pool in granted:
        check_rule(
            pool.pk in amounts, f"{request.project} did not ask for SU on {pool}", field="granted"
        )
    decided = {
        pool_id: su_amount(granted.get(amount.pool, ZERO), "SU granted", field="granted")
        for pool_id, amount in amounts.items()
    }
    check_rule(
        all(value >= 0 for value in decided.values()), "a grant cannot be negative", field="granted"
    )
    differs = any(decided[pool_id] != amounts[pool_id].requested_su for pool_id in amounts)
    check_rule(
        bool(reason.strip()) or not differs,
        "say why the grant differs from the request",
        field="reason",
    )
    round_ = _capacity_round(request)
    if round_ is not None:
        _check_round_capacity(request, round_, decided)

    now = timezone.now()
    note = reason or "granted as requested"
    for pool_id, amount in amounts.items():
        amount.granted_su = decided[pool_id]
        amount.save(update_fields=["granted_su"])
        value = decided[pool_id]
        if value == 0:
            continue
        if request.in_round:
            assert request.round is not None
            allocation_grant(
                project=request.project, pool=amount.pool, amount=value,
                period_start=request.round.period_start, period_end=request.round.period_end,
                actor=actor, reason=reason, request=request,
            )  # fmt: skip
        elif request.kind == Kind.EXTENSION:
            assert request.grant is not None
            assert request.new_end is not None
            allocation_extend(
                allocation=request.grant, new_end=request.new_end, amount=value, actor=actor,
                request=request,
            )  # fmt: skip
        elif request.kind == Kind.APPEAL:
            _appeal_apply(request, amount.pool, value, actor, note)
        else:
            adjustment_top_up(
                project=request.project, pool=amount.pool, amount=value, actor=actor,
                reason=f"top-up request {request.pk}: {note}",
            )  # fmt: skip
    if not any(decided.values()):
        outcome = State.REJECTED
    elif differs:
        outcome = State.PARTIALLY_GRANTED
    else:
        outcome = State.GRANTED
    request.decided_at = now
    request.decision_reason = reason
    _transition(request, outcome, actor, note=reason)
    notify_decision(request)
    return request


def _appeal_apply(
    appeal: AllocationRequest, pool: ResourcePool, value: Decimal, actor: User, note: str
) -> None:
    """An appeal granted raises what the appealed decision gave on ``pool`` by ``value``: its
    grant on the pool when it made one (``allocation_raise``: over the budget periods not yet
    over), a new grant over the round's period when it gave nothing there, a top-up of the
    current budget period when it was a top-up; an extension's grant is raised like an
    application's."""
    original = appeal.appeal_of
    assert original is not None
    amount = original.amounts.get(pool=pool)
    if original.kind == Kind.TOP_UP:
        adjustment_top_up(
            project=appeal.project, pool=pool, amount=value, actor=actor,
            reason=f"appeal {appeal.pk} of top-up request {original.pk}: {note}",
        )  # fmt: skip
    else:
        grant = (
            original.grant
            if original.kind == Kind.EXTENSION
            else original.allocations.filter(pool=pool).first()
        )
        if grant is not None:
            allocation_raise(allocation=grant, amount=value, actor=actor, request=appeal)
        else:
            assert original.round is not None
            allocation_grant(
                project=appeal.project, pool=pool, amount=value,
                period_start=original.round.period_start, period_end=original.round.period_end,
                actor=actor, reason=f"appeal {appeal.pk}: {note}", request=original,
            )  # fmt: skip
    amount.granted_su = (amount.granted_su or ZERO) + value
    amount.save(update_fields=["granted_su"])


def _capacity_round(request: AllocationRequest) -> AllocationRound | None:
    """The round whose SU a decision spends: an application's or a renewal's own, an appeal's
    of one of them; a top-up and an extension spend no round's SU."""
    if request.in_round:
        return request.round
    original = request.appeal_of
    if original is not None and original.in_round:
        return original.round
    return None


def _check_round_capacity(
    request: AllocationRequest, round_: AllocationRound, decided: Mapping[int, Decimal]
) -> None:
    """Never more granted in a round than it has: its requests' grants (raised by appeals)."""
    for item in RoundPool.objects.filter(round=round_).select_related("pool"):
        if item.pool_id not in decided:
            continue
        already = (
            RequestAmount.objects.filter(request__round=round_, pool=item.pool)
            .exclude(request=request)
            .exclude(granted_su__isnull=True)
            .aggregate(total=Sum("granted_su"))["total"]
        )
        total = (already or ZERO) + decided[item.pool_id]
        check_rule(
            total <= item.available_su,
            f"the round has {item.available_su} SU on {item.pool}; "
            f"this grant would bring its grants to {total}",
            field="granted",
        )

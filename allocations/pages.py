"""Project, request, review and grant pages. Thin: forms check input, selectors read, the
services in ``allocations/services.py`` write (and check who acts).

Visibility: a project (and its requests) only to its members, PI and staff; a request also to
its round's committee; anyone else gets "not found". Someone who may see a page but not act on
it (a member on the PI's request form) gets "forbidden" with the service's reason.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_CEILING, Decimal
from functools import partial
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounting.clusters.quotes import QuoteRequest
from accounting.ledger.selectors import ledger_stamp, top_jobs, usage_per_day, usage_series
from accounting.models import Partition
from allocations import charts
from allocations.access import can_decide, can_decide_round, can_review, has_conflict, is_committee
from allocations.budget import estimate_mismatch
from allocations.forms import (
    EstimateForm,
    GrantForm,
    InvitationForm,
    RequestAmountsForm,
    RequestCreateForm,
    ReviewForm,
    UsageStepForm,
)
from allocations.models import AllocationRequest, RequestAmount, RoundPool
from allocations.page_selectors import (
    open_rounds,
    request_for_user,
    request_next_step,
    requests_of_project,
    round_for_committee,
    round_pools,
    round_requests_for_committee,
    rounds_for_user,
)
from allocations.selectors import adjustments_for_project, balances_for_project, round_overview
from allocations.services import (
    AllocationError,
    request_create,
    request_decide,
    request_estimate_add,
    request_review_start,
    request_submit,
    request_update,
    review_submit,
)
from kit.access import require
from kit.caching import remembered
from kit.charts import Chart, find_chart
from projects.access import can_delegate, can_manage_project, projects_managed
from projects.invitations import invitations_of
from projects.models import Project, ResourcePool
from projects.selectors import memberships_of, project_for_user, role_in_project

# How far back the usage charts reach for each step.
USAGE_WINDOWS = {"day": 60, "week": 26 * 7, "month": 365}


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _usage_window(step: str, today: date) -> tuple[date, date]:
    end = today + timedelta(days=1)
    start = today - timedelta(days=USAGE_WINDOWS[step] - 1)
    if step == "week":
        start -= timedelta(days=start.weekday())
    elif step == "month":
        start = start.replace(day=1)
    return start, end


# --- Project page -----------------------------------------------------------------------------


def _pool_usage_per_day(
    *, project: Project, pool: ResourcePool, start: date, end: date
) -> dict[date, Decimal]:
    partition_ids = list(pool.partitions.values_list("pk", flat=True))
    return usage_per_day(project=project, partition_ids=partition_ids, start=start, end=end)


@require_GET
@login_required
def project_detail(request: HttpRequest, code: str) -> HttpResponse:
    """Balances with burn-down, usage by partition and by user, top jobs, adjustments, members."""
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    step_form = UsageStepForm(request.GET or None)
    step = (step_form.is_valid() and step_form.cleaned_data.get("step")) or "week"
    pool_balances = balances_for_project(project=project)
    today = pool_balances[0].balance.on if pool_balances and pool_balances[0].balance else None
    today = today or datetime.now(UTC).date()

    pools = []
    chart_list: list[Chart] = []
    # Chart data changes only with the ledger: cached under its stamp (portal/caching.py).
    stamp = ledger_stamp()
    for item in pool_balances:
        balance = item.balance
        burn = None
        if balance is not None:
            used_until = min(balance.end, balance.on + timedelta(days=1))
            used = remembered(
                ("burn", project.pk, item.pool.pk, balance.start, used_until, stamp),
                partial(
                    _pool_usage_per_day,
                    project=project,
                    pool=item.pool,
                    start=balance.start,
                    end=used_until,
                ),
            )
            burn = charts.burn_down(
                key=f"burn-{item.pool.pk}", pool=item.pool.name, start=balance.start,
                end=balance.end, today=balance.on, available_su=balance.available_su,
                used_per_day=used,
                burn_rate_per_day=max(balance.burn_rate_7_days, balance.burn_rate_30_days),
                projected_exhaustion=balance.projected_exhaustion,
            )  # fmt: skip
            chart_list.append(burn)
        pools.append(
            {
                "pool": item.pool,
                "balance": balance,
                "currency": item.currency,
                "burn": burn,
                "alert": charts.alert_level(
                    balance.percent_used if balance else None, item.pool.thresholds
                ),
            }
        )

    start, end = _usage_window(step, today)
    by_partition = charts.usage_stacked(
        key="usage-partition",
        title=f"SU per {step} by partition",
        points=[
            (p.period, p.key, p.service_units)
            for p in remembered(
                ("usage", project.pk, start, end, step, "partition", stamp),
                lambda: usage_series(
                    project=project, start=start, end=end, step=step, group="partition"
                ),
            )
        ],
        step=step,
        group_label="partition",
    )
    by_user = charts.usage_stacked(
        key="usage-user",
        title=f"SU per {step} by user",
        points=[
            (p.period, p.key, p.service_units)
            for p in remembered(
                ("usage", project.pk, start, end, step, "user", stamp),
                lambda: usage_series(
                    project=project, start=start, end=end, step=step, group="user"
                ),
            )
        ],
        step=step,
        group_label="user",
    )
    chart_list += [by_partition, by_user]
    wanted = find_chart(chart_list, request.GET.get("csv", ""))
    if wanted is not None:
        return wanted.csv_response(project.code)

    manages = can_manage_project(request.user, project)
    context = {
        "project": project,
        "role": role_in_project(user=request.user, project=project),
        "can_apply": manages,
        "can_delegate": manages and can_delegate(request.user, project),  # PIs manage too
        "invitations": (
            invitations_of(project=project).filter(accepted_at__isnull=True)[:20] if manages else []
        ),
        "invitation_form": InvitationForm(),
        "role_choices": [("member", "member"), ("manager", "manager")],
        "pools": pools,
        "step_form": step_form,
        "step": step,
        "usage_start": start,
        "by_partition": by_partition,
        "by_user": by_user,
        # The ten costliest jobs since the window's start read one heap block per job of the
        # project in it (300 ms at 10M jobs): cached like the charts, under the ledger's stamp.
        "top_jobs": remembered(
            ("top jobs", project.pk, start, stamp),
            partial(
                top_jobs, project=project, ended_from=datetime.combine(start, time.min, tzinfo=UTC)
            ),
        ),
        "adjustments": adjustments_for_project(project=project).order_by("-created_at", "-pk")[:50],
        "members": memberships_of(project=project),
        "requests": requests_of_project(project=project)[:20],
    }
    return render(request, "allocations/project_detail.html", context)


# --- Requests: PI -----------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def request_new(request: HttpRequest, code: str) -> HttpResponse:
    """The PI starts an application (a draft) in an open round."""
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    require(can_manage_project(request.user, project), f"only the PI of {project} applies for it")
    rounds = open_rounds()
    # From the rounds page's "Apply for" link: that round is chosen already.
    chosen = (
        rounds.filter(pk=request.GET["round"]).first()
        if request.GET.get("round", "").isdigit()
        else None
    )
    form = RequestCreateForm(
        request.POST or None, rounds=rounds, initial={"round": chosen} if chosen else None
    )
    if request.method == "POST" and form.is_valid():
        try:
            created = request_create(
                round_=form.cleaned_data["round"], project=project, actor=_user(request),
                justification=form.cleaned_data["justification"],
            )  # fmt: skip
        except AllocationError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, "Draft saved. Add the SU you ask for and an estimate.")
            return redirect("allocations:request-detail", pk=created.pk)
    return render(request, "allocations/request_new.html", {"project": project, "form": form})


def _visible_request(request: HttpRequest, pk: int) -> AllocationRequest:
    found = request_for_user(user=request.user, pk=pk)
    if found is None:
        raise Http404
    return found


def _require_pi(request: HttpRequest, allocation_request: AllocationRequest) -> None:
    """Who is asking is checked before what was asked (403 with the rule in words)."""
    project = allocation_request.project
    require(
        can_manage_project(request.user, project), f"only the PI of {project} edits its request"
    )


def _round_partitions(allocation_request: AllocationRequest) -> list[Partition]:
    return list(
        Partition.objects.filter(
            pool_membership__pool_id__in=RoundPool.objects.filter(
                round=allocation_request.round
            ).values("pool_id")
        )
        .select_related("cluster")
        .order_by("cluster__name", "name")
    )


def _amounts_initial(
    allocation_request: AllocationRequest, totals: dict[int, Decimal]
) -> dict[str, Any]:
    """The draft's amounts; a pool asked for nothing yet starts at its estimate's total."""
    initial: dict[str, Any] = {"justification": allocation_request.justification}
    for pool_id, total in totals.items():
        initial[f"pool_{pool_id}"] = format(total.to_integral_value(ROUND_CEILING), "f")
    for amount in allocation_request.amounts.all():
        if amount.requested_su > 0 or amount.pool_id not in totals:
            initial[f"pool_{amount.pool_id}"] = format(amount.requested_su.normalize(), "f")
    return initial


def _estimate_warnings(
    allocation_request: AllocationRequest, totals: dict[int, Decimal]
) -> list[str]:
    """A line for each pool whose requested SU are far from the request's own estimate."""
    warnings = []
    for amount in allocation_request.amounts.select_related("pool").order_by("pool__name"):
        estimated = totals.get(amount.pool_id)
        if estimated is None:
            continue
        ratio = estimate_mismatch(requested_su=amount.requested_su, estimated_su=estimated)
        if ratio is None:
            continue
        how = f"{ratio:.1f} times" if ratio > 1 else f"{ratio:.0%} of"
        warnings.append(
            f"{amount.pool.name}: {amount.requested_su:,.0f} SU asked for is {how} the estimate "
            f"({estimated:,.0f} SU). Say why in the justification, or complete the estimate."
        )
    return warnings


def _estimate_totals(allocation_request: AllocationRequest) -> dict[int, Decimal]:
    rows = (
        allocation_request.estimates.values("partition__pool_membership__pool")
        .annotate(total=Sum("service_units"))
        .order_by()
    )
    return {row["partition__pool_membership__pool"]: row["total"] for row in rows}


@require_GET
@login_required
def request_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A request's status and history; the forms its viewer may use in its current state."""
    allocation_request = _visible_request(request, pk)
    user = request.user
    state = allocation_request.state
    pi = can_manage_project(user, allocation_request.project)
    chair = can_decide(user, allocation_request)
    committee = is_committee(user, allocation_request.round)
    editable = pi and state == AllocationRequest.State.DRAFT
    pools = round_pools(round_=allocation_request.round)
    totals = _estimate_totals(allocation_request)
    context: dict[str, Any] = {
        "req": allocation_request,
        "project": allocation_request.project,
        "amounts": RequestAmount.objects.filter(request=allocation_request)
        .select_related("pool")
        .order_by("pool__name"),
        "estimates": allocation_request.estimates.select_related("partition__cluster"),
        "estimate_totals": [
            (item.pool, totals[item.pool_id]) for item in pools if item.pool_id in totals
        ],
        "estimate_warnings": _estimate_warnings(allocation_request, totals),
        "next_step": request_next_step(request=allocation_request),
        "transitions": allocation_request.transitions.select_related("actor"),
        "show_reviews": chair or committee,
        "reviews": allocation_request.reviews.select_related("reviewer").order_by("created_at")
        if (chair or committee)
        else [],
        "editable": editable,
        "can_start_review": chair and state == AllocationRequest.State.SUBMITTED,
        "can_review": state == AllocationRequest.State.UNDER_REVIEW
        and can_review(user, allocation_request),
        "can_grant": chair and state == AllocationRequest.State.UNDER_REVIEW,
    }
    if editable:
        context["amounts_form"] = RequestAmountsForm(
            initial=_amounts_initial(allocation_request, totals), pools=pools
        )
        context["estimate_form"] = EstimateForm(partitions=_round_partitions(allocation_request))
    return render(request, "allocations/request_detail.html", context)


def _service_error(request: HttpRequest, error: Exception) -> None:
    messages.error(request, str(error.args[0]) if error.args else str(error))


@require_POST
@login_required
def request_edit(request: HttpRequest, pk: int) -> HttpResponse:
    allocation_request = _visible_request(request, pk)
    _require_pi(request, allocation_request)
    form = RequestAmountsForm(request.POST, pools=round_pools(round_=allocation_request.round))
    if not form.is_valid():
        for field, errors in form.errors.items():
            label = form.fields[field].label if field in form.fields else ""
            messages.error(
                request, f"{label or 'Form'}: {' '.join(str(error) for error in errors)}"
            )
        return redirect("allocations:request-detail", pk=pk)
    try:
        request_update(
            request=allocation_request, actor=_user(request),
            justification=form.cleaned_data["justification"], amounts=form.amounts(),
        )  # fmt: skip
    except (AllocationError, PermissionDenied) as error:
        _service_error(request, error)
    else:
        messages.success(request, "Request saved.")
    return redirect("allocations:request-detail", pk=pk)


@require_POST
@login_required
def request_estimate(request: HttpRequest, pk: int) -> HttpResponse:
    allocation_request = _visible_request(request, pk)
    _require_pi(request, allocation_request)
    partitions = _round_partitions(allocation_request)
    form = EstimateForm(request.POST, partitions=partitions)
    if not form.is_valid():
        for field, errors in form.errors.items():
            label = form.fields[field].label if field in form.fields else ""
            messages.error(
                request,
                f"Estimate {label or ''}: {' '.join(str(error) for error in errors)}".strip(),
            )
        return redirect("allocations:request-detail", pk=pk)
    data = form.cleaned_data
    partition = next(p for p in partitions if p.pk == data["partition"])
    planned = QuoteRequest(
        nodes=data["nodes"], hours=data["hours"], cores_per_node=data["cores_per_node"],
        gpus_per_node=data["gpus_per_node"], memory_per_node_mb=data["memory_per_node"],
    )  # fmt: skip
    try:
        line = request_estimate_add(
            request=allocation_request, actor=_user(request), partition=partition,
            jobs=data["jobs"], quote=planned, description=data["description"],
        )  # fmt: skip
    except (AllocationError, PermissionDenied, ValueError) as error:
        _service_error(request, error)
    else:
        messages.success(request, f"Estimate added: {line.service_units.normalize():,f} SU.")
    return redirect("allocations:request-detail", pk=pk)


@require_POST
@login_required
def request_submit_view(request: HttpRequest, pk: int) -> HttpResponse:
    allocation_request = _visible_request(request, pk)
    _require_pi(request, allocation_request)
    try:
        request_submit(request=allocation_request, actor=_user(request))
    except (AllocationError, PermissionDenied) as error:
        _service_error(request, error)
    else:
        messages.success(request, "Submitted: the committee will review it.")
    return redirect("allocations:request-detail", pk=pk)


# --- Committee --------------------------------------------------------------------------------


@require_POST
@login_required
def request_start_review(request: HttpRequest, pk: int) -> HttpResponse:
    allocation_request = _visible_request(request, pk)
    require(
        can_decide(request.user, allocation_request),
        "only the round's chair opens requests for review",
    )
    try:
        request_review_start(request=allocation_request, actor=_user(request))
    except (AllocationError, PermissionDenied) as error:
        _service_error(request, error)
    else:
        messages.success(request, "The request is open for review.")
    return redirect("allocations:request-detail", pk=pk)


@require_http_methods(["GET", "POST"])
@login_required
def review(request: HttpRequest, pk: int) -> HttpResponse:
    """A committee member scores a request under review and comments."""
    allocation_request = _visible_request(request, pk)
    require(
        is_committee(request.user, allocation_request.round),
        "only the round's committee reviews requests",
    )
    require(
        not has_conflict(request.user, allocation_request.project),
        f"conflict of interest: you belong to {allocation_request.project}",
    )
    existing = allocation_request.reviews.filter(reviewer_id=request.user.pk).first()
    form = ReviewForm.for_review(existing, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            review_submit(
                request=allocation_request, reviewer=_user(request),
                score=form.cleaned_data["score"], comment=form.cleaned_data["comment"],
            )  # fmt: skip
        except (AllocationError, PermissionDenied) as error:
            form.add_error(None, str(error.args[0]) if error.args else str(error))
        else:
            messages.success(request, "Review saved.")
            return redirect("allocations:round-detail", pk=allocation_request.round_id)
    context = {
        "req": allocation_request,
        "project": allocation_request.project,
        "form": form,
        "amounts": allocation_request.amounts.select_related("pool"),
        "estimates": allocation_request.estimates.select_related("partition__cluster"),
    }
    return render(request, "allocations/review.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def grant(request: HttpRequest, pk: int) -> HttpResponse:
    """The chair grants SU per pool (a reason when it differs from the request)."""
    allocation_request = _visible_request(request, pk)
    require(can_decide(request.user, allocation_request), "only the round's chair grants SU")
    amounts = list(allocation_request.amounts.select_related("pool").order_by("pool__name"))
    form = GrantForm(request.POST or None, amounts=amounts)
    if request.method == "POST" and form.is_valid():
        try:
            request_decide(
                request=allocation_request, actor=_user(request), granted=form.granted(),
                reason=form.cleaned_data["reason"],
            )  # fmt: skip
        except (AllocationError, PermissionDenied) as error:
            form.add_error(None, str(error.args[0]) if error.args else str(error))
        else:
            messages.success(request, f"Decided: {allocation_request.get_state_display()}.")
            return redirect("allocations:request-detail", pk=pk)
    reviews = allocation_request.reviews.select_related("reviewer").order_by("created_at")
    context = {
        "req": allocation_request,
        "project": allocation_request.project,
        "form": form,
        "amounts": amounts,
        "reviews": reviews,
        "average": reviews.aggregate(total=Sum("score"))["total"],
        # What the round still has, beside what this request asks for.
        "capacity": round_overview(round_=allocation_request.round, actor=request.user)["pools"],
    }
    if reviews:
        context["average"] = Decimal(context["average"] or 0) / len(reviews)
    return render(request, "allocations/grant.html", context)


@require_GET
@login_required
def round_list(request: HttpRequest) -> HttpResponse:
    """Rounds open for applications and the rounds the user sits on."""
    context = {
        "seats": rounds_for_user(user=request.user),
        "managed": list(projects_managed(user=request.user)),  # who may apply, and for what
    }
    return render(request, "allocations/round_list.html", context)


@require_GET
@login_required
def round_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The chair's overview (requested vs available SU per pool, scores) or, for a committee
    member, the requests to review."""
    seat = round_for_committee(user=request.user, pk=pk)
    if seat is None:
        raise Http404
    context: dict[str, Any] = {"seat": seat, "round": seat.round}
    if can_decide_round(request.user, seat.round):
        overview = round_overview(round_=seat.round, actor=request.user)
        chart = charts.round_pools(
            key="pools",
            pools=[
                (item.pool.name, item.available_su, item.requested_su, item.granted_su)
                for item in overview["pools"]
            ],
        )
        if request.GET.get("csv") == chart.key:
            return chart.csv_response(f"round-{seat.round.pk}")
        pools = overview["pools"]
        context.update(
            overview=overview,
            chart=chart,
            pool_rows=[
                {"summary": item, "left": item.available_su - item.granted_su} for item in pools
            ],
            request_rows=[
                {
                    "summary": summary,
                    "per_pool": [summary.requested.get(item.pool.pk) for item in pools],
                }
                for summary in overview["requests"]
            ],
        )
    context["to_review"] = round_requests_for_committee(round_=seat.round, user=request.user)
    return render(request, "allocations/round_detail.html", context)

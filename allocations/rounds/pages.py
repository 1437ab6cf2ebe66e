"""Request, review, grant and round pages. Thin: forms check input, selectors read, the
services in ``allocations/rounds/services.py`` write (and check who acts).

Visibility: a request only to its project's members, PI and staff, and to its round's
committee; anyone else gets "not found". Someone who may see a page but not act on it (a
member on the PI's request form) gets "forbidden" with the service's reason."""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounting.clusters.quotes import QuoteRequest
from allocations import request_states
from allocations.access import (
    can_appeal,
    can_ask_for_change,
    can_assign_reviewers,
    can_decide,
    can_decide_round,
    can_read_letter,
    can_read_record,
    can_read_reviews,
    can_review,
    has_conflict,
    is_assigned_reviewer,
    is_committee,
)
from allocations.grants.budget import estimate_mismatch
from allocations.grants.selectors import allocations_in_force, balances_for_project
from allocations.grants.services import AllocationError
from allocations.models import AllocationRequest, WhatIfDraft
from allocations.outputs.selectors import outputs_since
from allocations.rounds import charts
from allocations.rounds.forms import (
    EstimateForm,
    GrantForm,
    ProgressReportForm,
    RequestAmountsForm,
    RequestCreateForm,
    ReviewAssignForm,
    ReviewForm,
    WhatIfForm,
    WhatIfProposalForm,
)
from allocations.rounds.letters import letter_filename, letter_pdf
from allocations.rounds.record import applicant_record
from allocations.rounds.selectors import (
    RoundSeat,
    applications_in_rounds,
    changes_to_decide,
    committee_users,
    decision_letter_of,
    open_rounds,
    progress_report_of,
    request_amounts,
    request_assignments,
    request_estimate_totals,
    request_for_user,
    request_next_step,
    request_partitions,
    request_reviews,
    review_average,
    round_capacity,
    round_for_committee,
    round_overview,
    round_pools,
    round_requests_for_committee,
    rounds_for_user,
    what_if_draft_for,
    what_if_drafts,
    what_if_proposals,
    what_if_view,
)
from allocations.rounds.services import (
    NOT_ASSIGNED,
    progress_report_set,
    request_create,
    request_decide,
    request_estimate_add,
    request_review_start,
    request_save_and_estimate,
    request_save_and_submit,
    request_submit,
    request_update,
    review_assign,
    review_submit,
    review_unassign,
)
from allocations.rounds.what_if_services import (
    RUN_ROUND,
    what_if_apply,
    what_if_draft_create,
    what_if_proposal_set,
)
from kit.access import require
from kit.errors import ApplicationError
from kit.forms import error_on_field
from projects.access import (
    can_manage_project,
    can_see_project,
    project_is_writable,
    project_writable_check,
    projects_managed,
)
from projects.models import ResourcePool
from projects.selectors import project_for_user


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


# --- Requests: PI -----------------------------------------------------------------------------


# The kinds a PI picks on the new-request page; an appeal starts from the decision appealed.
PICKED_KINDS = (
    AllocationRequest.Kind.NEW,
    AllocationRequest.Kind.TOP_UP,
    AllocationRequest.Kind.EXTENSION,
    AllocationRequest.Kind.RENEWAL,
)
# A service's refusal about one input is shown on the form's field for it.
FORM_FIELD_OF = {"round": "round", "amounts": "su", "new_end": "new_end", "kind": None}

# The draft's form on the request page: the estimate line's and the progress report's fields
# and every button that posts the draft (Save, Add to the estimate, the report's, Submit)
# belong to it, so whichever is pressed sends everything the page shows.
DRAFT_FORM = "request-edit"
NOT_SAVED = "Nothing was saved: correct what is marked below."
NOT_SAVED_BECAUSE = "Nothing was saved: "
NOT_ADDED = "The estimate line was not added and nothing was saved: correct what is marked below."
NOT_ADDED_BECAUSE = "The estimate line was not added and nothing was saved: "
NOT_SUBMITTED = "Not submitted and nothing was saved: correct what is marked below."
REPORT_NOT_SAVED = "The progress report was not saved, nor anything else: correct what is marked."
LINE_NOT_ADDED = (
    "The estimate line typed below is not added yet: press Add to the estimate to add it."
)


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.POST.get(name) or request.GET.get(name) or ""
    return int(value) if value.isdigit() and len(value) < 19 else None


@require_http_methods(["GET", "POST"])
@login_required
def request_new(request: HttpRequest, code: str) -> HttpResponse:
    """Whoever manages the project starts a request (a draft) of a kind: an application in an
    open round, a top-up or an extension of a grant in force, a renewal into the next round,
    or (from a decided request) an appeal."""
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    require(can_ask_for_change(request.user, project), f"only the PI of {project} applies for it")
    project_writable_check(project)
    kind = request.POST.get("kind") or request.GET.get("kind") or AllocationRequest.Kind.NEW
    if kind not in AllocationRequest.Kind.values:
        kind = AllocationRequest.Kind.NEW
    appealed = None
    if kind == AllocationRequest.Kind.APPEAL:
        found = _int_param(request, "appeal_of")
        appealed = request_for_user(user=request.user, pk=found) if found else None
        if appealed is None or appealed.project_id != project.pk:
            raise Http404
    # A top-up, an extension and a renewal start from the grants in force (and show their use).
    from_grants = kind in (
        AllocationRequest.Kind.TOP_UP,
        AllocationRequest.Kind.EXTENSION,
        AllocationRequest.Kind.RENEWAL,
    )
    grants = allocations_in_force(project=project) if from_grants else []
    rounds = open_rounds()
    if kind == AllocationRequest.Kind.RENEWAL and grants:
        rounds = rounds.filter(period_start__gte=max(grant.period_end for grant in grants))
    # A round the project has applied in already is not offered (one application per round).
    applied = list(applications_in_rounds(projects=[project], rounds=rounds).values())
    rounds = rounds.exclude(pk__in=[item.round_id for item in applied])
    initial: dict[str, Any] = {"kind": kind}
    # From the rounds page's "Apply for" link or a pool's alert: that round or pool is chosen.
    chosen_round = _int_param(request, "round")
    if chosen_round is not None:
        initial["round"] = rounds.filter(pk=chosen_round).first()
    chosen_pool = _int_param(request, "pool")
    pools = [grant.pool for grant in grants]
    initial["pool"] = next((pool for pool in pools if pool.pk == chosen_pool), None)
    form = RequestCreateForm(
        request.POST or None, kind=kind, rounds=rounds, initial=initial,
        pools=ResourcePool.objects.filter(pk__in=[pool.pk for pool in pools]),
    )  # fmt: skip
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        amounts = (
            {data["pool"]: data["su"]} if data.get("pool") and data.get("su") is not None else {}
        )
        try:
            created = request_create(
                project=project, actor=_user(request), kind=kind, round_=data.get("round"),
                justification=data["justification"], amounts=amounts,
                new_end=data.get("new_end") if kind == AllocationRequest.Kind.EXTENSION else None,
                appeal_of=appealed,
            )  # fmt: skip
        except AllocationError as error:
            field = FORM_FIELD_OF.get(error.field or "")
            form.add_error(field if field in form.fields else None, str(error))
        else:
            messages.success(request, "Draft saved. Check the SU you ask for, then submit it.")
            return redirect("allocations:request-detail", pk=created.pk)
    balances = (
        {item.pool.pk: item.balance for item in balances_for_project(project=project)}
        if grants
        else {}
    )
    context = {
        "project": project,
        "form": form,
        "kind": kind,
        "kind_label": AllocationRequest.Kind(kind).label,
        "kinds": [(value, AllocationRequest.Kind(value).label) for value in PICKED_KINDS],
        # Each grant in force beside its current budget period's use (a renewal shows it).
        "grant_rows": [(grant, balances.get(grant.pool_id)) for grant in grants],
        "appealed": appealed,
        "applied": applied,
        # An application or renewal with no round left to go into: nothing to type or save.
        "no_round": kind in request_states.IN_ROUND and not rounds.exists(),
        "appealed_amounts": request_amounts(request=appealed) if appealed else [],
    }
    return render(request, "allocations/request_new.html", context)


def _visible_request(request: HttpRequest, pk: int) -> AllocationRequest:
    found = request_for_user(user=request.user, pk=pk)
    if found is None:
        raise Http404
    return found


def _project_context(request: HttpRequest, allocation_request: AllocationRequest) -> dict[str, Any]:
    """The project's link for whoever sees the request (its page for its people and staff; for
    the committee, the project's section of the request page itself, which shows what a
    reviewer may know of it), and the applicant's record for those who may read it."""
    user = request.user
    project = allocation_request.project
    sees_project = can_see_project(user, project)
    reads_record = can_read_record(user, allocation_request)
    return {
        "project_url": (
            reverse("allocations:project-detail", args=[project.code]) if sees_project else ""
        ),
        "reads_record": reads_record,
        "record": applicant_record(allocation_request) if reads_record else None,
    }


def _form_errors_say(request: HttpRequest, form: Any, prefix: str = "") -> None:
    """A posted form's errors as messages on the request page it redirects to, one per field
    ("Text: This field is required.")."""
    for field, errors in form.errors.items():
        label = form.fields[field].label if field in form.fields else ""
        text = " ".join(str(error) for error in errors)
        messages.error(request, f"{prefix}{label or ('' if prefix else 'Form')}: {text}".strip())


def _require_pi(request: HttpRequest, allocation_request: AllocationRequest) -> None:
    """Who is asking is checked before what was asked (403 with the rule in words)."""
    project = allocation_request.project
    require(
        can_manage_project(request.user, project), f"only the PI of {project} edits its request"
    )


def _request_pools(allocation_request: AllocationRequest) -> list[Any]:
    """The pools a draft's amounts may name, as rows with ``pool`` and ``pool_id``: its round's
    pools (an application, a renewal), else the pools it asks on (a top-up, an extension, an
    appeal)."""
    if allocation_request.in_round and allocation_request.round is not None:
        return list(round_pools(round_=allocation_request.round))
    return list(request_amounts(request=allocation_request))


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


def _estimate_fills(
    allocation_request: AllocationRequest, totals: dict[int, Decimal]
) -> dict[int, Decimal]:
    """The pools whose field shows the estimate's total rather than a saved figure, with the
    figure it shows (``_amounts_initial``)."""
    asked = {a.pool_id for a in allocation_request.amounts.all() if a.requested_su > 0}
    return {
        pool_id: total.to_integral_value(ROUND_CEILING)
        for pool_id, total in totals.items()
        if pool_id not in asked
    }


def _left_as_filled(form: RequestAmountsForm, fills: dict[int, Decimal]) -> set[int]:
    """Of the fields the estimate filled, those a posted draft form sent back unchanged."""
    typed = getattr(form, "cleaned_data", {})
    return {pool_id for pool_id, shown in fills.items() if typed.get(f"pool_{pool_id}") == shown}


def _amounts_typed(form: RequestAmountsForm, fills: dict[int, Decimal]) -> dict[Any, Decimal]:
    """A valid posted draft form's amounts, less the fields still showing the estimate's total:
    those stay unsaved, so that they go on following the estimate as lines are added."""
    untouched = _left_as_filled(form, fills)
    return {
        pool: Decimal(0) if pool.pk in untouched else amount
        for pool, amount in form.amounts().items()
    }


def _estimate_form(allocation_request: AllocationRequest, data: Any = None) -> EstimateForm:
    """The estimate line's form, its fields in the draft's form (``DRAFT_FORM``)."""
    return EstimateForm(
        data, partitions=request_partitions(request=allocation_request), form_id=DRAFT_FORM
    )


def _estimate_typed(allocation_request: AllocationRequest, posted: Any) -> dict[str, str]:
    """The estimate line's fields that ``posted`` (Save, pressed with a line typed and not
    added) changed from what the page shows untouched: the line's first partition, the
    form's own starting figures."""
    form = _estimate_form(allocation_request)
    partitions = getattr(form.fields["partition"], "choices", [])
    untouched = {name: form[name].value() for name in form.fields}
    if untouched["partition"] is None and partitions:
        untouched["partition"] = partitions[0][0]
    return {
        name: posted[name]
        for name, value in untouched.items()
        if name in posted and posted[name] != ("" if value is None else str(value))
    }


def _estimate_as_typed(allocation_request: AllocationRequest, typed: Any) -> EstimateForm:
    """The estimate line's form showing the values ``typed`` (a post that was not the line's:
    Save, Submit), unchecked, so that they are not lost and not reported as errors."""
    form = _estimate_form(allocation_request)
    form.initial = {name: typed[name] for name in form.fields if name in typed}
    return form


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


@require_GET
@login_required
def request_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A request's status and history; the forms its viewer may use in its current state.
    On a draft, an estimate line typed and not added when Save was pressed comes in the query
    (``request_edit``) and is shown as typed."""
    allocation_request = _visible_request(request, pk)
    typed = request.GET
    estimate_form = _estimate_as_typed(allocation_request, typed) if typed else None
    return _detail_page(request, allocation_request, estimate_form=estimate_form)


def _detail_page(
    request: HttpRequest,
    allocation_request: AllocationRequest,
    *,
    amounts_form: RequestAmountsForm | None = None,
    estimate_form: EstimateForm | None = None,
    report_form: ProgressReportForm | None = None,
) -> HttpResponse:
    """The request's page. On a draft, ``amounts_form``, ``estimate_form`` and
    ``report_form`` are forms posted and refused, shown again with what was typed and their
    errors; else the draft as saved."""
    user = request.user
    state = allocation_request.state
    writable = project_is_writable(allocation_request.project)  # archived: read-only
    pi = can_manage_project(user, allocation_request.project) and writable
    chair = can_decide(user, allocation_request) and writable
    reads_reviews = can_read_reviews(user, allocation_request)  # never one's own project's
    editable = pi and state == AllocationRequest.State.DRAFT
    pools = _request_pools(allocation_request)
    totals = request_estimate_totals(request=allocation_request)
    context: dict[str, Any] = {
        "req": allocation_request,
        "project": allocation_request.project,
        "amounts": request_amounts(request=allocation_request),
        "estimates": allocation_request.estimates.select_related("partition__cluster"),
        "estimate_totals": [
            (item.pool, totals[item.pool_id]) for item in pools if item.pool_id in totals
        ],
        "estimate_warnings": _estimate_warnings(allocation_request, totals),
        "next_step": request_next_step(request=allocation_request),
        "transitions": allocation_request.transitions.select_related("actor"),
        "show_reviews": reads_reviews,
        "reviews": request_reviews(request=allocation_request) if reads_reviews else [],
        "editable": editable,
        "can_start_review": chair
        and allocation_request.in_round
        and state == AllocationRequest.State.SUBMITTED,
        "can_review": state == AllocationRequest.State.UNDER_REVIEW
        and can_review(user, allocation_request)
        and writable,
        "can_grant": chair
        and writable
        and state == request_states.decidable_from(allocation_request.kind),
        "can_appeal": writable and can_appeal(user, allocation_request),
        "appeals": (
            list(allocation_request.appeals.all()) if state in request_states.DECIDED else []
        ),
        # A renewal's progress report (only a renewal carries one): whoever reads the request
        # reads it.
        "progress_report": (
            progress_report_of(allocation_request)
            if allocation_request.kind == AllocationRequest.Kind.RENEWAL
            else None
        ),
        "report_required": allocation_request.round is not None
        and request_states.needs_progress_report(
            allocation_request.kind, allocation_request.round.requires_progress_report
        ),
        "can_read_letter": state in request_states.DECIDED
        and can_read_letter(user, allocation_request),
        **_project_context(request, allocation_request),
        "assignments": None,  # the chair's list of reviewers (None: not theirs to see)
    }
    if editable and allocation_request.kind == AllocationRequest.Kind.RENEWAL:
        if report_form is None:
            report = context["progress_report"]
            report_form = ProgressReportForm(
                outputs=outputs_since(allocation_request.project, None), form_id=DRAFT_FORM,
                initial=(
                    {"text": report.text, "outputs": list(report.outputs.all())} if report else {}
                ),
            )  # fmt: skip
        context["report_form"] = report_form
    if can_assign_reviewers(user, allocation_request):
        context["assignments"] = request_assignments(request=allocation_request)
        waiting = (AllocationRequest.State.SUBMITTED, AllocationRequest.State.UNDER_REVIEW)
        if writable and state in waiting:
            context["assign_form"] = ReviewAssignForm(
                members=committee_users(round_=allocation_request.round)
            )
    if editable:
        fills = _estimate_fills(allocation_request, totals)
        if amounts_form is None:
            amounts_form = RequestAmountsForm(
                initial=_amounts_initial(allocation_request, totals), pools=pools
            )
            context["estimate_filled"] = set(fills)
        else:
            context["estimate_filled"] = _left_as_filled(amounts_form, fills)
        context["amounts_form"] = amounts_form
        context["estimate_form"] = (
            estimate_form if estimate_form is not None else _estimate_form(allocation_request)
        )
    return render(request, "allocations/request_detail.html", context)


def _typed_again(
    request: HttpRequest,
    allocation_request: AllocationRequest,
    message: str,
    *,
    amounts_form: RequestAmountsForm | None = None,
    estimate_form: EstimateForm | None = None,
    report_form: ProgressReportForm | None = None,
) -> HttpResponse:
    """A refused post from a draft's page: the page again with ``message``, every field as
    typed (the estimate line's too, whichever button was pressed) and the errors on them."""
    messages.error(request, message)
    allocation_request.refresh_from_db()  # the page says what is saved, not what was refused
    if estimate_form is None:
        estimate_form = _estimate_as_typed(allocation_request, request.POST)
    return _detail_page(
        request, allocation_request, amounts_form=amounts_form, estimate_form=estimate_form,
        report_form=report_form,
    )  # fmt: skip


def _report_posted(
    request: HttpRequest, allocation_request: AllocationRequest
) -> ProgressReportForm | None:
    """A renewal draft's progress report as the page's draft form sends it with every button,
    or None: no report on the page, or left blank with none saved (nothing typed)."""
    text = request.POST.get("text")
    if allocation_request.kind != AllocationRequest.Kind.RENEWAL or text is None:
        return None
    if not text.strip() and progress_report_of(allocation_request) is None:
        return None
    return ProgressReportForm(
        request.POST, outputs=outputs_since(allocation_request.project, None), form_id=DRAFT_FORM
    )


def _valid(*forms: Any) -> bool:
    """Every form given is valid (None: not posted); all are checked, so all errors show."""
    checked = [form.is_valid() for form in forms if form is not None]  # no short cut
    return all(checked)


def _refusal(error: Exception) -> str:
    return str(error.args[0]) if error.args else str(error)


def _service_error(request: HttpRequest, error: Exception) -> None:
    messages.error(request, _refusal(error))


@require_POST
@login_required
def request_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Save: the draft's figures and justification. Refused, the page comes back as typed."""
    allocation_request = _visible_request(request, pk)
    _require_pi(request, allocation_request)
    form = RequestAmountsForm(request.POST, pools=_request_pools(allocation_request))
    report = _report_posted(request, allocation_request)
    if not _valid(form, report):
        return _typed_again(
            request, allocation_request, NOT_SAVED, amounts_form=form, report_form=report
        )
    try:
        request_update(
            request=allocation_request, actor=_user(request),
            justification=form.cleaned_data["justification"], amounts=form.amounts(),
            report_text=report.cleaned_data["text"] if report else None,
            report_output_ids=report.output_ids() if report else (),
        )  # fmt: skip
    except (AllocationError, PermissionDenied) as error:
        return _typed_again(
            request, allocation_request, f"{NOT_SAVED_BECAUSE}{_refusal(error)}",
            amounts_form=form, report_form=report,
        )  # fmt: skip
    messages.success(request, "Request saved.")
    # Save is the form's first button, the one Enter presses in any of its fields, the
    # estimate line's too: a line typed and not added comes back as typed (in the query).
    line = _estimate_typed(allocation_request, request.POST)
    if not line:
        return redirect("allocations:request-detail", pk=pk)
    messages.info(request, LINE_NOT_ADDED)
    return redirect(f"{reverse('allocations:request-detail', args=[pk])}?{urlencode(line)}")


@require_POST
@login_required
def request_progress_report(request: HttpRequest, pk: int) -> HttpResponse:
    """The PI (or a manager) writes a draft renewal's progress report. The page's button
    belongs to the draft's form, so the SU and justification it shows come too and are saved
    with the report (a field still showing the estimate's total goes on following it); a
    post of the report's fields alone writes the report alone. Refused, the page comes back
    with everything as typed."""
    allocation_request = _visible_request(request, pk)
    _require_pi(request, allocation_request)
    form = ProgressReportForm(
        request.POST, outputs=outputs_since(allocation_request.project, None), form_id=DRAFT_FORM
    )
    shown = "justification" in request.POST
    amounts_form = (
        RequestAmountsForm(request.POST, pools=_request_pools(allocation_request))
        if shown
        else None
    )
    if not _valid(form, amounts_form):
        return _typed_again(
            request, allocation_request, REPORT_NOT_SAVED, amounts_form=amounts_form,
            report_form=form,
        )  # fmt: skip
    try:
        if amounts_form is None:
            progress_report_set(
                request=allocation_request, actor=_user(request),
                text=form.cleaned_data["text"], output_ids=form.output_ids(),
            )  # fmt: skip
        else:
            fills = _estimate_fills(
                allocation_request, request_estimate_totals(request=allocation_request)
            )
            request_update(
                request=allocation_request, actor=_user(request),
                justification=amounts_form.cleaned_data["justification"],
                amounts=_amounts_typed(amounts_form, fills),
                report_text=form.cleaned_data["text"], report_output_ids=form.output_ids(),
            )  # fmt: skip
    except (AllocationError, PermissionDenied) as error:
        return _typed_again(
            request, allocation_request, f"{NOT_SAVED_BECAUSE}{_refusal(error)}",
            amounts_form=amounts_form, report_form=form,
        )  # fmt: skip
    messages.success(request, "Progress report saved.")
    return redirect("allocations:request-detail", pk=pk)


@require_GET
@login_required
def request_letter(request: HttpRequest, pk: int) -> HttpResponse:
    """The decision letter of a decided request, as a PDF download: for the project's PI and
    managers, the chair who decides it and staff (``can_read_letter``). An undecided request
    has no letter: not found."""
    allocation_request = _visible_request(request, pk)
    letter = decision_letter_of(allocation_request)
    if letter is None:
        raise Http404
    require(
        can_read_letter(request.user, allocation_request),
        "only the project's PI and managers, the chair who decides it and centre staff read "
        "a decision letter",
    )
    name = letter_filename(project_code=allocation_request.project.code, request_id=pk)
    response = HttpResponse(letter_pdf(letter), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@require_POST
@login_required
def request_estimate(request: HttpRequest, pk: int) -> HttpResponse:
    """Add an estimate line to a draft. The page's button belongs to the draft's form
    (``form="request-edit"``), so the figures and justification the page shows come with the
    line, typed or not: they are saved with it (``request_save_and_estimate``), except a
    field still showing the estimate's total, which goes on following it. Anything invalid or
    refused saves nothing and adds nothing, and the page comes back with everything as typed.
    A post of the line's fields alone (no justification) adds the line alone."""
    allocation_request = _visible_request(request, pk)
    _require_pi(request, allocation_request)
    partitions = request_partitions(request=allocation_request)
    estimate_form = _estimate_form(allocation_request, request.POST)
    shown = "justification" in request.POST
    amounts_form = (
        RequestAmountsForm(request.POST, pools=_request_pools(allocation_request))
        if shown
        else None
    )
    report = _report_posted(request, allocation_request) if shown else None
    if not _valid(estimate_form, amounts_form, report):
        return _typed_again(
            request, allocation_request, NOT_ADDED,
            amounts_form=amounts_form, estimate_form=estimate_form, report_form=report,
        )  # fmt: skip
    data = estimate_form.cleaned_data
    partition = next(p for p in partitions if p.pk == data["partition"])
    planned = QuoteRequest(
        nodes=data["nodes"], hours=data["hours"], cores_per_node=data["cores_per_node"],
        gpus_per_node=data["gpus_per_node"], memory_per_node_mb=data["memory_per_node"],
    )  # fmt: skip
    try:
        if amounts_form is None:
            line = request_estimate_add(
                request=allocation_request, actor=_user(request), partition=partition,
                jobs=data["jobs"], quote=planned, description=data["description"],
            )  # fmt: skip
        else:
            fills = _estimate_fills(
                allocation_request, request_estimate_totals(request=allocation_request)
            )
            line = request_save_and_estimate(
                request=allocation_request, actor=_user(request),
                justification=amounts_form.cleaned_data["justification"],
                amounts=_amounts_typed(amounts_form, fills), partition=partition,
                jobs=data["jobs"], quote=planned, description=data["description"],
                report_text=report.cleaned_data["text"] if report else None,
                report_output_ids=report.output_ids() if report else (),
            )  # fmt: skip
    except (AllocationError, PermissionDenied, ValueError) as error:
        return _typed_again(
            request, allocation_request, f"{NOT_ADDED_BECAUSE}{_refusal(error)}",
            amounts_form=amounts_form, estimate_form=estimate_form, report_form=report,
        )  # fmt: skip
    messages.success(request, f"Estimate added: {line.service_units.normalize():,f} SU.")
    return redirect("allocations:request-detail", pk=pk)


@require_POST
@login_required
def request_submit_view(request: HttpRequest, pk: int) -> HttpResponse:
    allocation_request = _visible_request(request, pk)
    _require_pi(request, allocation_request)
    # The page's Submit button sends the draft's form (``form="request-edit"``): what it shows,
    # saved or not, is what is submitted. A bare POST submits the draft as saved.
    shown = "justification" in request.POST
    form = RequestAmountsForm(request.POST, pools=_request_pools(allocation_request))
    report = _report_posted(request, allocation_request) if shown else None
    if shown and not _valid(form, report):
        return _typed_again(
            request, allocation_request, NOT_SUBMITTED, amounts_form=form, report_form=report
        )
    try:
        if shown:
            request_save_and_submit(
                request=allocation_request, actor=_user(request),
                justification=form.cleaned_data["justification"], amounts=form.amounts(),
                report_text=report.cleaned_data["text"] if report else None,
                report_output_ids=report.output_ids() if report else (),
            )  # fmt: skip
        else:
            request_submit(request=allocation_request, actor=_user(request))
    except (AllocationError, PermissionDenied) as error:
        return _typed_again(
            request, allocation_request, _refusal(error),
            amounts_form=form if shown else None, report_form=report,
        )  # fmt: skip
    if allocation_request.in_round:
        messages.success(request, "Submitted: the committee will review it.")
    else:  # a top-up, an extension or an appeal goes straight to whoever decides it
        messages.success(request, "Submitted: no committee review, it waits for a decision.")
    return redirect("allocations:request-detail", pk=pk)


# --- Committee --------------------------------------------------------------------------------


@require_POST
@login_required
def request_start_review(request: HttpRequest, pk: int) -> HttpResponse:
    allocation_request = _visible_request(request, pk)
    require(
        can_decide(request.user, allocation_request),
        "only the round's chair opens requests for review, never of a project of their own",
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
    require(is_assigned_reviewer(request.user, allocation_request), NOT_ASSIGNED)
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
        **_project_context(request, allocation_request),
    }
    return render(request, "allocations/review.html", context)


@require_POST
@login_required
def request_assignments_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The chair assigns a committee member to review the request (``reviewer``), or takes
    one off it (``remove`` names them)."""
    allocation_request = _visible_request(request, pk)
    require(
        can_assign_reviewers(request.user, allocation_request),
        "only the round's chair assigns reviewers, never to a request of their own project",
    )
    members = committee_users(round_=allocation_request.round)
    removing = "remove" in request.POST
    form = ReviewAssignForm(
        {"reviewer": request.POST.get("remove" if removing else "reviewer", "")}, members=members
    )
    if not form.is_valid():
        messages.error(request, " ".join(str(error) for error in form.errors["reviewer"]))
        return redirect("allocations:request-detail", pk=pk)
    reviewer = form.cleaned_data["reviewer"]
    try:
        if removing:
            review_unassign(request=allocation_request, reviewer=reviewer, actor=_user(request))
        else:
            review_assign(request=allocation_request, reviewer=reviewer, actor=_user(request))
    except (AllocationError, PermissionDenied) as error:
        _service_error(request, error)
    else:
        name = reviewer.get_full_name() or reviewer.username
        messages.success(
            request,
            f"{name} no longer reviews this request."
            if removing
            else f"{name} is assigned to review this request.",
        )
    return redirect("allocations:request-detail", pk=pk)


@require_http_methods(["GET", "POST"])
@login_required
def grant(request: HttpRequest, pk: int) -> HttpResponse:
    """The chair grants SU per pool (a reason when it differs from the request)."""
    allocation_request = _visible_request(request, pk)
    require(
        can_decide(request.user, allocation_request),
        "only the round's chair grants SU, never to a project of their own",
    )
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
    # Whoever may decide may read the reviews (``can_decide`` implies ``can_read_reviews``).
    reviews = request_reviews(request=allocation_request)
    context = {
        "req": allocation_request,
        "project": allocation_request.project,
        "form": form,
        "amounts": amounts,
        "reviews": reviews,
        "average": review_average(request=allocation_request),
        # What the round still has, beside what this request asks for (a request in a round).
        "capacity": (
            round_overview(round_=allocation_request.round, actor=request.user)["pools"]
            if allocation_request.in_round and allocation_request.round is not None
            else []
        ),
    }
    return render(request, "allocations/grant.html", context)


@require_GET
@login_required
def round_list(request: HttpRequest) -> HttpResponse:
    """Rounds open for applications and the rounds the user sits on."""
    seats = rounds_for_user(user=request.user)
    # Who may apply, and for what: an archived project applies for nothing, and a project
    # applies once per round (its application is linked instead).
    managed = [p for p in projects_managed(user=request.user) if project_is_writable(p)]
    applied = applications_in_rounds(
        projects=managed, rounds=[seat.round for seat in seats if seat.is_open]
    )
    rows = [
        {
            "seat": seat,
            "may_apply": [p for p in managed if (seat.round.pk, p.pk) not in applied],
            "applied": [applied[key] for p in managed if (key := (seat.round.pk, p.pk)) in applied],
        }
        for seat in seats
    ]
    context = {"rows": rows, "managed": managed}
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
    runs_round = can_decide_round(request.user, seat.round)
    if runs_round:
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
            changes=changes_to_decide(round_=seat.round, user=request.user),
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
    # The round's figures per pool, for its whole committee; the what-if, for who runs it.
    context["capacity"] = round_capacity(round_=seat.round)
    context["runs_round"] = runs_round
    context["to_review"] = round_requests_for_committee(round_=seat.round, user=request.user)
    return render(request, "allocations/round_detail.html", context)


# --- The chair's what-if (docs/allocations.md, "Fitting a round to capacity") ---------------


def _round_run_by(request: HttpRequest, pk: int) -> RoundSeat:
    """The round, for whoever sits on it (404 for anyone else), run by its chair or staff (403
    with the rule for the rest of its committee)."""
    seat = round_for_committee(user=request.user, pk=pk)
    if seat is None:
        raise Http404
    require(can_decide_round(request.user, seat.round), RUN_ROUND)
    return seat


def _draft_of(request: HttpRequest, pk: int, draft: int) -> WhatIfDraft:
    found = what_if_draft_for(user=request.user, round_pk=pk, pk=draft)
    if found is None:
        raise Http404
    return found


@require_http_methods(["GET", "POST"])
@login_required
def round_what_if(request: HttpRequest, pk: int) -> HttpResponse:
    """The chair's what-if: pick a method and its parameters; the proposals are saved as a
    draft, shown on its own page."""
    seat = _round_run_by(request, pk)
    form = WhatIfForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            draft = what_if_draft_create(
                round_=seat.round, actor=_user(request), **form.parameters()
            )
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            return redirect("allocations:round-what-if-draft", pk=pk, draft=draft.pk)
    context = {
        "seat": seat,
        "round": seat.round,
        "form": form,
        "capacity": round_capacity(round_=seat.round),
        "drafts": what_if_drafts(round_=seat.round)[:20],
    }
    return render(request, "allocations/round_what_if.html", context)


@require_GET
@login_required
def round_what_if_draft(request: HttpRequest, pk: int, draft: int) -> HttpResponse:
    """A what-if draft: each request's proposal (editable until it is applied), the totals
    against what the round has left, and the button that applies it."""
    found = _draft_of(request, pk, draft)
    view = what_if_view(draft=found, actor=request.user)
    context = {"round": found.round, "view": view, "draft": found}
    return render(request, "allocations/round_what_if_draft.html", context)


@require_POST
@login_required
def round_what_if_proposal(
    request: HttpRequest, pk: int, draft: int, proposal: int
) -> HttpResponse:
    """The chair changes one proposal of a draft, with its reason."""
    found = _draft_of(request, pk, draft)
    item = what_if_proposals(draft=found, actor=request.user).filter(pk=proposal).first()
    if item is None:
        raise Http404
    form = WhatIfProposalForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{item.request_amount.request.project}: {_form_errors(form)}")
    else:
        try:
            what_if_proposal_set(
                proposal=item, actor=_user(request), proposed_su=form.cleaned_data["proposed_su"],
                reason=form.cleaned_data["reason"],
            )  # fmt: skip
        except ApplicationError as error:
            messages.error(request, f"{item.request_amount.request.project}: {error}")
        else:
            messages.success(
                request,
                f"{item.request_amount.request.project} on {item.request_amount.pool}: "
                f"{form.cleaned_data['proposed_su'].normalize():f} SU proposed.",
            )
    return redirect("allocations:round-what-if-draft", pk=pk, draft=draft)


@require_POST
@login_required
def round_what_if_apply(request: HttpRequest, pk: int, draft: int) -> HttpResponse:
    """Decide every request of the draft as it proposes, in one step."""
    found = _draft_of(request, pk, draft)
    try:
        what_if_apply(draft=found, actor=_user(request))
    except ApplicationError as error:
        messages.error(request, str(error))
        return redirect("allocations:round-what-if-draft", pk=pk, draft=draft)
    messages.success(request, "The what-if is applied: its requests are decided.")
    return redirect("allocations:round-detail", pk=pk)


def _form_errors(form: WhatIfProposalForm) -> str:
    return "; ".join(str(message) for errors in form.errors.values() for message in errors)

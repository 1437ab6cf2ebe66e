"""Staff's round pages: open a round, change its window, period and what it offers per pool,
close it, seat its committee and chair, in the portal rather than in /admin/. Staff first
(``staff_only``: 404 to anyone else), then the input; the rules are the services' in
``allocations/rounds/services.py``, the same ones ``POST /api/v1/rounds/`` calls."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from allocations.models import AllocationRound
from allocations.rounds.services import (
    committee_add,
    committee_remove,
    round_close,
    round_create,
    round_update,
)
from allocations.rounds.staff_forms import CommitteeAddForm, RoundCreateForm, RoundForm
from kit.access import staff_only
from kit.errors import ApplicationError
from kit.forms import error_on_field
from projects.models import ResourcePool


def _staff(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # staff_only ran
    return request.user


def _pools() -> list[ResourcePool]:
    return list(ResourcePool.objects.select_related("cluster").order_by("name"))


def _round(pk: int) -> AllocationRound:
    return get_object_or_404(AllocationRound.objects.prefetch_related("pools__pool"), pk=pk)


@require_GET
@staff_only
def staff_rounds(request: HttpRequest) -> HttpResponse:
    """Staff: every round, its window, period and chair."""
    rounds = AllocationRound.objects.prefetch_related("committee__user", "pools__pool")
    return render(request, "allocations/staff_rounds.html", {"rounds": rounds})


@require_http_methods(["GET", "POST"])
@staff_only
def staff_round_new(request: HttpRequest) -> HttpResponse:
    """Staff: a new round with its window, period, SU per pool and chair."""
    form = RoundCreateForm(request.POST or None, pools=_pools())
    if request.method == "POST" and form.is_valid():
        values = form.cleaned_data
        try:
            round_ = round_create(
                name=values["name"], opens_at=values["opens_at"], closes_at=values["closes_at"],
                period_start=values["period_start"], period_end=values["period_end"],
                available=form.available(), chair=values["chair"], actor=_staff(request),
                requires_progress_report=values["requires_progress_report"],
            )  # fmt: skip
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            messages.success(request, f"Round {round_} created.")
            return redirect("allocations:staff-round-edit", pk=round_.pk)
    status = 400 if form.is_bound else 200
    return render(request, "allocations/staff_round_form.html", {"form": form}, status=status)


def _edit_page(
    request: HttpRequest,
    round_: AllocationRound,
    form: RoundForm | None = None,
    committee_form: CommitteeAddForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {
        "round": round_,
        "form": form or RoundForm.for_round(round_, _pools()),
        "committee_form": committee_form or CommitteeAddForm(),
        "committee": round_.committee.select_related("user").order_by(
            "-is_chair", "user__username"
        ),
    }
    return render(request, "allocations/staff_round_form.html", context, status=status)


@require_http_methods(["GET", "POST"])
@staff_only
def staff_round_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Staff: a round's name, window, period, progress reports and SU per pool, in one change
    or none."""
    round_ = _round(pk)
    if request.method != "POST":
        return _edit_page(request, round_)
    form = RoundForm(request.POST, pools=_pools())
    if form.is_valid():
        values = form.cleaned_data
        try:
            round_update(
                round_=round_, actor=_staff(request), name=values["name"],
                opens_at=values["opens_at"], closes_at=values["closes_at"],
                period_start=values["period_start"], period_end=values["period_end"],
                available=form.available(),
                requires_progress_report=values["requires_progress_report"],
            )  # fmt: skip
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            messages.success(request, f"Round {values['name']} saved.")
            return redirect("allocations:staff-round-edit", pk=round_.pk)
    return _edit_page(request, _round(pk), form=form, status=400)


@require_POST
@staff_only
def staff_round_close(request: HttpRequest, pk: int) -> HttpResponse:
    """Staff: close an open round now."""
    round_ = _round(pk)
    try:
        round_close(round_=round_, actor=_staff(request))
    except ApplicationError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Round {round_} is closed for applications.")
    return redirect("allocations:staff-round-edit", pk=round_.pk)


@require_POST
@staff_only
def staff_committee_add(request: HttpRequest, pk: int) -> HttpResponse:
    """Staff: seat someone on the round's committee, or make them its chair."""
    round_ = _round(pk)
    form = CommitteeAddForm(request.POST)
    if form.is_valid():
        try:
            seat = committee_add(round_=round_, actor=_staff(request), **form.cleaned_data)
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            what = "chairs" if seat.is_chair else "sits on the committee of"
            messages.success(request, f"{seat.user} {what} {round_}.")
            return redirect("allocations:staff-round-edit", pk=round_.pk)
    return _edit_page(request, round_, committee_form=form, status=400)


@require_POST
@staff_only
def staff_committee_remove(request: HttpRequest, pk: int, username: str) -> HttpResponse:
    """Staff: take someone off the round's committee; never the chair (name another first)."""
    round_ = _round(pk)
    seat = get_object_or_404(round_.committee.select_related("user"), user__username=username)
    try:
        committee_remove(round_=round_, user=seat.user, actor=_staff(request))
    except ApplicationError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"{seat.user} left the committee of {round_}.")
    return redirect("allocations:staff-round-edit", pk=round_.pk)

"""Staff pages of rate drafts: a cluster's drafts with the form to add one, and a draft's
impact (docs/costs.md, "A rate change seen before it ships"). Thin: the form reads the input,
``accounting.ledger.rate_drafts`` checks and keeps the draft, ``rates_impact`` computes."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from accounting.clusters.specs import spec_document_decode
from accounting.ledger.rate_drafts import (
    rate_draft_create,
    rate_draft_discard,
    rate_draft_publish,
    rate_draft_rates,
)
from accounting.models import Cluster, RateDraft
from allocations.grants.forms import ImpactMonthsForm, RateDraftForm
from allocations.grants.rates_impact import rates_impact_get
from kit.access import staff_only
from kit.errors import ApplicationError


@require_http_methods(["GET", "POST"])
@staff_only
def rate_drafts(request: HttpRequest, name: str) -> HttpResponse:
    """Staff: the cluster's rate drafts, and a form to draft its next rates."""
    cluster = get_object_or_404(Cluster, name=name)
    form = RateDraftForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            draft = rate_draft_create(
                cluster=cluster,
                spec=spec_document_decode(data["spec_text"], source="the spec"),
                cost_model_text=data.get("cost_model") or "",
                note=data.get("note") or "",
                created_by=request.user,  # type: ignore[arg-type]
            )
        except ApplicationError as error:
            form.add_error(None, str(error))
        else:
            return redirect("allocations:rate-draft", pk=draft.pk)
    drafts = RateDraft.objects.filter(cluster=cluster).select_related("created_by")
    return render(
        request,
        "allocations/rate_drafts.html",
        {"cluster": cluster, "drafts": drafts, "form": form},
    )


@require_http_methods(["GET", "POST"])
@staff_only
def rate_draft(request: HttpRequest, pk: int) -> HttpResponse:
    """Staff: what a draft would have done to each project, and to discard or publish it."""
    draft = get_object_or_404(RateDraft.objects.select_related("cluster"), pk=pk)
    cluster = draft.cluster
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "discard":
            rate_draft_discard(draft=draft)
            messages.success(request, f"Draft {pk} discarded; nothing else changed.")
            return redirect("allocations:rate-drafts", name=cluster.name)
        if action == "publish":
            try:
                result = rate_draft_publish(draft=draft, published_by=request.user)  # type: ignore[arg-type]
            except ApplicationError as error:
                messages.error(request, str(error))
                return redirect("allocations:rate-draft", pk=pk)
            changed = ", ".join(result.created + result.versioned) or "no partition"
            messages.success(request, f"Draft {pk} is in force: new rates for {changed}.")
            return redirect("accounting:partition-list")
    months_form = ImpactMonthsForm(request.GET or None)
    months = 12
    if months_form.is_bound and months_form.is_valid():
        months = months_form.cleaned_data.get("months") or 12
    impact, problem = None, ""
    try:
        impact = rates_impact_get(rates=rate_draft_rates(draft), months=months)
    except ApplicationError as error:
        problem = str(error)
    return render(
        request,
        "allocations/rate_draft.html",
        {
            "cluster": cluster,
            "draft": draft,
            "impact": impact,
            "problem": problem,
            "months_form": months_form,
            "months": months,
            "spec_json": json.dumps(draft.spec, indent=2),
        },
    )

"""Staff pages of the money cost models (DESIGN section 6, docs/costs.md): a cluster's cost
model versions with the upload form, and the distribution of job cost over a period.

Thin views: forms check input, ``accounting.costs.services`` validates, saves and computes,
``charts.py`` draws. Only staff see them (403 for everyone else).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from accounting.clusters.selectors import clusters_by_recent_data
from accounting.costs import charts
from accounting.costs.services import (
    FIRST_DAY,
    LAST_DAY,
    CostDistribution,
    CostModelRejected,
    CostModelSummary,
    DistributionUnavailable,
    cost_distribution_get,
    cost_distribution_request,
    cost_model_check,
    cost_model_of,
    cost_model_summary,
    cost_model_version_create,
    cost_model_versions,
    job_costs_reprice_request,
)
from accounting.models import Cluster, CostModelVersion
from kit.access import staff_only
from kit.charts import Chart, find_chart
from kit.forms import uploaded_text
from kit.widgets import IsoDateInput

MAX_MODEL_BYTES = 1024 * 1024


# --- A cluster's cost models -------------------------------------------------------------------


class CostModelForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, help_text="default: v<number>")
    effective_from = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="UTC; empty: the first version covers the whole past, a later one starts now",
    )
    file = forms.FileField(required=False, help_text="a cost model file, or paste it below")
    text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "class": "mono"}),
        help_text="currency, nodes-are, nodes, rate and energy-rate lines (docs/costs.md)",
    )
    change_note = forms.CharField(required=False, widget=forms.TextInput())

    def clean_file(self) -> str | None:
        upload = self.cleaned_data.get("file")
        return uploaded_text(upload, max_bytes=MAX_MODEL_BYTES, what="a cost model file")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        text = data.get("file") or data.get("text") or ""
        if not text.strip() and not self.errors:
            raise forms.ValidationError("upload a cost model file or paste its text")
        data["model_text"] = text.replace("\r\n", "\n")
        when = data.get("effective_from")
        if when is not None and timezone.is_naive(when):
            data["effective_from"] = when.replace(tzinfo=UTC)
        elif when is not None:
            data["effective_from"] = when.astimezone(UTC)
        return data


def _version_rows(versions: list[CostModelVersion]) -> list[dict[str, Any]]:
    return [
        {"version": version, "summary": cost_model_summary(cost_model_of(version))}
        for version in versions
    ]


@require_http_methods(["GET", "POST"])
@staff_only
def cost_models(request: HttpRequest, name: str) -> HttpResponse:
    """Staff: the cluster's cost model versions, and a form to check and add the next one."""
    cluster = get_object_or_404(Cluster, name=name)
    if request.method == "POST" and request.POST.get("action") == "reprice":
        version_id = request.POST.get("version", "").strip()
        if not version_id.isdigit():
            raise Http404("no such version")
        version = get_object_or_404(CostModelVersion, cluster=cluster, pk=int(version_id))
        job_costs_reprice_request(version=version, actor=request.user)  # type: ignore[arg-type]
        version.refresh_from_db()
        if version.reprice_error:
            messages.error(request, f"Cost model v{version.number}: {version.reprice_error}.")
        else:
            messages.success(
                request,
                f"The jobs that ended since cost model v{version.number} took effect are being"
                " priced again.",
            )
        return redirect("accounting:cost-models", name=cluster.name)
    form = CostModelForm(request.POST or None, request.FILES or None)
    preview: CostModelSummary | None = None
    problem: CostModelRejected | None = None
    numbered: list[tuple[int, str]] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        text = data["model_text"]
        numbered = list(enumerate(text.split("\n"), start=1))
        try:
            if request.POST.get("action") == "save":
                version = cost_model_version_create(
                    cluster=cluster, name=data.get("name") or "", text=text,
                    effective_from=data.get("effective_from"),
                    created_by=request.user,  # type: ignore[arg-type]
                    change_note=data.get("change_note") or "",
                )  # fmt: skip
                version.refresh_from_db()
                if version.reprice_error:
                    messages.error(
                        request, f"Cost model v{version.number} saved, but {version.reprice_error}."
                    )
                else:
                    messages.success(
                        request,
                        f"Cost model v{version.number} saved; the jobs that ended since "
                        f"{version.effective_from:%Y-%m-%d %H:%M} UTC are being priced again.",
                    )
                return redirect("accounting:cost-models", name=cluster.name)
            preview = cost_model_summary(
                cost_model_check(
                    cluster=cluster, text=text, effective_from=data.get("effective_from")
                )
            )
        except CostModelRejected as error:
            problem = error
    versions = cost_model_versions(cluster=cluster)
    return render(
        request,
        "accounting/cost_models.html",
        {
            "cluster": cluster,
            "rows": _version_rows(versions),
            "form": form,
            "preview": preview,
            "problem": problem,
            "numbered": numbered,
            "posted_text": form.cleaned_data.get("model_text", "") if form.is_bound else "",
        },
    )


# --- The cost distribution ---------------------------------------------------------------------


class CostDistributionForm(forms.Form):
    cluster = forms.ModelChoiceField(
        queryset=Cluster.objects.filter(cost_models__isnull=False).distinct().order_by("name"),
        to_field_name="name",
        empty_label=None,
    )
    start = forms.DateField(required=False, widget=IsoDateInput(), help_text="first day")
    end = forms.DateField(
        required=False,
        widget=IsoDateInput(),
        help_text="the day after the last day",
    )
    model_version = forms.IntegerField(
        required=False, min_value=1, label="Model version", help_text="default: the newest"
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        for day in (start, end):
            if day is not None and not FIRST_DAY <= day <= LAST_DAY:
                raise forms.ValidationError(f"days from {FIRST_DAY} to {LAST_DAY} only")
        if start and end and start >= end:
            raise forms.ValidationError("the period must end after it starts")
        return data


def distribution_charts(distribution: CostDistribution) -> list[Chart]:
    axis = {"size": "job size (nodes)", "runtime": "runtime (hours)"}
    result = []
    for column in distribution.columns:
        result.append(
            charts.cost_quantile_curve(
                key=f"quantiles-{column.key}",
                title=f"{column.label} by quantile",
                axis_title=axis.get(column.key, f"job cost ({distribution.currency})"),
                unit=column.unit,
                points=[(q.percent, q.value) for q in column.statistics.quantiles],
            )
        )
    result.append(
        charts.cost_share_curve(
            key="cost-share",
            points=[(p.top_percent, p.jobs, p.share_percent) for p in distribution.concentration],
            currency=distribution.currency,
        )
    )
    return result


@require_GET
@staff_only
def cost_distribution(request: HttpRequest) -> HttpResponse:
    """Staff: quantiles of job size, runtime and cost, and how concentrated the cost is."""
    form = CostDistributionForm(request.GET or None)
    clusters = clusters_by_recent_data(form.fields["cluster"].queryset)  # type: ignore[attr-defined]
    if clusters:
        form.initial["cluster"] = clusters[0].name  # opens on the newest data, not the first name
    context: dict[str, Any] = {"form": form, "clusters": clusters}
    cluster: Cluster | None = None
    data: dict[str, Any] = {}
    if form.is_bound:
        if form.is_valid():
            data = form.cleaned_data
            cluster = data["cluster"]
    elif clusters:
        cluster = clusters[0]
    if cluster is None:
        return render(request, "accounting/cost_distribution.html", context)
    versions = cost_model_versions(cluster=cluster)
    try:
        version, start, end = cost_distribution_request(
            cluster=cluster, version_number=data.get("model_version"),
            start=data.get("start"), end=data.get("end"),
        )  # fmt: skip
    except DistributionUnavailable as error:
        form.add_error(error.field if error.field in form.fields else None, str(error))
        return render(request, "accounting/cost_distribution.html", context)
    distribution = cost_distribution_get(cluster=cluster, version=version, start=start, end=end)
    chart_list = distribution_charts(distribution)
    wanted_chart = find_chart(chart_list, request.GET.get("csv", ""))
    if wanted_chart is not None:
        return wanted_chart.csv_response(f"{cluster.name}-costs-{start}-{end}")
    cost_stats = distribution.column("cost").statistics
    context.update(
        {
            "cluster": cluster,
            "versions": versions,
            "version": version,
            "start": start,
            "end": end,
            "last_day": end - timedelta(days=1),
            "distribution": distribution,
            "cost": cost_stats,
            "top_1": distribution.top_share(Decimal(1)),
            "top_10": distribution.top_share(Decimal(10)),
            "charts": chart_list,
            "generated_at": datetime.now(UTC),
        }
    )
    return render(request, "accounting/cost_distribution.html", context)

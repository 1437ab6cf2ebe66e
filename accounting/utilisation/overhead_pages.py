"""Staff page of true overhead in canonical units (DESIGN.md section 5): start a computation
of a cluster's window, follow recent runs, and read a done run's per-partition time series,
histogram, canonical unit and fair-billing rates (with CSV of each chart). Thin: the form
checks input, ``accounting/utilisation/overhead.py`` computes and reads, ``charts.py`` draws.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from accounting.clusters.selectors import clusters_by_recent_data
from accounting.models import Cluster, OverheadRun
from accounting.utilisation import charts
from accounting.utilisation.overhead import (
    fair_rates,
    overhead_results,
    overhead_run_get,
    overhead_run_start,
    overhead_runs_recent,
    overhead_window_problem,
    unit_label,
)
from kit.access import staff_only
from kit.widgets import IsoDateInput

DEFAULT_DAYS = 7


class OverheadWindowForm(forms.Form):
    """A cluster and whole days in its time zone, from ``start`` to ``end`` inclusive."""

    cluster = forms.ModelChoiceField(queryset=Cluster.objects.order_by("name"), empty_label=None)
    start = forms.DateField(widget=IsoDateInput(), label="From")
    end = forms.DateField(widget=IsoDateInput(), label="To (inclusive)")
    step = forms.ChoiceField(choices=[("hour", "hour"), ("day", "day")], initial="hour")

    def window(self) -> tuple[datetime, datetime]:
        data = self.cleaned_data
        zone = data["cluster"].zoneinfo
        start = datetime.combine(data["start"], time.min, tzinfo=zone)
        end = datetime.combine(data["end"] + timedelta(days=1), time.min, tzinfo=zone)
        return start, end

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        start, end = self.window()
        problem = overhead_window_problem(start=start, end=end, step=data["step"])
        if problem:
            raise forms.ValidationError(problem)
        return data


def _percent(rate: Fraction | None) -> Decimal | None:
    if rate is None:
        return None
    return Decimal(rate.numerator * 100) / Decimal(rate.denominator)


def _partition_panels(run: OverheadRun) -> list[dict[str, Any]]:
    panels = []
    for result in overhead_results(run=run):
        name = result.partition.name
        unit = unit_label(result)
        histogram = {int(units): seconds for units, seconds in result.histogram.items()}
        unit_seconds = sum(bucket[2] for bucket in result.buckets)
        node_seconds = sum(histogram.values())
        cores, memory, gpus = fair_rates(result)
        panels.append(
            {
                "result": result,
                "name": name,
                "unit": unit,
                "mean_units": Decimal(unit_seconds) / node_seconds if node_seconds else None,
                "idle_share": (
                    Decimal(histogram.get(0, 0) * 100) / node_seconds if node_seconds else None
                ),
                "rates": [
                    ("cores", _percent(cores)),
                    ("memory", _percent(memory)),
                    ("GPUs", _percent(gpus)),
                ],
                "series": charts.overhead_series(
                    key=f"series-{name}", partition=name, unit=unit, buckets=result.buckets
                ),
                "histogram": charts.overhead_histogram(
                    key=f"histogram-{name}", partition=name, histogram=histogram
                ),
            }
        )
    return panels


def _initial(clusters: list[Cluster]) -> dict[str, Any]:
    # Days are the first cluster's (the form's default cluster), like the window it computes.
    zone = clusters[0].zoneinfo if clusters else None
    today = timezone.localdate(timezone=zone)
    return {
        "cluster": clusters[0] if clusters else None,
        "start": today - timedelta(days=DEFAULT_DAYS),
        "end": today - timedelta(days=1),
        "step": "hour",
    }


@require_http_methods(["GET", "POST"])
@staff_only
def overhead_page(request: HttpRequest) -> HttpResponse:
    """Staff: true overhead per partition of a cluster's window, and computing a new one."""
    clusters = clusters_by_recent_data()  # the form opens on the one with the newest data
    if request.method == "POST":
        form = OverheadWindowForm(request.POST)
        if form.is_valid():
            start, end = form.window()
            run = overhead_run_start(
                cluster=form.cleaned_data["cluster"], start=start, end=end,
                step=form.cleaned_data["step"], started_by=request.user,
            )  # fmt: skip
            messages.success(request, f"Computation {run.pk} of {run} started.")
            return redirect(f"{reverse('accounting:overhead')}?run={run.pk}")
    else:
        form = OverheadWindowForm(initial=_initial(clusters))
    runs = overhead_runs_recent()
    selected = _selected_run(request, runs)
    panels = _partition_panels(selected) if selected and selected.status == "done" else []
    wanted = request.GET.get("csv")
    if wanted:
        for panel in panels:
            for chart in (panel["series"], panel["histogram"]):
                if chart.key == wanted:
                    return chart.csv_response(f"overhead-{selected.pk if selected else ''}")
    return render(
        request,
        "accounting/overhead.html",
        {
            "form": form,
            "runs": runs,
            "selected": selected,
            "panels": panels,
            "any_running": any(run.status == OverheadRun.Status.RUNNING for run in runs),
        },
    )


def _selected_run(request: HttpRequest, runs: list[OverheadRun]) -> OverheadRun | None:
    """The run asked for (``?run=``), else the newest done one."""
    asked = request.GET.get("run", "")
    if asked.isdigit() and len(asked) < 19:
        return overhead_run_get(pk=int(asked))
    return next((run for run in runs if run.status == OverheadRun.Status.DONE), None)

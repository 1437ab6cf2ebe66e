"""Staff page of utilisation Q(T) (DESIGN section 4): load quality against peak FLOP beside the
classical core-hour and GPU-hour utilisation, per partition and for the cluster.

Thin: the form checks input, ``requested_window`` settles the window on the cluster's hours,
``utilisation_report_get`` reads (the hourly rows, never the jobs), ``charts.py`` draws.
The CSV download is the API's (``/api/v1/utilisation/?format=csv``): one code path for the rows.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounting.clusters.selectors import cluster_last_import, clusters_by_recent_data
from accounting.models import Cluster, Partition
from accounting.utilisation import charts
from accounting.utilisation.peak import PeakError, PeakSource
from accounting.utilisation.quality import (
    DEFAULT_WINDOW_DAYS,
    TOTAL,
    PeakInForce,
    Step,
    Utilisation,
    UtilisationError,
    WindowError,
    requested_window,
    utilisation_columns,
)
from accounting.utilisation.selectors import (
    UtilisationReport,
    jobs_in_window,
    utilisation_report_get,
)
from kit.access import staff_only
from kit.charts import Chart
from kit.widgets import IsoDateInput

BUCKETS_PER_PAGE = 100
_EPOCH_YEAR = 1970  # a first version "from the beginning" is stored at the Unix epoch


class UtilisationForm(forms.Form):
    cluster = forms.ModelChoiceField(
        queryset=Cluster.objects.order_by("name"), to_field_name="name", empty_label=None
    )
    partition = forms.ChoiceField(required=False, help_text="all: one line each and the total")
    start = forms.DateField(
        required=False, label="From", widget=IsoDateInput(),
        help_text=f"default: {DEFAULT_WINDOW_DAYS} days before the end",
    )  # fmt: skip
    end = forms.DateField(
        required=False, label="To (inclusive)", widget=IsoDateInput(),
        help_text="default: up to now",
    )  # fmt: skip
    step = forms.ChoiceField(
        choices=[(step.value, step.value) for step in Step], initial=Step.DAY.value,
        required=False, help_text="on the cluster's wall clock; weeks start on Monday",
    )  # fmt: skip

    def __init__(self, *args: Any, partitions: list[Partition], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = sorted({partition.name for partition in partitions})
        field = self.fields["partition"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "all partitions"), *((name, name) for name in names)]
        self.partitions = partitions

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        cluster, name = data.get("cluster"), data.get("partition")
        data["partition_object"] = None
        if cluster is not None and name:
            matching = [p for p in self.partitions if p.cluster_id == cluster.pk and p.name == name]
            if not matching:
                self.add_error("partition", f"cluster {cluster.name} has no partition {name}")
            else:
                data["partition_object"] = matching[0]
        return data


def _flops_text(flops: Decimal) -> str:
    """FLOP/s with an SI prefix: 8.31 PFLOP/s."""
    value = float(flops)
    for prefix, size in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9)):
        if value >= size:
            return f"{value / size:.3g} {prefix}FLOP/s"
    return f"{value:.3g} FLOP/s"


_SOURCE_TEXT = {
    PeakSource.FORMULA: "formula from parameters",
    PeakSource.VENDOR: "vendor peak FLOP/s",
}


def _peak_row(peak: PeakInForce, zone: Any) -> dict[str, Any]:
    since = peak.effective_from.astimezone(zone)
    return {
        "since": None if since.year <= _EPOCH_YEAR else since,
        "nodes": peak.node_count,
        "peak": _flops_text(peak.peak_flops),
        "cpu_source": _SOURCE_TEXT[peak.cpu_source],
        "gpu_source": _SOURCE_TEXT[peak.gpu_source] if peak.gpu_source else None,
    }


def _floats(percents: list[Any]) -> list[float | None]:
    """A column of percentages (decimal strings, None without capacity) as the chart's y."""
    return [None if value is None else round(float(value), 3) for value in percents]


def _charts(report: UtilisationReport, zone: Any, flagged: list[Any]) -> list[Chart]:
    starts = [window.start.astimezone(zone).replace(tzinfo=None) for window in report.windows]
    # Windows over 100 %: marked on both charts as inconsistent data, never plotted silently.
    marks = {
        window.start.astimezone(zone).replace(tzinfo=None): max(
            float(value)
            for value in (window.total.q_percent, window.total.core_percent,
                          window.total.gpu_percent)
            if value is not None
        )
        for window in flagged
    }  # fmt: skip
    names = [peaks.name for peaks in report.peaks]
    # Drawn from the columns the API answers (``utilisation_columns``): one array per figure.
    columns = utilisation_columns(report.windows, names)
    quality = {name: _floats(columns[name]["q_percent"]) for name in names}
    total_label = report.partition.name if report.partition else "cluster total"
    if report.partition is None:
        quality["cluster total"] = _floats(columns[TOTAL]["q_percent"])
    classical = {
        "Q(T), peak FLOP": _floats(columns[TOTAL]["q_percent"]),
        "core-hours": _floats(columns[TOTAL]["core_percent"]),
    }
    gpu = _floats(columns[TOTAL]["gpu_percent"])
    if any(value is not None for value in gpu):
        classical["GPU-hours"] = gpu
    return [
        charts.utilisation_quality(
            key="quality", starts=starts, series=quality, step=str(report.step),
            total="cluster total" if report.partition is None else None, inconsistent=marks,
        ),
        charts.utilisation_classical(
            key="classical", starts=starts, series=classical, step=str(report.step),
            scope=total_label, inconsistent=marks,
        ),
    ]  # fmt: skip


def _csv_url(report: UtilisationReport) -> str:
    query = {
        "cluster": report.cluster.name,
        "start": report.start.isoformat(),
        "end": report.end.isoformat(),
        "step": str(report.step),
        "format": "csv",
    }
    if report.partition:
        query["partition"] = report.partition.name
    return f"{reverse('api:utilisation')}?{urlencode(query)}"


def _local_midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day)  # naive: read on the cluster's clock


@require_GET
@staff_only
def utilisation(request: HttpRequest) -> HttpResponse:
    """Staff: Q(T) per bucket with one line per partition and the cluster's total, beside the
    core-hour and GPU-hour utilisation, the buckets as a table (CSV from the API), and where
    each partition's peak comes from."""
    partitions = list(Partition.objects.select_related("cluster").order_by("name"))
    # Asked for no cluster: open on the one whose data arrived last (not the first by name).
    recent = [] if request.GET.get("cluster") else clusters_by_recent_data()
    form = UtilisationForm(
        request.GET or None, partitions=partitions,
        initial={"cluster": recent[0]} if recent else {},
    )  # fmt: skip
    context: dict[str, Any] = {"form": form}
    if form.is_bound and not form.is_valid():
        return render(request, "accounting/utilisation.html", context)
    data = form.cleaned_data if form.is_bound else {}
    cluster = data.get("cluster") or (recent[0] if recent else None)
    if cluster is None:
        return render(request, "accounting/utilisation.html", context)
    zone = cluster.zoneinfo
    step = data.get("step") or Step.DAY.value
    first_day, last_day = data.get("start"), data.get("end")
    try:
        start, end = requested_window(
            start=_local_midnight(first_day) if first_day else None,
            end=_local_midnight(last_day + timedelta(days=1)) if last_day else None,
            step=step, timezone=zone, now=timezone.now(),
        )  # fmt: skip
        report = utilisation_report_get(
            cluster=cluster, partition=data.get("partition_object"), start=start, end=end,
            step=step,
        )  # fmt: skip
    except WindowError as error:
        form.add_error(error.field if error.field in form.fields else None, str(error))
        return render(request, "accounting/utilisation.html", context)
    except (PeakError, UtilisationError) as error:
        context["error"] = str(error)
        return render(request, "accounting/utilisation.html", context)
    flagged = [
        window
        for window in report.windows
        if window.total.overcommitted or any(p.overcommitted for p in window.partitions.values())
    ]
    if flagged:
        worst = max(flagged, key=lambda window: window.total.core_percent or Decimal(0))
        context["inconsistent"] = {
            "count": len(flagged),
            "worst": worst,
            "worst_start": worst.start.astimezone(zone),
            "jobs": jobs_in_window(
                cluster=cluster, partition=data.get("partition_object"), start=worst.start,
                end=worst.end,
            ),
            "starts": [window.start.astimezone(zone) for window in flagged[:50]],
        }  # fmt: skip
    page = Paginator(report.windows, BUCKETS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [
        {
            "start": window.start.astimezone(zone),
            "end": window.end.astimezone(zone),
            "partitions": [window.partitions[peaks.name] for peaks in report.peaks],
            "total": window.total,
        }
        for window in page.object_list
    ]
    peaks = [
        {
            "name": item.name,
            "now": _peak_row(item.now, zone) if item.now else None,
            "in_window": [_peak_row(peak, zone) for peak in item.in_window],
        }
        for item in report.peaks
    ]
    context.update(
        report=report, zone=zone, charts=_charts(report, zone, flagged), page=page, rows=rows,
        peaks=peaks, csv_url=_csv_url(report), local_start=report.start.astimezone(zone),
        local_end=report.end.astimezone(zone),
        whole=sum((window.total for window in report.windows), start=Utilisation()),
    )  # fmt: skip
    whole = context["whole"]
    if not whole.core_seconds and not whole.gpu_seconds:  # say when data last arrived
        context["last_import"] = cluster_last_import(cluster=cluster)
    return render(request, "accounting/utilisation.html", context)

"""Pages of energy and carbon: a project's energy and CO2e by month (with CSV), and the staff
page of a cluster's grid intensity (upload a series). Thin: selectors read, services write."""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from accounting.carbon import charts
from accounting.carbon.footprint import EnergySums, months_window, window_co2e_g
from accounting.carbon.forms import GridIntensityUploadForm
from accounting.carbon.selectors import (
    ClusterMonth,
    grid_intensity_recent,
    project_footprint_monthly,
)
from accounting.carbon.series_csv import IntensityCsvError
from accounting.carbon.services import grid_intensity_csv_load
from accounting.models import Cluster
from kit.access import staff_only
from projects.selectors import project_for_user, role_in_project

_KWH = Decimal("0.001")


def _kwh(wh: Decimal) -> Decimal:
    return (wh / 1000).quantize(_KWH)


def energy_rows(months: Iterable[ClusterMonth]) -> list[tuple[Any, ...]]:
    """The table (and CSV) of ``charts.ENERGY_COLUMNS``: kWh and kg to three places."""
    rows = []
    for row in months:
        month = row.footprint
        energy = month.energy
        co2e = month.co2e_g
        rows.append(
            (
                month.month.isoformat(), row.cluster, _kwh(energy.best_wh),
                _kwh(energy.measured_wh), _kwh(energy.estimated_wh),
                energy.measured_percent if energy.measured_percent is not None else "",
                charts.NOT_SET if co2e is None else (co2e / 1000).quantize(_KWH),
                charts.NOT_SET if month.mean_g_per_kwh is None else month.mean_g_per_kwh,
                energy.jobs,
            )
        )  # fmt: skip
    return rows


def _totals(months: Sequence[ClusterMonth]) -> dict[str, Any]:
    """The window's energy, its measured share, and its CO2e when every month has one."""
    energy = sum((row.footprint.energy for row in months), EnergySums())
    grams = window_co2e_g([row.footprint for row in months])
    return {
        "energy_kwh": _kwh(energy.best_wh),
        "measured_kwh": _kwh(energy.measured_wh),
        "measured_percent": energy.measured_percent,
        "co2e_kg": None if grams is None else (grams / 1000).quantize(_KWH),
    }


@require_GET
@login_required
def project_energy(request: HttpRequest, code: str) -> HttpResponse:
    """The project's energy (measured or estimated) and CO2e per month and cluster, from the
    daily roll-ups; ``?csv=energy`` downloads the table."""
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    start, end = months_window(datetime.now(UTC).date())  # the last twelve months
    months = project_footprint_monthly(project=project, start=start, end=end)
    chart = charts.energy_monthly(
        key="energy", title="Energy per month (kWh)", rows=energy_rows(months)
    )
    if request.GET.get("csv") == chart.key:
        return chart.csv_response(project.code)
    not_set = sorted({row.cluster for row in months if not row.intensity_set})
    keys = ("month", "cluster", "energy", "measured", "estimated", "percent", "co2e", "mean",
            "jobs")  # fmt: skip
    table = [dict(zip(keys, row, strict=True)) for row in chart.rows]
    return render(
        request,
        "accounting/project_energy.html",
        {
            "project": project,
            "role": role_in_project(user=request.user, project=project),
            "chart": chart,
            "table": table,
            "start": start,
            "last_day": end.fromordinal(end.toordinal() - 1),
            "totals": _totals(months),
            "not_set": not_set,
        },
    )


def _lines(upload: Any) -> Iterator[str]:
    """The upload's text, line by line (UTF-8, with or without a byte order mark)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    pending = ""
    for chunk in upload.chunks():
        pending += decoder.decode(chunk)
        *lines, pending = pending.split("\n")
        yield from (line + "\n" for line in lines)
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending


@require_http_methods(["GET", "POST"])
@staff_only
def grid_intensity(request: HttpRequest, name: str) -> HttpResponse:
    """Staff: a cluster's grid intensity (constant and series) and a form to load a series."""
    cluster = get_object_or_404(Cluster, name=name)
    form = GridIntensityUploadForm(request.POST or None, request.FILES or None)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            result = grid_intensity_csv_load(
                cluster=cluster, lines=_lines(upload), replace=form.cleaned_data["replace"]
            )
        except IntensityCsvError as error:
            problems = error.problems
        except UnicodeDecodeError:
            problems = ["the file is not UTF-8 text"]
        else:
            messages.success(request, f"{upload.name}: {result}.")
            return redirect("accounting:grid-intensity", name=cluster.name)
    series = grid_intensity_recent(cluster=cluster)
    return render(
        request,
        "accounting/grid_intensity.html",
        {"cluster": cluster, "form": form, "problems": problems, "series": series},
    )

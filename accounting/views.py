"""Accounting pages. Thin: they call selectors and services and render."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounting.forms import SacctUploadForm
from accounting.imports import import_upload_start
from accounting.models import Cluster, ImportRun
from accounting.quotes import weight_explanation
from accounting.selectors import import_runs_recent, partition_versions_current, quarantine_open
from accounting.services import quarantine_retry_enqueue


def staff_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Staff pages answer 404 to everyone else: their existence is not advertised."""

    @wraps(view)
    @login_required
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise Http404
        return view(request, *args, **kwargs)

    return wrapped


@require_GET
@login_required
def partition_list(request: HttpRequest) -> HttpResponse:
    """Every partition's current hardware and charging weight, with why it is what it is."""
    rows = [
        {"version": version, "why": weight_explanation(version.spec)}
        for version in partition_versions_current()
    ]
    return render(request, "accounting/partition_list.html", {"rows": rows})


@require_http_methods(["GET", "POST"])
@staff_only
def import_list(request: HttpRequest) -> HttpResponse:
    """Staff: recent imports with their summaries, an upload form, open quarantine counts."""
    form = SacctUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        with transaction.atomic():
            run = import_upload_start(
                cluster=form.cleaned_data["cluster"],
                name=upload.name,
                chunks=upload.chunks(),
                started_by=request.user,
                create_projects=form.cleaned_data["create_projects"],
                upload_dir=Path(settings.VAR_DIR) / "uploads",
            )
        messages.success(request, f"Import {run.pk} of {upload.name} started.")
        return redirect("accounting:import-detail", pk=run.pk)
    runs = list(import_runs_recent())
    open_records = quarantine_open()
    return render(
        request,
        "accounting/import_list.html",
        {
            "form": form,
            "runs": runs,
            "quarantined": open_records.count(),
            "any_running": any(run.status == ImportRun.Status.RUNNING for run in runs),
        },
    )


@require_GET
@staff_only
def import_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(ImportRun.objects.select_related("cluster", "started_by"), pk=pk)
    records = run.quarantined_records.order_by("line_number")[:200]
    return render(request, "accounting/import_detail.html", {"run": run, "records": records})


@require_GET
@staff_only
def quarantine_list(request: HttpRequest) -> HttpResponse:
    records = quarantine_open()
    reasons = (
        records.order_by()
        .values("cluster__name", "field")
        .annotate(lines=Count("pk"))
        .order_by("cluster__name", "-lines")
    )
    return render(
        request,
        "accounting/quarantine_list.html",
        {
            "records": records[:500],
            "total": records.count(),
            "reasons": list(reasons),
            "clusters": Cluster.objects.all(),
        },
    )


@require_POST
@staff_only
def quarantine_retry(request: HttpRequest) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=request.POST.get("cluster"))
    with transaction.atomic():
        quarantine_retry_enqueue(cluster=cluster)
    messages.success(request, f"Quarantined lines of {cluster.name} are being read again.")
    return redirect("accounting:quarantine-list")

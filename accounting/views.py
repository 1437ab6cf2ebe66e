"""Accounting pages. Thin: they call selectors and render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounting.quotes import weight_explanation
from accounting.selectors import partition_versions_current


@require_GET
@login_required
def partition_list(request: HttpRequest) -> HttpResponse:
    """Every partition's current hardware and charging weight, with why it is what it is."""
    rows = [
        {"version": version, "why": weight_explanation(version.spec)}
        for version in partition_versions_current()
    ]
    return render(request, "accounting/partition_list.html", {"rows": rows})

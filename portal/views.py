"""Site pages that belong to no single app."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounting.selectors import partition_versions_current


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Landing page: a sign-in prompt, or the machine's partitions and their rates."""
    versions = partition_versions_current() if request.user.is_authenticated else []
    return render(request, "portal/home.html", {"versions": versions})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: answers without authentication, says nothing private."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})

"""The staff page of Slurm provisioning: plans to review and approve, and the last drift check.
Thin: selectors and services do the work; sacctmgr runs in tasks, never in a request."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounting.models import Cluster
from allocations.models import SlurmSyncPlan
from allocations.slurm.sync import slurm_sync_approve, slurm_sync_overview, slurm_sync_request
from kit.access import staff_only


@require_GET
@staff_only
def slurm_sync_page(request: HttpRequest) -> HttpResponse:
    """Staff: per cluster, the plans waiting with each action's before and after, the plans
    applied or failed lately, and the last drift check with the commands that would fix it."""
    return render(request, "allocations/slurm_sync.html", {"clusters": slurm_sync_overview()})


@require_POST
@staff_only
def slurm_sync_approve_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Staff: approve a pending plan; a task applies it."""
    plan = get_object_or_404(SlurmSyncPlan, pk=pk)
    assert isinstance(request.user, User)
    plan = slurm_sync_approve(plan=plan, actor=request.user)
    messages.info(request, f"Plan {plan.pk}: {plan.get_status_display()}")
    return redirect("allocations:slurm-sync")


@require_POST
@staff_only
def slurm_sync_refresh_page(request: HttpRequest, cluster: str) -> HttpResponse:
    """Staff: plan again, or check for drift, now (in a task)."""
    found = get_object_or_404(Cluster, name=cluster)
    assert isinstance(request.user, User)
    check = request.POST.get("what") == "check"
    slurm_sync_request(cluster=found, actor=request.user, check=check)
    messages.info(
        request, f"{'A drift check' if check else 'A new plan'} of {found.name} is on its way."
    )
    return redirect("allocations:slurm-sync")

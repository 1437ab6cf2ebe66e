"""Staff pages of enforcement: the Slurm actions the thresholds check proposed, run or dismissed."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from allocations.slurm.enforcement import (
    enforcement_action_get,
    enforcement_actions_recent,
    enforcement_dismiss,
    enforcement_execute,
)
from kit.access import staff_only


@require_GET
@staff_only
def enforcement_list(request: HttpRequest) -> HttpResponse:
    """Staff: Slurm actions proposed by the thresholds check, and what was run with its output."""
    actions = enforcement_actions_recent()
    return render(request, "allocations/enforcement_list.html", {"actions": actions})


@require_POST
@staff_only
def enforcement_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Staff: run a proposed Slurm action (where the cluster enables it) or dismiss it."""
    action = enforcement_action_get(pk=pk)
    if action is None:
        raise Http404
    assert isinstance(request.user, User)
    if request.POST.get("decision") == "run":
        if not action.pool.cluster.enforcement_enabled:
            messages.error(
                request,
                f"Enforcement is not enabled on {action.pool.cluster.name}; "
                "run the command by hand or enable it in the cluster's settings.",
            )
        else:
            enforcement_execute(action=action, actor=request.user)
            messages.info(request, f"{action.command}: {action.status}")
    else:
        enforcement_dismiss(action=action, actor=request.user)
        messages.info(request, f"Dismissed: {action.command}")
    return redirect("allocations:enforcement-list")

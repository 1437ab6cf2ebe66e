"""Staff's resource pool pages: a pool's policy and partitions, in the portal rather than in
/admin/. Staff first (``staff_only``: 404 to anyone else), then the input; the rules are
``allocations/pools/services.py``'s."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from allocations.pools.forms import PoolForm
from allocations.pools.services import POOL_SETTINGS, pool_create, pool_update
from kit.access import staff_only
from kit.errors import ApplicationError
from kit.forms import error_on_field
from projects.models import ResourcePool


def _staff(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # staff_only ran
    return request.user


@require_GET
@staff_only
def staff_pools(request: HttpRequest) -> HttpResponse:
    """Staff: every pool with its cluster, partitions and budget policy."""
    pools = ResourcePool.objects.select_related("cluster").prefetch_related("partitions")
    return render(request, "allocations/staff_pools.html", {"pools": pools})


@require_http_methods(["GET", "POST"])
@staff_only
def staff_pool_new(request: HttpRequest) -> HttpResponse:
    """Staff: a new pool on a cluster."""
    form = PoolForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            pool = pool_create(
                actor=_staff(request), cluster=form.cleaned_data["cluster"],
                partitions=form.cleaned_data["partitions"], settings=form.settings(),
            )  # fmt: skip
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            messages.success(request, f"Pool {pool} created.")
            return redirect("allocations:staff-pool-edit", pk=pool.pk)
    status = 400 if form.is_bound else 200
    return render(request, "allocations/staff_pool_form.html", {"form": form}, status=status)


@require_http_methods(["GET", "POST"])
@staff_only
def staff_pool_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Staff: a pool's policy and partitions; its cluster stays."""
    pool = get_object_or_404(ResourcePool.objects.select_related("cluster"), pk=pk)
    initial = {name: getattr(pool, name) for name in POOL_SETTINGS}
    initial["partitions"] = list(pool.partitions.all())
    form = PoolForm(request.POST or None, pool=pool, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            pool_update(
                pool=pool, actor=_staff(request), partitions=form.cleaned_data["partitions"],
                settings=form.settings(),
            )  # fmt: skip
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            messages.success(request, f"Pool {pool} saved.")
            return redirect("allocations:staff-pool-edit", pk=pool.pk)
    status = 400 if form.is_bound else 200
    context = {"form": form, "pool": pool}
    return render(request, "allocations/staff_pool_form.html", context, status=status)

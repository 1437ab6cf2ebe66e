"""Staff pages of dynamic priority (eq 14): a cluster's policy, Figure 2 with each project
on the curve, the projects' K and Pr_dyn with their Slurm commands, and forms to post
profiling coefficients one by one or as a CSV file. Thin: forms check input, the services in
``allocations/priorities/services.py`` decide."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounting.models import Cluster
from accounting.utilisation.priority import priority_curve
from allocations.models import PriorityAction, PriorityPolicy, ProfilingCoefficient
from allocations.priorities import charts
from allocations.priorities.services import (
    DEFAULT_COMMAND_TEMPLATE,
    CsvLineError,
    PriorityError,
    ProfilingCsvError,
    decimal_text,
    policy_maths,
    priority_action_dismiss,
    priority_action_execute,
    priority_actions_propose,
    priority_actions_recent,
    priority_policy_get,
    priority_policy_set,
    profiled_job_get,
    profiling_coefficient_post,
    profiling_coefficients_import_csv,
    profiling_coefficients_list,
    project_priorities_get,
)
from kit.access import staff_only
from kit.charts import Chart
from projects.models import Project

MAX_CSV_BYTES = 5 * 1024 * 1024


def _decimal_field(label: str, help_text: str = "", **kwargs: Any) -> forms.DecimalField:
    return forms.DecimalField(
        label=label, max_digits=20, decimal_places=6, help_text=help_text, **kwargs
    )


class PolicyForm(forms.Form):
    base_priority = _decimal_field("Pr_base", "the priority at K = K1", min_value=Decimal(0))
    k1 = _decimal_field("K1", "below it the priority falls")
    k2 = _decimal_field("K2", "above it the priority rises with the slope C2")
    c0 = _decimal_field("C0", "slope below K1")
    c1 = _decimal_field("C1", "slope from K1 to K2")
    c2 = _decimal_field("C2", "slope from K2")
    command_template = forms.CharField(
        max_length=500,
        initial=DEFAULT_COMMAND_TEMPLATE,
        help_text="placeholders {qos} and {account} (the project code), {cluster}, {priority}",
        widget=forms.TextInput(attrs={"size": 60}),
    )
    execution_enabled = forms.BooleanField(
        required=False, help_text="run commands when staff press Run (else they are only listed)"
    )


class CoefficientForm(forms.Form):
    project = forms.ModelChoiceField(
        queryset=Project.objects.order_by("code"), to_field_name="code", empty_label=None
    )
    k_prof = _decimal_field(
        "Profiling coefficient K", "the profiler's score for the project or job, 0 or more",
        min_value=Decimal(0),
    )  # fmt: skip
    job_id = forms.CharField(
        label="Slurm job id", required=False, max_length=64,
        help_text="leave empty for the whole project",
    )  # fmt: skip
    note = forms.CharField(required=False, max_length=1000)


class CoefficientCsvForm(forms.Form):
    file = forms.FileField(help_text="CSV with a header: project,k_prof[,job_id][,note]")

    def clean_file(self) -> str:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_CSV_BYTES:
            raise forms.ValidationError("the file is larger than 5 MiB; split it")
        try:
            return str(upload.read().decode("utf-8-sig"))
        except UnicodeDecodeError:
            raise forms.ValidationError("the file is not UTF-8 text") from None


def _staff(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _cluster(name: str) -> Cluster:
    return get_object_or_404(Cluster, name=name)


def _page_url(cluster: Cluster) -> str:
    return f"{reverse('allocations:priorities')}?cluster={cluster.name}"


def _policy_initial(policy: PriorityPolicy | None) -> dict[str, Any]:
    if policy is None:
        return {"command_template": DEFAULT_COMMAND_TEMPLATE}
    numbers = ("base_priority", "k1", "k2", "c0", "c1", "c2")
    initial: dict[str, Any] = {name: decimal_text(getattr(policy, name)) for name in numbers}
    return {
        **initial,
        "command_template": policy.command_template,
        "execution_enabled": policy.execution_enabled,
    }


def _chart(policy: PriorityPolicy, rows: list[Any]) -> Chart:
    points = [(row.project.code, row.k.k_prof, row.pr_dyn) for row in rows]
    span = policy.k2 - policy.k1
    high = max([policy.k2 + span, *(k * Decimal("1.1") for _, k, _ in points)])
    low = min(Decimal(0), policy.k1 - span / 2)
    curve = priority_curve(
        policy=policy_maths(policy), k_min=low, k_max=high, base=policy.base_priority
    )
    return charts.priority_curve(key="priority", curve=curve, k1=policy.k1, k2=policy.k2,
                                 projects=points)  # fmt: skip


def _render(request: HttpRequest, cluster: Cluster, **context: Any) -> HttpResponse:
    policy = priority_policy_get(cluster=cluster)
    rows = project_priorities_get(cluster=cluster)
    chart = _chart(policy, rows) if policy is not None else None
    text = decimal_text
    if chart is not None and request.method == "GET" and request.GET.get("csv") == chart.key:
        return chart.csv_response(f"priorities-{cluster.name}")
    context.setdefault("policy_form", PolicyForm(initial=_policy_initial(policy)))
    context.setdefault("coefficient_form", CoefficientForm())
    context.setdefault("csv_form", CoefficientCsvForm())
    return render(
        request,
        "allocations/priorities.html",
        {
            "clusters": Cluster.objects.order_by("name"),
            "cluster": cluster,
            "policy": policy,
            "rows": [
                {"row": row, "k": decimal_text(row.k.k_prof), "pr_dyn": decimal_text(row.pr_dyn)}
                for row in rows
            ],
            "chart": chart,
            "actions": [
                {
                    "action": action,
                    "k": decimal_text(action.k_prof),
                    "priority": decimal_text(action.priority),
                }
                for action in priority_actions_recent(cluster=cluster, limit=100)
            ],
            "coefficients": [
                {"coefficient": coefficient, "k": text(coefficient.k_prof)}
                for coefficient in profiling_coefficients_list(cluster=cluster)[:20]
            ],
            **context,
        },
    )


@require_GET
@staff_only
def priorities(request: HttpRequest) -> HttpResponse:
    """Staff: dynamic priority of one cluster (``?cluster=NAME``; the first with a policy)."""
    name = request.GET.get("cluster")
    cluster = (
        _cluster(name)
        if name
        else Cluster.objects.filter(priority_policy__isnull=False).order_by("name").first()
        or Cluster.objects.order_by("name").first()
    )
    if cluster is None:
        return render(request, "allocations/priorities.html", {"clusters": []})
    return _render(request, cluster)


@require_POST
@staff_only
def policy_set(request: HttpRequest, cluster: str) -> HttpResponse:
    target = _cluster(cluster)
    form = PolicyForm(request.POST)
    if form.is_valid():
        try:
            priority_policy_set(cluster=target, updated_by=_staff(request), **form.cleaned_data)
        except PriorityError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, f"Priority policy of {target.name} saved.")
            return redirect(_page_url(target))
    return _render(request, target, policy_form=form)


@require_POST
@staff_only
def coefficient_post(request: HttpRequest, cluster: str) -> HttpResponse:
    target = _cluster(cluster)
    form = CoefficientForm(request.POST)
    if form.is_valid():
        project = form.cleaned_data["project"]
        job_id = form.cleaned_data["job_id"].strip()
        job = None
        if job_id:
            try:
                job = profiled_job_get(cluster=target, project=project, job_id=job_id)
            except PriorityError as error:
                form.add_error("job_id", str(error))
        if form.is_valid():
            try:
                profiling_coefficient_post(
                    cluster=target, project=project, k_prof=form.cleaned_data["k_prof"],
                    job=job, note=form.cleaned_data["note"],
                    source=ProfilingCoefficient.Source.FORM, posted_by=_staff(request),
                )  # fmt: skip
            except PriorityError as error:
                form.add_error(None, str(error))
            else:
                messages.success(request, f"K_prof {form.cleaned_data['k_prof']} posted.")
                return redirect(_page_url(target))
    return _render(request, target, coefficient_form=form)


@require_POST
@staff_only
def coefficients_upload(request: HttpRequest, cluster: str) -> HttpResponse:
    target = _cluster(cluster)
    form = CoefficientCsvForm(request.POST, request.FILES)
    csv_errors: list[CsvLineError] = []
    if form.is_valid():
        try:
            imported = profiling_coefficients_import_csv(
                cluster=target, text=form.cleaned_data["file"], posted_by=_staff(request)
            )
        except ProfilingCsvError as error:
            csv_errors = error.errors
            form.add_error("file", f"nothing was imported: {len(csv_errors)} problem(s) below")
        else:
            messages.success(request, f"{len(imported)} coefficient(s) imported.")
            return redirect(_page_url(target))
    return _render(request, target, csv_form=form, csv_errors=csv_errors)


@require_POST
@staff_only
def actions_propose(request: HttpRequest, cluster: str) -> HttpResponse:
    target = _cluster(cluster)
    try:
        proposed = priority_actions_propose(cluster=target)
    except PriorityError as error:
        messages.error(request, str(error))
    else:
        messages.info(request, f"{len(proposed)} new proposal(s).")
    return redirect(_page_url(target))


@require_POST
@staff_only
def action_decide(request: HttpRequest, pk: int) -> HttpResponse:
    action = get_object_or_404(PriorityAction.objects.select_related("cluster"), pk=pk)
    try:
        if request.POST.get("decision") == "run":
            action = priority_action_execute(action=action, reviewed_by=_staff(request))
            level = (
                messages.INFO if action.status == PriorityAction.Status.EXECUTED else messages.ERROR
            )
            messages.add_message(
                request, level, f"{action.command}: {action.status} (exit {action.exit_code})"
            )
        else:
            priority_action_dismiss(action=action, reviewed_by=_staff(request))
            messages.info(request, f"Dismissed: {action.command}")
    except (PriorityError, PermissionDenied) as error:
        messages.error(request, str(error))
    return redirect(_page_url(action.cluster))

"""Researchers' accounting pages: jobs table, job detail, quote and the cost ratio explorer.

Thin views: forms check input, selectors read (``accounting/page_selectors.py``), the charging
engine prices, ``portal/charts.py`` draws. Jobs are shown only to those who may see their
project (``projects_for_user``); everyone else gets "not found".
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import F
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounting import charging, cost_ratio
from accounting.costmodels import JobCost
from accounting.costs import cost_model_of, job_cost_get
from accounting.explorer import (
    COMPARED_MODELS,
    Recommendation,
    figure1_series,
    figure1_speedups,
    my_application,
    only_energy_model_regions,
    usable_models,
)
from accounting.models import CostModelVersion, Job, PartitionVersion
from accounting.overhead import job_fair_share_get
from accounting.page_selectors import (
    JOB_SORTS,
    JobFilters,
    job_get,
    job_usernames,
    jobs_of_project,
    partition_versions_in_effect,
)
from accounting.quotes import QuoteError, QuoteRequest, quote_compute, weight_explanation
from allocations.page_selectors import project_for_user, role_in_project
from allocations.selectors import projects_for_user
from portal import charts
from portal.forms import CostRatioForm, JobFilterForm, QuoteForm

JOBS_PER_PAGE = 50
CSV_COLUMNS = (
    "job_id", "job_name", "user", "cluster", "partition", "state", "submit", "start", "end",
    "elapsed_seconds", "nodes", "cores", "memory_mb", "gpus", "charge_state", "service_units",
    "pending_service_units", "dominant_resource", "energy_wh", "cost", "currency",
)  # fmt: skip


# --- Jobs table -------------------------------------------------------------------------------


def _day_start(day: Any) -> datetime | None:
    return datetime.combine(day, time.min, tzinfo=UTC) if day else None


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_rows(jobs: Any) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for job in jobs.iterator(chunk_size=2000):
        yield writer.writerow(
            (
                job.job_id, job.job_name, job.username, job.partition.cluster.name,
                job.partition.name, job.state, _iso(job.submit), _iso(job.start), _iso(job.end),
                job.elapsed_seconds, job.nnodes, job.cpus, job.memory_mb, job.gpus,
                job.charge_state, job.service_units, job.pending_service_units,
                job.dominant_resource, job.energy_wh, "" if job.cost is None else job.cost,
                job.cost_currency or "",
            )
        )  # fmt: skip


def elapsed_text(seconds: int) -> str:
    """Slurm's elapsed format: [D-]HH:MM:SS."""
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _iso(moment: datetime | None) -> str:
    return moment.isoformat() if moment else ""


@require_GET
@login_required
def project_jobs(request: HttpRequest, code: str) -> HttpResponse | StreamingHttpResponse:
    """The project's jobs with filters, sorting, pagination and CSV export of the selection."""
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    form = JobFilterForm(
        request.GET or None,
        usernames=job_usernames(project=project),
    )
    filters = JobFilters()
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        ended_to = data.get("ended_to")
        filters = JobFilters(
            username=data.get("user") or None,
            partition=data.get("partition"),
            state=data.get("state") or None,
            ended_from=_day_start(data.get("ended_from")),
            ended_before=_day_start(ended_to + timedelta(days=1)) if ended_to else None,
        )
    sort = request.GET.get("sort", "-end")
    if sort not in JOB_SORTS:
        sort = "-end"
    jobs = jobs_of_project(project=project, filters=filters, sort=sort)
    # The money cost's currency, joined (no query per job): shown beside the SU.
    jobs = jobs.annotate(cost_currency=F("cost_model_version__currency"))
    if request.GET.get("format") == "csv":
        response = StreamingHttpResponse(_csv_rows(jobs), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{project.code}-jobs.csv"'
        return response
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    columns = [
        ("user", "User"), ("partition", "Partition"), ("state", "State"), ("end", "Ended"),
        ("elapsed", "Elapsed"), ("su", "SU"),
    ]  # fmt: skip
    headers = [
        {
            "label": label,
            "key": key,
            "active": sort.lstrip("-") == key,
            "descending": sort == f"-{key}",
            "next": key if sort == f"-{key}" else f"-{key}",
        }
        for key, label in columns
    ]
    rows = [(job, elapsed_text(job.elapsed_seconds)) for job in page.object_list]
    return render(
        request,
        "accounting/project_jobs.html",
        {
            "project": project, "form": form, "page": page, "rows": rows, "headers": headers,
            "sort": sort, "role": role_in_project(user=request.user, project=project),
        },
    )  # fmt: skip


# --- Job detail -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheaperRequest:
    """What the same job would have cost with a different request, priced by the engine."""

    what: str
    advice: str
    service_units: Decimal
    saving: Decimal
    percent: Decimal


def _cheaper_request(job: Job, version: PartitionVersion) -> CheaperRequest | None:
    """When memory dominated (or cores beyond the GPUs' share on a GPU partition): the same job
    with only the dominating resource's fair share, priced by the engine."""
    if job.charge_state != Job.ChargeState.CHARGED or not job.nnodes or job.service_units <= 0:
        return None
    spec = version.spec
    cores, gpus = Decimal(job.cpus), Decimal(job.gpus)
    if job.dominant_resource == "memory":
        # The cores' share of memory (on a GPU node the GPUs' share when that is larger).
        per_core = spec.memory_mb // spec.cores
        memory = Decimal(per_core) * cores
        if spec.is_gpu and gpus:
            memory = max(memory, Decimal(spec.memory_mb // spec.gpus) * gpus)
        whose = "cores' or GPUs'" if spec.is_gpu else "cores'"
        what = (
            f"with only the {whose} share of memory "
            f"({memory / job.nnodes:,.0f} MiB per node instead of "
            f"{job.memory_mb / job.nnodes:,.0f} MiB)"
        )
        advice = "Ask for the memory the job needs (e.g. --mem-per-cpu), and no more."
    elif job.dominant_resource == "cores" and spec.is_gpu and gpus:
        # On a GPU partition the GPUs' share of cores comes with each GPU (eq 15's weight).
        share = (gpus * spec.cores / spec.gpus).to_integral_value()
        if share >= cores:
            return None
        cores = share
        memory = min(job.memory_mb, Decimal(spec.memory_mb // spec.cores) * cores)
        what = (
            f"with only the GPUs' share of cores ({share / job.nnodes:,.0f} per node instead of "
            f"{job.cpus / job.nnodes:,.0f})"
        )
        advice = "Each GPU comes with its share of the node's cores; more cores cost extra."
    else:
        return None
    try:
        usage = charging.split_evenly(nodes=job.nnodes, cores=cores, memory_mb=memory, gpus=gpus)
        alternative = charging.charge(spec, usage, elapsed_seconds=job.elapsed_seconds)
    except (charging.ChargeError, charging.SpecError):
        return None
    saving = job.service_units - alternative.service_units
    if saving <= 0:
        return None
    return CheaperRequest(
        what=what,
        advice=advice,
        service_units=alternative.service_units,
        saving=saving,
        percent=(saving * 100 / job.service_units).quantize(Decimal("0.1")),
    )


def _fraction_groups(job: Job) -> list[dict[str, Any]]:
    groups, first = [], 1
    for entry in job.node_fractions or []:
        count = int(entry.get("nodes", 1))
        label = f"node {first}" if count == 1 else f"nodes {first}\u2013{first + count - 1}"
        fractions = {name: Decimal(entry.get(name, "0")) for name in ("cores", "memory", "gpus")}
        groups.append(
            {
                "label": label,
                "count": count,
                **fractions,
                **{
                    f"{name}_percent": (value * 100).quantize(Decimal("0.01"))
                    for name, value in fractions.items()
                },
                "share": max(fractions.values()),
            }
        )
        first += count
    return groups


@dataclass(frozen=True)
class Money:
    """A job's money cost beside its SU: the total and its breakdown by node set and rate."""

    cost: Decimal
    version: CostModelVersion
    breakdown: JobCost
    energy_not_recorded: bool


def _money(job: Job) -> Money | None:
    """The job's stored cost, explained by the model version it was priced with."""
    version = job.cost_model_version
    if job.cost is None or version is None:
        return None
    model = cost_model_of(version)
    breakdown = job_cost_get(model=model, job=job)
    return Money(
        cost=job.cost,
        version=version,
        breakdown=breakdown,
        energy_not_recorded=breakdown.missing_data,
    )


@require_GET
@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One job's charge explained: fractions per node, what dominated, weight and why."""
    job = job_get(pk=pk, projects=projects_for_user(user=request.user))
    if job is None:
        raise Http404
    version = job.partition_version
    groups = _fraction_groups(job)
    chart = (
        charts.node_fractions(key="fractions", groups=groups, dominant=job.dominant_resource)
        if groups
        else None
    )
    if chart is not None and request.GET.get("csv") == chart.key:
        return chart.csv_response(f"job-{job.job_id}")
    hours = Decimal(job.elapsed_seconds) / 3600
    total_share = sum((group["share"] * group["count"] for group in groups), Decimal(0))
    context = {
        "job": job,
        "project": job.project,
        "version": version,
        "why": weight_explanation(version.spec) if version else "",
        "groups": groups,
        "chart": chart,
        "hours": hours,
        "total_share": total_share,
        "cheaper": _cheaper_request(job, version) if version else None,
        "consumed_wh": (
            Decimal(job.consumed_energy_joules) / 3600 if job.consumed_energy_joules else None
        ),
        "money": _money(job),
        "fair_share": job_fair_share_get(job=job),
    }
    return render(request, "accounting/job_detail.html", context)


# --- Quote ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuoteRow:
    version: PartitionVersion
    charge: charging.Charge | None
    problem: str
    chosen: bool


@require_GET
@login_required
def quote(request: HttpRequest) -> HttpResponse:
    """Price a planned job, and the same job on every other partition of its cluster."""
    versions = partition_versions_in_effect(at=timezone.now())
    form = QuoteForm(request.GET or None, versions=versions)
    result = None
    rows: list[QuoteRow] = []
    chart = None
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        chosen = next(v for v in versions if v.partition_id == data["partition"])
        planned = QuoteRequest(
            nodes=data["nodes"], hours=data["hours"], cores_per_node=data["cores_per_node"],
            gpus_per_node=data["gpus_per_node"], memory_per_node_mb=data["memory_per_node"],
        )  # fmt: skip
        for version in versions:
            if version.partition.cluster_id != chosen.partition.cluster_id:
                continue
            try:
                charge, problem = quote_compute(version.spec, planned), ""
            except (QuoteError, charging.ChargeError, charging.SpecError) as error:
                charge, problem = None, str(error)
            rows.append(QuoteRow(version, charge, problem, version.pk == chosen.pk))
        result = next(row for row in rows if row.chosen)
        if result.charge is None:
            form.add_error(None, f"This job does not fit on {chosen.partition}: {result.problem}")
            result = None
        else:
            fitting = [row for row in rows if row.charge is not None]
            chart = charts.quote_comparison(
                key="partitions",
                rows=[
                    (row.version.partition.name, row.charge.service_units, row.chosen)
                    for row in fitting
                    if row.charge is not None
                ],
            )
            if request.GET.get("csv") == chart.key:
                return chart.csv_response("quote")
    context = {
        "form": form,
        "result": result,
        "why": weight_explanation(result.version.spec) if result else "",
        "rows": rows,
        "chart": chart,
    }
    return render(request, "accounting/quote.html", context)


# --- CPU-vs-GPU cost ratio explorer -----------------------------------------------------------

PAPER = "paper"
EXPLORER_DEFAULTS = {
    "system": PAPER, "cpu_node_hours": "1", "speedup": "8", "grid_intensity": "500",
}  # fmt: skip


def _systems() -> tuple[list[tuple[str, str]], dict[str, tuple[str, Any, Any]]]:
    """The paper's test system and every CPU/GPU partition pair of the clusters."""
    cpu, gpu = cost_ratio.paper_test_system()
    choices = [(PAPER, "The paper's test system (Table I)")]
    specs: dict[str, tuple[str, Any, Any]] = {
        PAPER: ("the paper's test system (Table I)", cpu, gpu)
    }
    by_cluster: dict[str, list[PartitionVersion]] = {}
    for version in partition_versions_in_effect(at=timezone.now()):
        by_cluster.setdefault(version.partition.cluster.name, []).append(version)
    for cluster, versions in by_cluster.items():
        for cpu_version in (v for v in versions if not v.is_gpu):
            for gpu_version in (v for v in versions if v.is_gpu):
                value = f"{cluster}/{cpu_version.partition.name}+{gpu_version.partition.name}"
                label = f"{cluster}: {cpu_version.partition.name} vs {gpu_version.partition.name}"
                choices.append((value, label))
                specs[value] = (label, cpu_version.spec, gpu_version.spec)
    return choices, specs


def _explorer(request: HttpRequest) -> tuple[CostRatioForm, dict[str, Any]]:
    choices, specs = _systems()
    data = request.GET if "system" in request.GET else EXPLORER_DEFAULTS
    form = CostRatioForm(data, systems=choices)
    context: dict[str, Any] = {"form": form}
    if not form.is_valid():
        context["error_list"] = [
            f"{form.fields[name].label}: {error}" if name in form.fields else error
            for name, errors in form.errors.items()
            for error in errors
        ]
        return form, context
    clean = form.cleaned_data
    label, cpu, gpu = specs[clean["system"]]
    models, unavailable = usable_models(cpu, gpu)
    extra = [cost_ratio.Benchmark(name, ratio) for name, ratio in clean["applications"]]
    benchmarks = [*cost_ratio.load_benchmarks(), *extra]
    report = cost_ratio.cost_ratio_report(cpu=cpu, gpu=gpu, models=models, benchmarks=benchmarks)
    gpu_hours = clean["gpu_node_hours"] or clean["cpu_node_hours"] / clean["speedup"]
    mine: Recommendation = my_application(
        cpu, gpu, cpu_node_hours=clean["cpu_node_hours"], gpu_node_hours=gpu_hours,
        grid_g_per_kwh=clean["grid_intensity"],
    )  # fmt: skip
    series, optimal = figure1_series(cpu, gpu, models, figure1_speedups(cpu, gpu, models))
    chart = charts.figure1(
        key="figure1",
        series=series,
        optimal=optimal,
        shaded=only_energy_model_regions(cpu, gpu, models),
        my_speedup=float(mine.speedup),
        table_speedups=[float(s) for s in cost_ratio.FIGURE1_SPEEDUPS],
    )
    rows = []
    for index, benchmark in enumerate(benchmarks):
        per_model = [report["models"][model]["rows"][index] for model in models]
        rows.append(
            {
                "application": benchmark.application,
                "added": index >= len(benchmarks) - len(extra),
                "perf_ratio": per_model[0]["perf_ratio"] if per_model else benchmark.perf_ratio,
                "cpu_charge": per_model[0]["cpu_charge"] if per_model else None,
                "models": [
                    {"gpu_charge": row["gpu_charge"], "cost_ratio": row["cost_ratio"]}
                    for row in per_model
                ],
            }
        )
    context.update(
        system_label=label,
        cpu=cpu,
        gpu=gpu,
        models=[
            {
                "name": model,
                "label": charts.MODEL_LABELS[model],
                "table": {"sm": "II", "peak": "III", "energy": "IV"}[model],
                **report["models"][model],
            }
            for model in models
        ],
        unavailable=[
            (charts.MODEL_LABELS[model], reason)
            for model, reason in unavailable.items()
            if model in COMPARED_MODELS
        ],
        optimal_switch=report["energy_optimal_switch_speedup"],
        rows=rows,
        chart=chart,
        mine=mine,
        grid_intensity=clean["grid_intensity"],
    )
    return form, context


@require_GET
@login_required
def cost_ratio_explorer(request: HttpRequest) -> HttpResponse:
    """Section V of the energy paper, interactive: weights, Tables II-IV, Figure 1, and the
    partition to pick for the user's own application."""
    _form, context = _explorer(request)
    chart = context.get("chart")
    if chart is not None and request.GET.get("csv") == chart.key:
        return chart.csv_response("cost-ratio")
    if request.GET.get("csv") == "tables" and "rows" in context:
        return _tables_csv(context)
    return render(request, "accounting/cost_ratio.html", context)


@require_GET
@login_required
def cost_ratio_live(request: HttpRequest) -> JsonResponse:
    """The explorer's results for the form's current values, for live updates in the page."""
    form, context = _explorer(request)
    html = render_to_string("accounting/_cost_ratio_results.html", context, request=request)
    return JsonResponse({"valid": form.is_valid(), "html": html})


def _tables_csv(context: dict[str, Any]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="cost-ratio-tables.csv"'
    writer = csv.writer(response)
    header = ["application", "perf_ratio", "cpu_charge_su"]
    for model in context["models"]:
        header += [f"{model['name']}_gpu_charge_su", f"{model['name']}_cost_ratio"]
    writer.writerow(header)
    for row in context["rows"]:
        line = [row["application"], row["perf_ratio"], row["cpu_charge"]]
        for values in row["models"]:
            line += [values["gpu_charge"], values["cost_ratio"]]
        writer.writerow(line)
    return response

"""Pages of the charging model: partitions, quotes and the CPU-versus-GPU cost ratio explorer.
Thin: forms check input, the pure modules compute, templates render.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounting.clusters import charging, charts, cost_ratio
from accounting.clusters.explorer import (
    COMPARED_MODELS,
    Recommendation,
    comparison_problem,
    figure1_series,
    figure1_speedups,
    my_application,
    only_energy_model_regions,
    usable_models,
)
from accounting.clusters.forms import CostRatioForm, QuoteForm
from accounting.clusters.quotes import QuoteError, QuoteRequest, quote_compute, weight_explanation
from accounting.clusters.selectors import (
    clusters_by_latest_data,
    partition_pair_main,
    partition_versions_current,
    partition_versions_in_effect,
)
from accounting.models import PartitionVersion
from kit.csv_export import csv_writer


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


PAPER = "paper"
EXPLORER_DEFAULTS = {"cpu_node_hours": "1", "speedup": "8", "grid_intensity": "500"}


@dataclass(frozen=True)
class Systems:
    choices: list[tuple[str, str]]
    specs: dict[str, tuple[str, Any, Any]]
    default: str  # the centre's cluster with the latest data, main partitions; else the paper


def _systems() -> Systems:
    """Every CPU/GPU partition pair of the clusters, the cluster with the latest data first,
    and the paper's test system last, for reference."""
    now = timezone.now()
    by_cluster: dict[int, list[PartitionVersion]] = {}
    for version in partition_versions_in_effect(at=now):
        by_cluster.setdefault(version.partition.cluster_id, []).append(version)
    choices: list[tuple[str, str]] = []
    specs: dict[str, tuple[str, Any, Any]] = {}
    default = ""
    for cluster in clusters_by_latest_data(at=now):
        versions = by_cluster.get(cluster.pk, [])
        for cpu_version in (v for v in versions if not v.is_gpu):
            for gpu_version in (v for v in versions if v.is_gpu):
                value = f"{cluster.name}/{cpu_version.partition.name}+{gpu_version.partition.name}"
                label = (
                    f"{cluster.name}: {cpu_version.partition.name} vs {gpu_version.partition.name}"
                )
                choices.append((value, label))
                specs[value] = (label, cpu_version.spec, gpu_version.spec)
        main = partition_pair_main(versions)
        if main and not default:
            default = f"{cluster.name}/{main[0].partition.name}+{main[1].partition.name}"
    cpu, gpu = cost_ratio.paper_test_system()
    # The energy paper's Table I system, named by its hardware for the reader.
    label = "Reference system: 2 x Xeon Gold 6240 CPU node, 4 x A100 GPU node"
    choices.append((PAPER, label))
    specs[PAPER] = (label, cpu, gpu)
    return Systems(choices=choices, specs=specs, default=default or PAPER)


def _explorer(request: HttpRequest) -> tuple[CostRatioForm, dict[str, Any]]:
    systems = _systems()
    data = (
        request.GET if "system" in request.GET else {**EXPLORER_DEFAULTS, "system": systems.default}
    )
    shipped = cost_ratio.load_benchmarks()
    form = CostRatioForm(data, systems=systems.choices, examples=shipped)
    context: dict[str, Any] = {"form": form}
    if not form.is_valid():
        # Each message names its field as the form labels it, and the allowed range.
        context["error_list"] = [error for errors in form.errors.values() for error in errors]
        return form, context
    clean = form.cleaned_data
    label, cpu, gpu = systems.specs[clean["system"]]
    problem = comparison_problem(cpu, gpu)
    if problem:
        context["error_list"] = [problem[1]]
        return form, context
    models, unavailable = usable_models(cpu, gpu)
    extra = [cost_ratio.Benchmark(name, ratio) for name, ratio in clean["applications"]]
    examples = form.example_benchmarks()
    benchmarks = [*examples, *extra]
    report = cost_ratio.cost_ratio_report(cpu=cpu, gpu=gpu, models=models, benchmarks=benchmarks)
    mine: Recommendation = my_application(
        cpu, gpu, cpu_node_hours=clean["cpu_node_hours"], gpu_node_hours=clean["gpu_node_hours"],
        speedup=clean["speedup"], grid_g_per_kwh=clean["grid_intensity"],
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
                "added": index >= len(examples),
                "edited": index < len(examples) and benchmark != shipped[index],
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
                "words": charts.MODEL_WORDS[model],
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
        examples_edited=any(row["edited"] for row in rows),
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
    writer = csv_writer(response)
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


@require_GET
@login_required
def partition_list(request: HttpRequest) -> HttpResponse:
    """Every partition's current hardware and charging weight, with why it is what it is."""
    versions = partition_versions_current()
    rows = [{"version": version, "why": weight_explanation(version.spec)} for version in versions]
    clusters = sorted({version.partition.cluster.name for version in versions})
    return render(request, "accounting/partition_list.html", {"rows": rows, "clusters": clusters})

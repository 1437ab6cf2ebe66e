"""Researchers' ledger pages: a project's jobs table (with CSV) and a job's charge, explained;
and the staff pages of imports and quarantined lines. Thin: forms check, selectors read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.db.models import Count, F
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounting.carbon.selectors import job_footprint_get
from accounting.clusters.efficiency import (
    Efficiency,
    Waste,
    job_efficiency,
    right_sized_request,
    waste_of,
)
from accounting.clusters.quotes import cheaper_request, weight_explanation
from accounting.costs.costmodels import JobCost, share_text
from accounting.costs.services import cost_model_of, job_cost_get
from accounting.ledger import charts
from accounting.ledger.cursor import CursorError, JobCursor, cursor_decode, cursor_encode
from accounting.ledger.forms import JobFilterForm, SacctUploadForm
from accounting.ledger.selectors import (
    JOB_SORTS,
    JobFilters,
    QuarantineState,
    count_bounded,
    import_run_bookings,
    import_run_changes,
    import_runs_recent,
    job_get,
    job_node_fractions,
    job_partitions,
    job_usernames,
    jobs_after,
    jobs_count_from_rollups,
    jobs_of_project,
    keyset_page_count,
    quarantine_open,
    quarantine_records,
    quarantine_retry_cluster,
)
from accounting.ledger.sources import AlreadyImported, import_upload_start
from accounting.ledger.usage import held_of, usage_of
from accounting.models import Cluster, CostModelVersion, ImportRun, Job, PartitionVersion
from accounting.quarantine import quarantine_retry_enqueue
from accounting.utilisation.overhead import job_fair_share_get
from kit.access import staff_only
from kit.csv_export import csv_writer
from projects.access import projects_visible
from projects.selectors import project_for_user, role_in_project

JOBS_PER_PAGE = 50
CSV_COLUMNS = (
    "job_id", "job_name", "user", "cluster", "partition", "state", "submit", "start", "end",
    "elapsed_seconds", "nodes", "cores", "memory_mb", "gpus", "charge_state", "service_units",
    "pending_service_units", "dominant_resource", "energy_wh", "cost", "currency",
)  # fmt: skip


def _day_start(day: Any) -> datetime | None:
    return datetime.combine(day, time.min, tzinfo=UTC) if day else None


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_rows(jobs: Any) -> Iterator[str]:
    writer = csv_writer(_Echo())
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


PHONE_COLUMNS = frozenset({"state", "su"})


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
        partitions=job_partitions(project=project),  # where its jobs ran, not every cluster's
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
            search=data.get("search") or None,
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
    if sort == "-end" and "page" not in request.GET:
        listing = _newest_first(request, project=project, jobs=jobs, filters=filters)
    else:
        listing = _numbered(jobs, request.GET.get("page"))
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
            # A phone shows the job, its state and SU; the rest is a tap away, on the job.
            "hide_phone": key not in PHONE_COLUMNS,
        }
        for key, label in columns
    ]
    rows = [(job, elapsed_text(job.elapsed_seconds)) for job in listing.jobs]
    return render(
        request,
        "accounting/project_jobs.html",
        {
            "project": project, "form": form, "listing": listing, "rows": rows,
            "headers": headers, "sort": sort,
            "role": role_in_project(user=request.user, project=project),
        },
    )  # fmt: skip


@dataclass(frozen=True)
class JobsListing:
    """One page of the jobs table: its jobs, how many the filters select (None: not counted),
    and the way on: page numbers for the other orders, a cursor newest first."""

    jobs: list[Job]
    count: int | None
    page: Page[Job] | None = None  # numbered pages
    older: str | None = None  # newest first: the cursor of the next, older, page
    newest: bool = True  # newest first: this is the first page


def _numbered(jobs: Any, number: str | None) -> JobsListing:
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(number)
    return JobsListing(jobs=list(page.object_list), count=page.paginator.count, page=page)


def _newest_first(
    request: HttpRequest, *, project: Any, jobs: Any, filters: JobFilters
) -> JobsListing:
    """Newest end first, a page after the cursor in ``?after=`` (the jobs API's keyset pages):
    each page costs the same however many jobs come before or after it. The count comes from
    the roll-ups where the filters allow, from the jobs where dates bound them, else none."""
    text = request.GET.get("after")
    after = None
    if text:
        try:
            after = cursor_decode(text)
        except CursorError as error:
            messages.warning(request, f"Showing the newest jobs: the page link was {error}.")
    found = jobs_after(
        jobs=jobs, after=after, size=JOBS_PER_PAGE + 1, columns=None,
        ended_from=filters.ended_from,
    )  # fmt: skip
    page, more = found[:JOBS_PER_PAGE], len(found) > JOBS_PER_PAGE
    count = keyset_page_count(
        jobs=jobs, shown=len(page), first=after is None, more=more,
        bounded=count_bounded(ended_from=filters.ended_from, ended_before=filters.ended_before),
    )  # fmt: skip
    if count is None:
        count = jobs_count_from_rollups(project=project, filters=filters)
    older = cursor_encode(JobCursor(end=page[-1].end, pk=page[-1].pk)) if more else None
    return JobsListing(jobs=page, count=count, older=older, newest=after is None)


@dataclass(frozen=True)
class CheaperRequestHint:
    """The job page's words for :func:`quotes.cheaper_request`: what to ask for, what it costs."""

    what: str
    advice: str
    service_units: Decimal
    saving: Decimal
    percent: Decimal


def _cheaper_request(job: Job, version: PartitionVersion) -> CheaperRequestHint | None:
    """The quote's cheaper request for a charged job (memory, or cores beyond the GPUs' share
    on a GPU partition, cut to its share), in words."""
    if job.charge_state != Job.ChargeState.CHARGED:
        return None
    spec = version.spec
    cheaper = cheaper_request(
        spec, nodes=job.nnodes, cores=job.cpus, gpus=job.gpus, memory_mb=job.memory_mb,
        elapsed_seconds=job.elapsed_seconds, service_units=job.service_units,
        dominant_resource=job.dominant_resource,
    )  # fmt: skip
    if cheaper is None:
        return None
    request = cheaper.request
    if cheaper.resource == "memory":
        whose = "cores' or GPUs'" if spec.is_gpu else "cores'"
        what = (
            f"with only the {whose} share of memory "
            f"({request.memory_per_node_mb:,.0f} MiB per node instead of "
            f"{job.memory_mb / job.nnodes:,.0f} MiB)"
        )
        advice = "Ask for the memory the job needs (e.g. --mem-per-cpu), and no more."
    else:
        what = (
            f"with only the GPUs' share of cores ({request.cores_per_node:,.0f} per node "
            f"instead of {job.cpus / job.nnodes:,.0f})"
        )
        advice = "Each GPU comes with its share of the node's cores; more cores cost extra."
    return CheaperRequestHint(
        what=what,
        advice=advice,
        service_units=cheaper.service_units,
        saving=cheaper.saving,
        percent=cheaper.percent,
    )


@dataclass(frozen=True)
class JobEfficiencyView:
    """What a job used of what it held, and what a right-sized request would have cost."""

    ratios: Efficiency
    right_sized_service_units: Decimal | None
    left_on_the_table: Decimal | None
    waste: str  # the dominant waste in words ("asked for 64 cores, used 3.9"); "": none
    set_the_charge: str  # when another resource set the charge: that, in words; "": not so
    advice: list[str]  # the request to make next time, as sbatch options

    @property
    def percents(self) -> list[tuple[str, Decimal | None, str]]:
        """(name, percent or None when not measured, what it compares) for the page."""
        return [
            ("CPU", percent_of(self.ratios.cpu), "CPU time / (elapsed x cores held)"),
            ("Memory", percent_of(self.ratios.memory), "peak memory / memory held"),
            ("GPU", percent_of(self.ratios.gpu), "mean utilisation of the GPUs held"),
            ("Walltime", percent_of(self.ratios.walltime), "elapsed / time limit"),
        ]


def percent_of(ratio: Decimal | None) -> Decimal | None:
    """A ratio as a percentage to one place; None stays None (not measured)."""
    return None if ratio is None else (ratio * 100).quantize(Decimal("0.1"))


def _job_efficiency(job: Job, version: PartitionVersion | None) -> JobEfficiencyView | None:
    """None for a job without usage data: the page then says so."""
    held, usage = held_of(job.__dict__), usage_of(job.__dict__)
    if not usage.measured:
        return None
    ratios = job_efficiency(held, usage)
    right_sized = job.right_sized_service_units
    waste, advice = Waste(), []
    if version is not None and held.nnodes:
        request = right_sized_request(version.spec, held, usage)
        waste = waste_of(version.spec, held, usage, request, dominant=job.dominant_resource)
        if request is not None:
            nodes = held.nnodes
            if request.cores < held.cpus:
                advice.append(
                    f"ask for {request.cores // nodes} core{'s' if request.cores > nodes else ''}"
                    f" per node (--ntasks-per-node x --cpus-per-task = {request.cores // nodes})"
                )
            if request.memory_mb < held.memory_mb:
                per_node = request.memory_mb / nodes
                advice.append(
                    f"ask for {per_node:,.0f} MiB of memory per node (--mem={per_node:.0f}M)"
                )
            if request.gpus < held.gpus:
                advice.append(
                    f"ask for {request.gpus // nodes} GPU{'s' if request.gpus > nodes else ''}"
                    f" per node (--gpus-per-node={request.gpus // nodes})"
                )
    left = None
    if right_sized is not None and job.charge_state == Job.ChargeState.CHARGED:
        left = job.service_units - right_sized
    return JobEfficiencyView(
        ratios=ratios, right_sized_service_units=right_sized, left_on_the_table=left,
        waste=waste.words, set_the_charge=waste.set_the_charge, advice=advice,
    )  # fmt: skip


def _fraction_groups(job: Job) -> list[dict[str, Any]]:
    groups, first = [], 1
    for entry in job_node_fractions(job):
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
    node_share: str
    """The part of each node the time rates were charged for ("1/8"; "all" of whole nodes)."""


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
        node_share=share_text(breakdown.node_share),
    )


@require_GET
@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One job's charge explained: fractions per node, what dominated, weight and why."""
    job = job_get(pk=pk, projects=projects_visible(user=request.user))
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
    efficiency = _job_efficiency(job, version)
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
        # Measured usage right-sizes every resource; the hint guesses from the request alone.
        "cheaper": _cheaper_request(job, version) if version and efficiency is None else None,
        "efficiency": efficiency,
        "footprint": job_footprint_get(job=job),
        "money": _money(job),
        "fair_share": job_fair_share_get(job=job),
    }
    return render(request, "accounting/job_detail.html", context)


@require_http_methods(["GET", "POST"])
@staff_only
def import_list(request: HttpRequest) -> HttpResponse:
    """Staff: recent imports with their summaries, an upload form, open quarantine counts."""
    form = SacctUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            run = import_upload_start(
                cluster=form.cleaned_data["cluster"],
                name=upload.name,
                chunks=upload.chunks(),
                started_by=request.user,
                create_projects=form.cleaned_data["create_projects"],
                columns=form.cleaned_data["columns"],
                delimiter=form.cleaned_data["delimiter"],
                again=form.cleaned_data["import_again"],
            )
        except AlreadyImported as already:
            form.add_error("import_again", str(already))
        else:
            if run.task_unsent:
                messages.error(request, f"Import {run.pk} of {upload.name}: {run.error}.")
            else:
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
    context = {
        "run": run,
        "records": records,
        "bookings": import_run_bookings(run=run),
        "changes": import_run_changes(run=run),
    }
    return render(request, "accounting/import_detail.html", context)


QUARANTINE_SHOWN: dict[QuarantineState, str] = {
    "open": "Open",
    "resolved": "Resolved",
    "all": "All",
}


@require_GET
@staff_only
def quarantine_list(request: HttpRequest) -> HttpResponse:
    asked = request.GET.get("show")
    shown: QuarantineState = next((state for state in QUARANTINE_SHOWN if state == asked), "open")
    open_records = quarantine_open()
    records = quarantine_records(state=shown)
    reasons = (
        open_records.order_by()
        .values("cluster__name", "field")
        .annotate(lines=Count("pk"))
        .order_by("cluster__name", "-lines")
    )
    return render(
        request,
        "accounting/quarantine_list.html",
        {
            "records": records[:500],
            "shown_total": records.count(),
            "total": open_records.count(),
            "shown": shown,
            "filters": QUARANTINE_SHOWN,
            "reasons": list(reasons),
            "clusters": Cluster.objects.order_by("name"),
            "retry_cluster": quarantine_retry_cluster(),
        },
    )


@require_POST
@staff_only
def quarantine_retry(request: HttpRequest) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=request.POST.get("cluster"))
    quarantine_retry_enqueue(cluster=cluster)
    messages.success(request, f"Quarantined lines of {cluster.name} are being read again.")
    return redirect("accounting:quarantine-list")

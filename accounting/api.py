"""REST API of the accounting app (docs/api.md): clusters, partitions, jobs, usage, quote,
cost ratio, imports and quarantined lines.

Views are thin: an input serializer parses, a service or selector does the work, an output
serializer renders. What a caller may see is decided by the querysets below, which scope by
``allocations.selectors.projects_for_user``: another project's job is a 404, never a 403.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import django_filters  # type: ignore[import-untyped]
from django.conf import settings
from django.db import transaction
from django.db.models import DecimalField, Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.filters import OrderingFilter
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer, ValidationError
from rest_framework.views import APIView

from accounting.api_serializers import (
    ClusterApplyInputSerializer,
    ClusterApplyOutputSerializer,
    ClusterOutputSerializer,
    CostRatioOutputSerializer,
    CostRatioQuerySerializer,
    ImportRunOutputSerializer,
    ImportUploadInputSerializer,
    JobDetailOutputSerializer,
    JobOutputSerializer,
    MessageOutputSerializer,
    PartitionApplyInputSerializer,
    PartitionDetailOutputSerializer,
    PartitionOutputSerializer,
    QuarantinedLineOutputSerializer,
    QuarantineRetryInputSerializer,
    QuoteInputSerializer,
    QuoteOutputSerializer,
    UsageQuerySerializer,
    UsageRowSerializer,
    UtilisationOutputSerializer,
    UtilisationQuerySerializer,
)
from accounting.charging import SpecError
from accounting.cost_ratio import cost_ratio_report
from accounting.imports import import_upload_start
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
    QuarantinedRecord,
)
from accounting.peak import PeakError
from accounting.quotes import QuoteRequest, quote_payload
from accounting.selectors import (
    NotFound,
    UtilisationReport,
    cluster_get,
    partition_versions_current,
    quote_get,
    usage_get,
    utilisation_report_get,
)
from accounting.services import cluster_apply, quarantine_retry_enqueue
from accounting.utilisation import (
    ROW_FIELDS,
    PeakInForce,
    UtilisationError,
    WindowError,
    requested_window,
    utc_text,
    utilisation_figures,
    utilisation_rows,
)
from allocations.models import Project
from allocations.permissions import Actor, is_staff
from allocations.selectors import projects_for_user
from portal.api import (
    ID_PATTERN,
    NAME_PATTERN,
    ApiViewSet,
    IdFilter,
    IsStaff,
    IsStaffOrReadOnly,
    StaffOnlyHidden,
    UtcIsoDateTimeFilter,
    acting_user,
)

_SU = DecimalField(max_digits=24, decimal_places=6)


def _paginated(view: ApiViewSet, queryset: Any, serializer: type[BaseSerializer]) -> Response:
    page = view.paginate_queryset(queryset)
    return view.get_paginated_response(serializer(page, many=True).data)


# --- Selectors the API needs (read-only; scoped to what the caller may see) -----------------


def jobs_visible(*, user: Actor) -> QuerySet[Job]:
    """Jobs of the projects ``user`` may see (every job for staff), with the rows their names
    come from (cluster, project, partition, rate version)."""
    jobs = Job.objects.select_related("cluster", "project", "partition", "partition_version")
    if is_staff(user):
        return jobs
    return jobs.filter(project__in=projects_for_user(user=user))


def cost_ratio_partitions(
    *, cluster: Cluster, cpu_partition: str | None, gpu_partition: str | None
) -> tuple[PartitionVersion, PartitionVersion]:
    """The CPU and GPU partitions to compare (by name, or the first of each kind), as the
    ``cost_ratio`` command picks them."""
    versions = partition_versions_current(cluster=cluster)

    def pick(name: str | None, *, gpu: bool) -> PartitionVersion:
        for version in versions:
            if (name is None and version.is_gpu == gpu) or version.partition.name == name:
                return version
        kind = "GPU" if gpu else "CPU"
        raise NotFound(f"cluster {cluster.name!r} has no {kind} partition {name or ''}".rstrip())

    return pick(cpu_partition, gpu=False), pick(gpu_partition, gpu=True)


# --- Filters --------------------------------------------------------------------------------


class JobFilter(django_filters.FilterSet):
    project = django_filters.CharFilter(method="filter_project", help_text="project code")
    user = django_filters.CharFilter(field_name="username", help_text="Slurm user name")
    cluster = django_filters.CharFilter(field_name="cluster__name")
    partition = django_filters.CharFilter(field_name="partition__name", help_text="name")
    state = django_filters.CharFilter(
        field_name="state", lookup_expr="iexact", help_text="e.g. COMPLETED, FAILED, RUNNING"
    )
    charge_state = django_filters.ChoiceFilter(choices=Job.ChargeState.choices)
    start = UtcIsoDateTimeFilter(
        field_name="end", lookup_expr="gte", help_text="jobs that ended at or after (ISO 8601)"
    )
    end = UtcIsoDateTimeFilter(
        field_name="end", lookup_expr="lt", help_text="jobs that ended before (ISO 8601)"
    )

    class Meta:
        model = Job
        fields: list[str] = []

    def filter_project(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        # By the project's id, not a join on its code: PostgreSQL then reads the newest jobs
        # straight from the (project, end) index instead of sorting all of the project's jobs.
        project_id = Project.objects.filter(code=value).values_list("pk", flat=True).first()
        return queryset.filter(project_id=project_id) if project_id else queryset.none()


class PartitionFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    name = django_filters.CharFilter(field_name="name")

    class Meta:
        model = Partition
        fields: list[str] = []


class QuarantinedLineFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    import_run = IdFilter(field_name="import_run_id")
    resolved = django_filters.BooleanFilter(
        field_name="resolved_at", lookup_expr="isnull", exclude=True,
        help_text="false (the default on the page): lines still waiting to be charged",
    )  # fmt: skip

    class Meta:
        model = QuarantinedRecord
        fields: list[str] = []


# --- Clusters and partitions ----------------------------------------------------------------


@extend_schema(tags=["clusters"])
class ClusterViewSet(ApiViewSet):
    """Clusters. Everyone signed in reads them; staff apply spec files (``cluster_apply``)."""

    permission_classes = [IsAuthenticated, IsStaffOrReadOnly]
    queryset = Cluster.objects.prefetch_related("partitions").order_by("name")
    serializer_class = ClusterOutputSerializer
    lookup_field = "name"
    lookup_value_regex = NAME_PATTERN
    filter_backends = [OrderingFilter]
    ordering_fields = ["name", "created_at"]
    ordering = ["name"]

    def list(self, request: Request) -> Response:
        """Every cluster with its partitions' names."""
        return _paginated(self, self.filter_queryset(self.get_queryset()), ClusterOutputSerializer)

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(ClusterOutputSerializer(self.get_object()).data)

    @extend_schema(
        request=ClusterApplyInputSerializer,
        responses={
            201: OpenApiResponse(ClusterApplyOutputSerializer, "the cluster is new"),
            200: OpenApiResponse(ClusterApplyOutputSerializer, "an existing cluster, updated"),
        },
    )
    def create(self, request: Request) -> Response:
        """Staff: apply a cluster spec file (``cluster_apply``'s format, docs/cluster-specs.md).
        Idempotent: a partition whose spec changed gets a new rate version, nothing is deleted."""
        data = ClusterApplyInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = cluster_apply(
            definition=data.validated_data["definition"],
            effective_from=data.validated_data.get("effective_from"),
            applied_by=acting_user(request),
            note=data.validated_data["note"],
        )
        code = status.HTTP_201_CREATED if result.cluster_created else status.HTTP_200_OK
        return Response(ClusterApplyOutputSerializer(result).data, status=code)


def _partitions() -> QuerySet[Partition]:
    newest_first = PartitionVersion.objects.order_by("-effective_from")
    return (
        Partition.objects.select_related("cluster")
        .prefetch_related(Prefetch("versions", queryset=newest_first))
        .order_by("cluster__name", "name")
    )


@extend_schema(tags=["partitions"])
class PartitionViewSet(ApiViewSet):
    """Partitions with their hardware and charging weight (eq 15); staff add and re-rate them."""

    permission_classes = [IsAuthenticated, IsStaffOrReadOnly]
    serializer_class = PartitionOutputSerializer
    lookup_value_regex = ID_PATTERN
    filterset_class = PartitionFilter
    ordering_fields = ["name", "created_at"]

    def get_queryset(self) -> QuerySet[Partition]:
        return _partitions()

    def list(self, request: Request) -> Response:
        """Every partition with its newest rate version and why its weight is what it is."""
        queryset = self.filter_queryset(self.get_queryset())
        return _paginated(self, queryset, PartitionOutputSerializer)

    @extend_schema(responses=PartitionDetailOutputSerializer)
    def retrieve(self, request: Request, pk: str) -> Response:
        """A partition with every rate version, newest first."""
        return Response(PartitionDetailOutputSerializer(self.get_object()).data)

    @extend_schema(
        request=PartitionApplyInputSerializer,
        responses={
            201: OpenApiResponse(PartitionDetailOutputSerializer, "a new partition"),
            200: OpenApiResponse(
                PartitionDetailOutputSerializer, "a new rate version, or nothing changed"
            ),
        },
    )
    def create(self, request: Request) -> Response:
        """Staff: apply one partition's spec to a cluster, as a spec file would."""
        data = PartitionApplyInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = cluster_apply(
            definition=data.validated_data["definition"],
            effective_from=data.validated_data.get("effective_from"),
            applied_by=acting_user(request),
            note=data.validated_data["note"],
        )
        partition = _partitions().get(cluster=result.cluster, name=data.validated_data["name"])
        code = status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        return Response(PartitionDetailOutputSerializer(partition).data, status=code)


# --- Jobs and usage -------------------------------------------------------------------------


# A page of jobs is rendered from ``values()`` rows: no model objects to build.
_JOB_ROWS = JobOutputSerializer()
_JOB_COLUMNS = _JOB_ROWS.row_columns()


class _CountedRows:
    """Rows to page through, counted on the plain jobs: the rows join the names of related
    objects, and a count with those joins would read every one of a project's jobs from the
    table instead of their entries in the (project, end) index."""

    ordered = True  # the paginator asks

    def __init__(self, *, rows: QuerySet[Any], plain: QuerySet[Job]) -> None:
        self.rows = rows
        self.plain = plain

    def count(self) -> int:
        return self.plain.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: slice) -> list[dict[str, Any]]:
        return list(self.rows[index])


@extend_schema(tags=["jobs"])
class JobViewSet(ApiViewSet):
    """The ledger: jobs of the caller's projects (every job for staff) with their charges."""

    serializer_class = JobOutputSerializer
    lookup_value_regex = ID_PATTERN
    filterset_class = JobFilter
    ordering_fields = ["end", "start", "submit", "service_units", "elapsed_seconds", "id"]
    ordering = ["-end", "-id"]

    def get_queryset(self) -> QuerySet[Job]:
        return jobs_visible(user=self.request.user)

    def list(self, request: Request) -> Response:
        """Jobs, newest end first (running jobs, with no end yet, first on PostgreSQL), each
        with its charge: SU, weight, dominant resource, per-node fractions, energy."""
        jobs = self.filter_queryset(self.get_queryset())
        rows = _CountedRows(rows=jobs.values(*_JOB_COLUMNS), plain=jobs)
        # Django's paginator needs count(), len() and slices, all of which _CountedRows has.
        page = self.paginate_queryset(cast("Sequence[dict[str, Any]]", rows))
        return self.get_paginated_response([_JOB_ROWS.render_row(row) for row in page or []])

    @extend_schema(responses=JobDetailOutputSerializer)
    def retrieve(self, request: Request, pk: str) -> Response:
        """One job with its charge breakdown and why the weight is what it is."""
        jobs = self.get_queryset().select_related(
            "partition_version__partition", "cost_model_version"
        )
        return Response(JobDetailOutputSerializer(get_object_or_404(jobs, pk=pk)).data)


@extend_schema(tags=["usage"])
class UsageViewSet(ApiViewSet):
    """Usage from the daily roll-ups, never a scan of jobs."""

    serializer_class = UsageRowSerializer
    filter_backends: list[Any] = []

    @extend_schema(parameters=[UsageQuerySerializer])
    def list(self, request: Request) -> Response:
        """SU, core-hours, GPU-hours, energy, money and jobs of the caller's projects (any project
        for staff) per day, ISO week, month or in total, grouped by project, user and/or
        partition. ``start`` and ``end`` are days; ``end`` is exclusive."""
        query = UsageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = dict(query.validated_data)
        usage = usage_get(
            projects=projects_for_user(user=request.user),
            granularity=options.pop("granularity"),
            group_by=set(options.pop("group_by", set())),
            filters=options,
        )
        page = self.paginate_queryset(usage.rows)
        return self.get_paginated_response(
            UsageRowSerializer([usage.row(row) for row in page or []], many=True).data
        )


# --- Quote and cost ratio -------------------------------------------------------------------


class QuoteView(APIView):
    """What a planned job would cost: the ``quote`` command over HTTP."""

    @extend_schema(tags=["quote"], request=QuoteInputSerializer, responses=QuoteOutputSerializer)
    def post(self, request: Request) -> Response:
        """The same fields as ``python manage.py quote`` and exactly the object its ``--json``
        prints: SU, weight, dominant resource, energy and per-node fractions."""
        data = QuoteInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        quote = QuoteRequest(
            nodes=values["nodes"],
            hours=values["hours"],
            cores_per_node=values.get("cores_per_node"),
            gpus_per_node=values.get("gpus_per_node"),
            memory_per_node_mb=values.get("memory_per_node"),
            model=values["model"],
        )
        partition = values["partition_object"]
        version, charge = quote_get(partition=partition, request=quote, at=values.get("at"))
        return Response(
            quote_payload(
                cluster_name=partition.cluster.name, partition_name=partition.name,
                version_number=version.number, request=quote, charge=charge,
            )
        )  # fmt: skip


class CostRatioView(APIView):
    """The CPU-vs-GPU cost ratio explorer's data (the energy paper's Tables II-IV, Figure 1)."""

    @extend_schema(
        tags=["cost-ratio"], parameters=[CostRatioQuerySerializer],
        responses=CostRatioOutputSerializer,
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        """``cost_ratio --json`` for a cluster's CPU and GPU partitions."""
        query = CostRatioQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        try:
            cluster = cluster_get(name=options["cluster"])
            cpu, gpu = cost_ratio_partitions(
                cluster=cluster,
                cpu_partition=options.get("cpu_partition"),
                gpu_partition=options.get("gpu_partition"),
            )
        except NotFound as error:
            raise ValidationError({"cluster": [str(error)]}) from None
        models = ("sm", "peak", "energy") if options["model"] == "all" else (options["model"],)
        try:
            report = cost_ratio_report(cpu=cpu.spec, gpu=gpu.spec, models=models)
        except (SpecError, ValueError) as error:
            raise ValidationError({"cluster": [str(error)]}) from None
        return Response(
            {
                "cluster": cluster.name,
                "cpu_partition": cpu.partition.name,
                "gpu_partition": gpu.partition.name,
                **report,
            }
        )


# --- Imports and quarantine (staff) ---------------------------------------------------------


@extend_schema(tags=["imports"])
@extend_schema_view(quarantined_lines=extend_schema(filters=False))
class ImportRunViewSet(ApiViewSet):
    """Staff: sacct imports (uploads, files and scheduled windows) with their summaries."""

    permission_classes = [StaffOnlyHidden]
    parser_classes = [MultiPartParser, FormParser]  # uploads are files
    serializer_class = ImportRunOutputSerializer
    lookup_value_regex = ID_PATTERN
    filter_backends = [OrderingFilter]
    ordering_fields = ["started_at", "id"]
    ordering = ["-started_at", "-id"]

    def get_queryset(self) -> QuerySet[ImportRun]:
        return ImportRun.objects.select_related("cluster", "started_by")

    def list(self, request: Request) -> Response:
        """Recent imports, newest first."""
        queryset = self.filter_queryset(self.get_queryset())
        return _paginated(self, queryset, ImportRunOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        """One import and its summary (the buckets add up to ``lines``)."""
        return Response(ImportRunOutputSerializer(self.get_object()).data)

    @extend_schema(
        request={"multipart/form-data": ImportUploadInputSerializer},
        responses={202: ImportRunOutputSerializer},
    )
    def create(self, request: Request) -> Response:
        """Upload a sacct --parsable2 file; it is kept and imported by a worker (202). Follow
        the run with GET /api/v1/imports/{id}/."""
        data = ImportUploadInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        with transaction.atomic():
            run = import_upload_start(
                cluster=data.validated_data["cluster_object"],
                name=upload.name or "upload",
                chunks=upload.chunks(),
                started_by=acting_user(request),
                create_projects=data.validated_data["create_projects"],
                upload_dir=Path(settings.VAR_DIR) / "uploads",
            )
        return Response(ImportRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=QuarantinedLineOutputSerializer(many=True))
    @action(detail=True, methods=["get"], url_path="quarantined-lines")
    def quarantined_lines(self, request: Request, pk: str) -> Response:
        """The lines of this import that could not be charged, in file order."""
        run = self.get_object()
        lines = run.quarantined_records.select_related("cluster").order_by("line_number", "pk")
        return _paginated(self, lines, QuarantinedLineOutputSerializer)


@extend_schema(tags=["imports"])
class QuarantinedLineViewSet(ApiViewSet):
    """Staff: sacct lines that could not be parsed or charged, kept whole with the reason."""

    permission_classes = [StaffOnlyHidden]
    serializer_class = QuarantinedLineOutputSerializer
    lookup_value_regex = ID_PATTERN
    filterset_class = QuarantinedLineFilter
    ordering_fields = ["created_at", "line_number", "id"]
    ordering = ["-created_at", "line_number", "id"]

    def get_queryset(self) -> QuerySet[QuarantinedRecord]:
        return QuarantinedRecord.objects.select_related("cluster")

    def list(self, request: Request) -> Response:
        """Quarantined lines of every import (``resolved=false`` for the open ones)."""
        queryset = self.filter_queryset(self.get_queryset())
        return _paginated(self, queryset, QuarantinedLineOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(QuarantinedLineOutputSerializer(self.get_object()).data)

    @extend_schema(
        request=QuarantineRetryInputSerializer,
        responses={202: MessageOutputSerializer},
        filters=False,
    )
    @action(detail=False, methods=["post"])
    def retry(self, request: Request) -> Response:
        """Read a cluster's open quarantined lines again (after fixing their cause)."""
        data = QuarantineRetryInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = data.validated_data["cluster"]
        with transaction.atomic():
            quarantine_retry_enqueue(cluster=cluster)
        open_lines = QuarantinedRecord.objects.filter(cluster=cluster, resolved_at__isnull=True)
        return Response(
            {"message": f"{open_lines.count()} open line(s) of {cluster.name} are read again"},
            status=status.HTTP_202_ACCEPTED,
        )


# --- Utilisation Q(T) (staff) ---------------------------------------------------------------


class UtilisationCsvRenderer(BaseRenderer):
    """``?format=csv`` or ``Accept: text/csv``: rows of ``utilisation_rows`` with a header."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        buffer = io.StringIO()
        csv.writer(buffer).writerows(data)
        return buffer.getvalue().encode(self.charset)


def _flops_text(flops: Decimal) -> str:
    return f"{flops.normalize():f}"


def _peak_body(peak: PeakInForce | None) -> dict[str, Any] | None:
    if peak is None:
        return None
    return {
        "effective_from": utc_text(peak.effective_from),
        "node_count": peak.node_count,
        "peak_flops": _flops_text(peak.peak_flops),
        "cpu_peak_source": str(peak.cpu_source),
        "gpu_peak_source": None if peak.gpu_source is None else str(peak.gpu_source),
    }


def utilisation_body(report: UtilisationReport) -> dict[str, Any]:
    """The JSON of ``UtilisationOutputSerializer``, built directly: a year of hours is 8,760
    buckets, too many to pass through serializer fields one by one."""
    return {
        "cluster": report.cluster.name,
        "partition": report.partition.name if report.partition else None,
        "timezone": report.cluster.timezone,
        "step": str(report.step),
        "start": utc_text(report.start),
        "end": utc_text(report.end),
        "partitions": [
            {
                "name": peaks.name,
                "now": _peak_body(peaks.now),
                "in_window": [_peak_body(peak) for peak in peaks.in_window],
            }
            for peaks in report.peaks
        ],
        "buckets": [
            {
                "start": utc_text(window.start),
                "end": utc_text(window.end),
                "total": utilisation_figures(window.total),
                "partitions": {
                    name: utilisation_figures(figures)
                    for name, figures in window.partitions.items()
                },
            }
            for window in report.windows
        ],
    }


def utilisation_csv_filename(report: UtilisationReport) -> str:
    scope = report.cluster.name + (f"-{report.partition.name}" if report.partition else "")
    return f"utilisation-{scope}-{report.step}-{report.start:%Y%m%d}.csv"


class UtilisationView(APIView):
    """Staff: utilisation Q(T) of a cluster (DESIGN section 4) per hour, day, week or month."""

    permission_classes = [IsAuthenticated, IsStaff]
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, UtilisationCsvRenderer]

    @extend_schema(
        tags=["utilisation"],
        parameters=[UtilisationQuerySerializer],
        responses={
            (200, "application/json"): UtilisationOutputSerializer,
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR,
                description="header, then per bucket one row per partition and one 'total'",
            ),
        },
    )
    def get(self, request: Request) -> Response:
        """Q(T) = Op_app(T) / Op(T) (eqs 9-12) beside the classical core- and GPU-hour
        utilisation, per bucket, per partition and in total, read from the hourly rows the
        import keeps. Each partition says where its peak came from (eq 3/7 or the vendor's
        figure), its P_peak now and the node-count changes inside the window. Times without a
        zone are the cluster's wall clock; the window is widened to whole local hours."""
        query = UtilisationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        cluster = options["cluster_object"]
        try:
            start, end = requested_window(
                start=options.get("start"), end=options.get("end"), step=options["step"],
                timezone=cluster.zoneinfo, now=timezone.now(),
            )  # fmt: skip
            report = utilisation_report_get(
                cluster=cluster, partition=options["partition_object"], start=start, end=end,
                step=options["step"],
            )  # fmt: skip
        except WindowError as error:
            raise ValidationError({error.field: [str(error)]}) from None
        except (PeakError, UtilisationError) as error:
            field = "partition" if options["partition_object"] else "cluster"
            raise ValidationError({field: [str(error)]}) from None
        if request.accepted_renderer.format == UtilisationCsvRenderer.format:
            response = Response([ROW_FIELDS, *utilisation_rows(report.windows)])
            filename = utilisation_csv_filename(report)
            response["Content-Disposition"] = f'attachment; filename="{filename}"'
            return response
        return Response(utilisation_body(report))

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # Errors are JSON (the API's error shape) even when CSV was asked for.
        if response.status_code >= 400 and isinstance(
            getattr(request, "accepted_renderer", None), UtilisationCsvRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)

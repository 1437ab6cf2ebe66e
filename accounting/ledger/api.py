"""REST API of the ledger (docs/api.md): jobs, usage, import runs and quarantined lines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import django_filters  # type: ignore[import-untyped]
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from accounting.access import jobs_visible
from accounting.clusters.serializers import (
    MessageOutputSerializer,
)
from accounting.ledger.cursor import CursorError, JobCursor, cursor_decode, cursor_encode
from accounting.ledger.efficiency_selectors import (
    EfficiencyFilters,
    efficiency_by_month,
    efficiency_distributions,
    totals_added,
)
from accounting.ledger.selectors import (
    COUNTED_DAYS,
    count_bounded,
    job_find,
    jobs_after,
    keyset_page_count,
    usage_get,
)
from accounting.ledger.serializers import (
    EfficiencyOutputSerializer,
    EfficiencyQuerySerializer,
    ImportRunOutputSerializer,
    ImportUploadInputSerializer,
    JobEfficiencyOutputSerializer,
    JobOutputSerializer,
    QuarantinedLineOutputSerializer,
    QuarantineRetryInputSerializer,
    UsageQuerySerializer,
    UsageRowSerializer,
)
from accounting.ledger.sources import AlreadyImported, import_upload_start
from accounting.models import (
    ImportRun,
    Job,
    QuarantinedRecord,
)
from accounting.quarantine import quarantine_retry_enqueue
from kit.api import (
    ID_PATTERN,
    ApiPagination,
    ApiViewSet,
    EnumFilter,
    IdFilter,
    StaffOnlyHidden,
    StrictBooleanFilter,
    UtcIsoDateTimeFilter,
    acting_user,
    error_body,
)
from projects.access import projects_visible
from projects.models import Project


class JobFilter(django_filters.FilterSet):
    project = django_filters.CharFilter(method="filter_project", help_text="project code")
    user = django_filters.CharFilter(field_name="username", help_text="Slurm user name")
    cluster = django_filters.CharFilter(field_name="cluster__name")
    partition = django_filters.CharFilter(field_name="partition__name", help_text="name")
    state = django_filters.CharFilter(
        field_name="state", lookup_expr="iexact", help_text="e.g. COMPLETED, FAILED, RUNNING"
    )
    charge_state = EnumFilter(choices=Job.ChargeState.choices)
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


class QuarantinedLineFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    import_run = IdFilter(field_name="import_run_id")
    resolved = StrictBooleanFilter(
        field_name="resolved_at", lookup_expr="isnull", exclude=True,
        help_text="false (the default on the page): lines still waiting to be charged",
    )  # fmt: skip

    class Meta:
        model = QuarantinedRecord
        fields: list[str] = []


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


class JobPagination(ApiPagination):
    """The jobs' pages: newest end first by ``cursor`` (the ``next`` link), with a ``count`` only
    where the filters bound it (null otherwise); ``page=N`` and the other orderings page by
    number as every list does, counted (docs/api.md, "Jobs")."""

    cursor_query_param = "cursor"

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            *super().get_schema_operation_parameters(view),
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": (
                    "Where the previous page of jobs (newest end first) stopped: follow the "
                    "`next` link. Opaque; a cursor the API did not write is a 400."
                ),
                "schema": {"type": "string"},
            },
        ]

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        answer = super().get_paginated_response_schema(schema)
        answer["properties"]["count"] = {
            "type": "integer",
            "nullable": True,
            "description": (
                "how many jobs the filters select; null on pages by cursor whose filters do not "
                f"bound it (a project and a start and end at most {COUNTED_DAYS} days apart)"
            ),
        }
        return answer


@extend_schema(tags=["jobs"])
class JobViewSet(ApiViewSet):
    """The ledger: jobs of the caller's projects (every job for staff) with their charges."""

    serializer_class = JobOutputSerializer
    pagination_class = JobPagination
    lookup_value_regex = ID_PATTERN
    filterset_class = JobFilter
    ordering_fields = ["end", "start", "submit", "service_units", "elapsed_seconds", "id"]
    ordering = ["-end", "-id"]

    def get_queryset(self) -> QuerySet[Job]:
        return jobs_visible(user=self.request.user)

    def list(self, request: Request) -> Response:
        """Jobs, newest end first (running jobs, with no end yet, first), each with its charge:
        SU, weight, dominant resource, per-node fractions, energy. Newest first, the pages go
        by ``cursor`` (follow ``next``): each costs the same however many jobs come before or
        after it; ``count`` is exact where the filters bound it and null elsewhere. With
        ``page`` or another ``ordering`` the pages go by number, counted."""
        jobs = self.filter_queryset(self.get_queryset())
        if _by_cursor(request):
            return self._cursor_page(request, jobs)
        rows = _CountedRows(rows=jobs.values(*_JOB_COLUMNS), plain=jobs)
        # Django's paginator needs count(), len() and slices, all of which _CountedRows has.
        page = self.paginate_queryset(cast("Sequence[dict[str, Any]]", rows))
        return self.get_paginated_response([_JOB_ROWS.render_row(row) for row in page or []])

    def _cursor_page(self, request: Request, jobs: QuerySet[Job]) -> Response:
        text = request.query_params.get(JobPagination.cursor_query_param)
        try:
            after = None if text is None else cursor_decode(text)
        except CursorError as error:
            raise ValidationError({JobPagination.cursor_query_param: [str(error)]}) from error
        size = JobPagination().get_page_size(request)
        bounds = JobFilter(request.query_params).form
        bounds.is_valid()  # already valid: filter_queryset checked it
        window = bounds.cleaned_data
        rows = jobs_after(
            jobs=jobs, after=after, size=size + 1, columns=_JOB_COLUMNS,
            ended_from=window.get("start"),
        )  # fmt: skip
        page, more = rows[:size], len(rows) > size
        count = keyset_page_count(
            jobs=jobs, shown=len(page), first=after is None, more=more,
            bounded=_count_bounded(window),
        )  # fmt: skip
        following = None
        if more:
            last = page[-1]
            following = replace_query_param(
                request.build_absolute_uri(),
                JobPagination.cursor_query_param,
                cursor_encode(JobCursor(end=last["end"], pk=last["pk"])),
            )
        return Response(
            {
                "count": count,
                "next": following,
                "previous": None,
                "results": [_JOB_ROWS.render_row(row) for row in page],
            }
        )

    @extend_schema(responses=JobEfficiencyOutputSerializer)
    def retrieve(self, request: Request, pk: str) -> Response:
        """One job with its charge breakdown, why the weight is what it is, and its efficiency
        (ratios of used to held, null where Slurm measured nothing) with the SU of a
        right-sized request."""
        jobs = self.get_queryset().select_related(
            "partition_version__partition", "cost_model_version"
        )
        job = job_find(jobs=jobs, pk=int(pk))
        if job is None:
            raise Http404
        return Response(JobEfficiencyOutputSerializer(job).data)


def _by_cursor(request: Request) -> bool:
    """Newest end first (the default order) and no page number asked: pages by cursor."""
    ordering = request.query_params.get("ordering", "")
    return "page" not in request.query_params and ordering in ("", "-end", "-end,-id")


def _count_bounded(window: dict[str, Any]) -> bool:
    return bool(window.get("project")) and count_bounded(
        ended_from=window.get("start"), ended_before=window.get("end")
    )


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
            projects=projects_visible(user=request.user),
            granularity=options.pop("granularity"),
            group_by=set(options.pop("group_by", set())),
            filters=options,
        )
        page = self.paginate_queryset(usage.rows)
        return self.get_paginated_response(
            UsageRowSerializer([usage.row(row) for row in page or []], many=True).data
        )


class EfficiencyView(APIView):
    """Job efficiency of the caller's projects (any project for staff), from the roll-ups."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        tags=["usage"], parameters=[EfficiencyQuerySerializer],
        responses=EfficiencyOutputSerializer,
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        """The summary (ratios of sums, SU left on the table, jobs with and without usage
        data), the same per month, and the distributions (jobs per tenth of each ratio) of the
        jobs that ended in [start, end) (days; ``end`` exclusive) of the projects the caller may
        see, narrowed by project, user and partition as ``/usage/`` is. Jobs without usage data
        are in no ratio. Distributions count whole months that overlap the period."""
        query = EfficiencyQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        filters = EfficiencyFilters(
            project=options.get("project"), username=options.get("user"),
            partition=options.get("partition"), start=options.get("start"),
            end=options.get("end"),
        )  # fmt: skip
        projects = projects_visible(user=request.user)
        months = efficiency_by_month(projects=projects, filters=filters)
        body = {
            "summary": totals_added(months),
            "months": months,
            "distributions": efficiency_distributions(projects=projects, filters=filters),
        }
        return Response(EfficiencyOutputSerializer(body).data)


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
        return self.paginated(queryset, ImportRunOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        """One import and its summary (the buckets add up to ``lines``)."""
        return Response(ImportRunOutputSerializer(self.get_object()).data)

    @extend_schema(
        request={"multipart/form-data": ImportUploadInputSerializer},
        responses={
            202: ImportRunOutputSerializer,
            503: OpenApiResponse(
                description="the task queue did not answer: the run failed at once; the error"
                " body's message says why, and import_run is the run's id"
            ),
        },
    )
    def create(self, request: Request) -> Response:
        """Upload a sacct --parsable2 or --json file; it is kept and imported by a worker (202).
        Follow the run with GET /api/v1/imports/{id}/. Content this cluster imported before
        answers 409 with the earlier run's id in ``import_run``, unless ``import_again`` is
        set. When the task queue is down the run fails at once and the answer is 503 with the
        reason and the run's id (the file is kept, and queued once the queue answers)."""
        data = ImportUploadInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        try:
            run = import_upload_start(
                cluster=data.validated_data["cluster_object"],
                name=upload.name or "upload",
                chunks=upload.chunks(),
                started_by=acting_user(request),
                create_projects=data.validated_data["create_projects"],
                columns=data.validated_data["columns"],
                delimiter=data.validated_data["delimiter"],
                again=data.validated_data["import_again"],
            )
        except AlreadyImported as already:
            body = error_body(str(already), {"import_again": [str(already)]})
            return Response(
                {**body, "import_run": already.earlier.pk}, status=status.HTTP_409_CONFLICT
            )
        if run.task_unsent:
            return Response(
                {**error_body(run.error), "import_run": run.pk},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(ImportRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=QuarantinedLineOutputSerializer(many=True))
    @action(detail=True, methods=["get"], url_path="quarantined-lines")
    def quarantined_lines(self, request: Request, pk: str) -> Response:
        """The lines of this import that could not be charged, in file order."""
        run = self.get_object()
        lines = run.quarantined_records.select_related("cluster").order_by("line_number", "pk")
        return self.paginated(lines, QuarantinedLineOutputSerializer)


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
        return self.paginated(queryset, QuarantinedLineOutputSerializer)

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
        quarantine_retry_enqueue(cluster=cluster)
        open_lines = QuarantinedRecord.objects.filter(cluster=cluster, resolved_at__isnull=True)
        return Response(
            {"message": f"{open_lines.count()} open line(s) of {cluster.name} are read again"},
            status=status.HTTP_202_ACCEPTED,
        )

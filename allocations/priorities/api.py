"""REST API of dynamic priority (docs/api.md), staff only: profiling coefficients (post one,
a list, or a CSV file; read them), each project's K, Pr_dyn and Slurm command per cluster,
and each cluster's priority policy. Thin: serializers parse, ``allocations/priorities/services.py``
decides. Everyone else gets 404, as on the staff pages; anonymous callers 401.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import django_filters  # type: ignore[import-untyped]
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.models import Cluster, Job
from allocations.models import PriorityPolicy, ProfilingCoefficient
from allocations.priorities.services import (
    CSV_MAX_LINES,
    DEFAULT_COMMAND_TEMPLATE,
    PriorityError,
    ProfilingCsvError,
    priority_policy_get,
    priority_policy_set,
    profiled_job_get,
    profiling_coefficients_import_csv,
    profiling_coefficients_list,
    profiling_coefficients_post,
    project_priorities_get,
)
from kit.api import (
    ApiModelSerializer,
    ApiViewSet,
    QuerySerializer,
    StaffOnlyHidden,
    UtcDateTimeField,
    acting_user,
    slug_of,
)
from kit.filters import ApiFilterBackend
from projects.models import Project

MAX_CSV_BYTES = 5 * 1024 * 1024
MAX_ITEMS = 1000


def _decimal(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=20, decimal_places=6, **kwargs)


def _cluster_or_error(name: str, field: str = "cluster") -> Cluster:
    try:
        return cluster_get(name=name)
    except NotFound as error:
        raise serializers.ValidationError({field: [str(error)]}) from None


# --- Serializers -------------------------------------------------------------------------------


class ProfilingCoefficientInputSerializer(serializers.Serializer):
    """One profiler's coefficient, for a whole project or for one of its jobs."""

    cluster = serializers.SlugField(max_length=64)
    project = serializers.CharField(max_length=64, help_text="the project's code")
    k_prof = _decimal(min_value=Decimal(0), help_text="the profiling coefficient (eq 13), >= 0")
    job_id = serializers.CharField(
        max_length=64, required=False, allow_blank=True,
        help_text="a Slurm job id (JobIDRaw, or JobID such as 123_4) of the project on the "
        "cluster; empty or absent for the whole project",
    )  # fmt: skip
    note = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        cluster = _cluster_or_error(attrs["cluster"])
        project = Project.objects.filter(code=attrs["project"]).first()
        if project is None:
            raise serializers.ValidationError(
                {"project": [f"unknown project {attrs['project']!r}"]}
            )
        job: Job | None = None
        job_id = attrs.get("job_id", "").strip()
        if job_id:
            try:
                job = profiled_job_get(cluster=cluster, project=project, job_id=job_id)
            except PriorityError as error:
                raise serializers.ValidationError({"job_id": [str(error)]}) from None
        return {**attrs, "cluster": cluster, "project": project, "job": job}


# The request body: one coefficient or a list of them (all or nothing).
_COEFFICIENT_ITEM = {
    "type": "object",
    "properties": {
        "cluster": {"type": "string", "pattern": r"^[-a-zA-Z0-9_]+$", "maxLength": 64},
        "project": {"type": "string", "maxLength": 64, "description": "the project's code"},
        "k_prof": {
            "type": "string", "format": "decimal", "pattern": r"^\d{0,14}(?:\.\d{0,6})?$",
            "description": "the profiling coefficient (eq 13), >= 0",
        },
        "job_id": {
            "type": "string", "maxLength": 64,
            "description": "a Slurm job id of the project on the cluster; empty for the project",
        },
        "note": {"type": "string", "maxLength": 1000},
    },
    "required": ["cluster", "project", "k_prof"],
}  # fmt: skip
_COEFFICIENTS_REQUEST = {
    "application/json": {
        "oneOf": [
            _COEFFICIENT_ITEM,
            {"type": "array", "items": _COEFFICIENT_ITEM, "minItems": 1, "maxItems": MAX_ITEMS},
        ]
    }
}


class ProfilingCsvInputSerializer(serializers.Serializer):
    """A CSV file ``project,k_prof[,job_id][,note]`` with that header, for one cluster."""

    cluster = serializers.SlugField(max_length=64)
    file = serializers.FileField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        cluster = _cluster_or_error(attrs["cluster"])
        upload = attrs["file"]
        if upload.size > MAX_CSV_BYTES:
            raise serializers.ValidationError({"file": ["the file is larger than 5 MiB"]})
        try:
            text = upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise serializers.ValidationError({"file": ["the file is not UTF-8 text"]}) from None
        return {"cluster": cluster, "text": text}


class ProfilingCoefficientOutputSerializer(ApiModelSerializer):
    """A posted coefficient; ``job`` and ``slurm_job_id`` are null for the whole project."""

    cluster = slug_of("name")
    project = slug_of("code")
    slurm_job_id = serializers.CharField(
        source="job.job_id", read_only=True, allow_null=True, help_text="null for the project"
    )
    posted_by = slug_of("username", allow_null=True)

    class Meta:
        model = ProfilingCoefficient
        fields = [
            "id", "cluster", "project", "job", "slurm_job_id", "k_prof", "source", "note",
            "posted_at", "posted_by",
        ]  # fmt: skip


class ProfilingCsvOutputSerializer(serializers.Serializer):
    """How many coefficients a CSV file added, and which."""

    imported = serializers.IntegerField()
    results = ProfilingCoefficientOutputSerializer(many=True)


class PriorityPolicyInputSerializer(serializers.Serializer):
    """Eq 14 (corrected): thresholds K1 < K2, slopes C0, C1, C2, Pr_base at K1."""

    base_priority = _decimal(min_value=Decimal(0), help_text="Pr_base, the priority at K = K1")
    k1 = _decimal()
    k2 = _decimal(help_text="must be above K1")
    c0 = _decimal(help_text="slope below K1")
    c1 = _decimal(help_text="slope from K1 to K2")
    c2 = _decimal(help_text="slope from K2")
    command_template = serializers.CharField(
        max_length=500, default=DEFAULT_COMMAND_TEMPLATE,
        help_text="placeholders {qos} and {account} (the project code), {cluster}, {priority}",
    )  # fmt: skip
    execution_enabled = serializers.BooleanField(default=False)


class PriorityPolicyOutputSerializer(ApiModelSerializer):
    """A cluster's dynamic priority policy (eq 14, corrected)."""

    cluster = slug_of("name")
    updated_by = slug_of("username", allow_null=True)

    class Meta:
        model = PriorityPolicy
        fields = [
            "cluster", "base_priority", "k1", "k2", "c0", "c1", "c2", "command_template",
            "execution_enabled", "updated_at", "updated_by",
        ]  # fmt: skip


class PrioritiesQuerySerializer(QuerySerializer):
    """Which cluster."""

    cluster = serializers.SlugField(max_length=64, help_text="the cluster's name")


class LastActionOutputSerializer(serializers.Serializer):
    """The newest Slurm command proposed or run for the project."""

    status = serializers.CharField(help_text="proposed, executed, failed or dismissed")
    command = serializers.CharField()
    created_at = UtcDateTimeField()


class ProjectPriorityOutputSerializer(serializers.Serializer):
    """One project's K, dynamic priority and Slurm command."""

    project = serializers.CharField()
    k_prof = _decimal(help_text="the project's effective K (docs/utilisation.md)")
    k_source = serializers.CharField(help_text="project: a project-level value; jobs: a mean")
    jobs = serializers.IntegerField(help_text="job-level values in the mean (0 for project)")
    k_posted_at = UtcDateTimeField(help_text="when the newest value it used was posted")
    priority = serializers.DecimalField(
        max_digits=None, decimal_places=None, allow_null=True,
        help_text="Pr_dyn (eq 14) to 6 decimal places; null while the cluster has no policy",
    )  # fmt: skip
    slurm_priority = serializers.IntegerField(
        allow_null=True, help_text="Pr_dyn rounded, within 0 .. 4294967294"
    )
    command = serializers.CharField(allow_null=True, help_text="the Slurm command")
    last_action = LastActionOutputSerializer(allow_null=True)


class PrioritiesOutputSerializer(serializers.Serializer):
    """A cluster's policy and its projects' priorities."""

    cluster = serializers.CharField()
    policy = PriorityPolicyOutputSerializer(allow_null=True)
    projects = ProjectPriorityOutputSerializer(many=True)


def _item_errors(errors: Any) -> Any:
    """A list's errors keyed by item and field (``"1.k_prof"``), like a single item's.
    DRF gives them as a list with one entry per item, or as a dict by item index."""
    if isinstance(errors, list):
        errors = dict(enumerate(errors))
    if not all(str(index).isdigit() and isinstance(item, dict) for index, item in errors.items()):
        return errors
    return {
        f"{index}.{field}": messages
        for index, item in errors.items()
        for field, messages in item.items()
    }


# --- Views ---------------------------------------------------------------------------------------


class ProfilingCoefficientFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name", help_text="a cluster's name")
    project = django_filters.CharFilter(field_name="project__code", help_text="a project code")

    class Meta:
        model = ProfilingCoefficient
        fields: list[str] = []


@extend_schema(tags=["priorities"])
class ProfilingCoefficientViewSet(ApiViewSet):
    """Staff: profilers' coefficients K_prof per project or job (append-only)."""

    permission_classes = [StaffOnlyHidden]
    parser_classes = [JSONParser]
    serializer_class = ProfilingCoefficientOutputSerializer
    filter_backends = [ApiFilterBackend]
    filterset_class = ProfilingCoefficientFilter

    def get_queryset(self) -> Any:
        return profiling_coefficients_list()

    def list(self, request: Request) -> Response:
        """Posted coefficients, newest first (``?cluster=``, ``?project=``)."""
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        data = ProfilingCoefficientOutputSerializer(page, many=True).data
        return self.get_paginated_response(data)

    @extend_schema(
        request=_COEFFICIENTS_REQUEST,
        responses={201: ProfilingCoefficientOutputSerializer(many=True)},
    )
    def create(self, request: Request) -> Response:
        """Post one coefficient (an object) or several (a list, at most 1000): all or
        nothing. Answers the coefficients made, in the order given."""
        many = isinstance(request.data, list)
        data = (
            serializers.ListSerializer(
                child=ProfilingCoefficientInputSerializer(),
                data=request.data,
                max_length=MAX_ITEMS,
                allow_empty=False,
            )
            if many
            else ProfilingCoefficientInputSerializer(data=request.data)
        )
        if not data.is_valid():
            raise serializers.ValidationError(_item_errors(data.errors))
        items = data.validated_data if many else [data.validated_data]
        made = profiling_coefficients_post(
            coefficients=items,
            source=ProfilingCoefficient.Source.API,
            posted_by=acting_user(request),
        )
        return Response(
            ProfilingCoefficientOutputSerializer(made, many=True).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        request={"multipart/form-data": ProfilingCsvInputSerializer},
        responses={201: ProfilingCsvOutputSerializer},
        filters=False,
    )
    @action(detail=False, methods=["post"], parser_classes=[MultiPartParser])
    def csv(self, request: Request) -> Response:
        """Upload a CSV file ``project,k_prof[,job_id][,note]`` (with that header; a job by
        its Slurm job id on the cluster). All lines or none: each refused line is listed in
        ``errors.file`` as "line N, column C: why"."""
        data = ProfilingCsvInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            made = profiling_coefficients_import_csv(
                cluster=data.validated_data["cluster"], text=data.validated_data["text"],
                posted_by=acting_user(request),
            )  # fmt: skip
        except ProfilingCsvError as error:
            raise serializers.ValidationError(
                {"file": [str(line_error) for line_error in error.errors[:CSV_MAX_LINES]]}
            ) from None
        body = {"imported": len(made), "results": made}
        return Response(ProfilingCsvOutputSerializer(body).data, status=status.HTTP_201_CREATED)


class PrioritiesView(APIView):
    """Staff: each project's effective K, Pr_dyn and Slurm command on a cluster."""

    permission_classes = [StaffOnlyHidden]

    @extend_schema(
        tags=["priorities"], parameters=[PrioritiesQuerySerializer],
        responses=PrioritiesOutputSerializer,
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        """Every project with a profiling coefficient on the cluster: K (the rule in
        docs/utilisation.md), Pr_dyn (eq 14), the Slurm priority and command, the newest
        action. Without a policy, ``policy``, ``priority`` and ``command`` are null."""
        query = PrioritiesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        cluster = _cluster_or_error(query.validated_data["cluster"])
        rows = project_priorities_get(cluster=cluster)
        body = {
            "cluster": cluster.name,
            "policy": priority_policy_get(cluster=cluster),
            "projects": [
                {
                    "project": row.project.code,
                    "k_prof": row.k.k_prof,
                    "k_source": row.k.source,
                    "jobs": row.k.jobs,
                    "k_posted_at": row.k.posted_at,
                    "priority": row.pr_dyn,
                    "slurm_priority": row.slurm_priority,
                    "command": row.command,
                    "last_action": row.last_action,
                }
                for row in rows
            ],
        }
        return Response(PrioritiesOutputSerializer(body).data)


class PriorityPolicyView(APIView):
    """Staff: a cluster's dynamic priority policy."""

    permission_classes = [StaffOnlyHidden]
    parser_classes = [JSONParser]

    @extend_schema(tags=["priorities"], responses=PriorityPolicyOutputSerializer)
    def get(self, request: Request, cluster: str) -> Response:
        """The policy (404 when the cluster has none yet)."""
        policy = get_object_or_404(
            PriorityPolicy.objects.select_related("cluster"), cluster__name=cluster
        )
        return Response(PriorityPolicyOutputSerializer(policy).data)

    @extend_schema(
        tags=["priorities"],
        request=PriorityPolicyInputSerializer,
        responses={
            200: OpenApiResponse(PriorityPolicyOutputSerializer, "the policy was replaced"),
            201: OpenApiResponse(PriorityPolicyOutputSerializer, "the cluster's first policy"),
        },
    )
    def put(self, request: Request, cluster: str) -> Response:
        """Set the whole policy. K1 must be below K2; the command template may use only
        {qos}, {account}, {cluster} and {priority}, and must use {priority}."""
        target = get_object_or_404(Cluster, name=cluster)
        data = PriorityPolicyInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        existed = PriorityPolicy.objects.filter(cluster=target).exists()
        policy = priority_policy_set(
            cluster=target, updated_by=acting_user(request), **data.validated_data
        )
        code = status.HTTP_200_OK if existed else status.HTTP_201_CREATED
        return Response(PriorityPolicyOutputSerializer(policy).data, status=code)

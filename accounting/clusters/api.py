"""REST API of clusters and partitions, quotes and the CPU-versus-GPU cost ratio (docs/api.md)."""

from __future__ import annotations

import django_filters  # type: ignore[import-untyped]
from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.filters import OrderingFilter
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import ValidationError
from rest_framework.views import APIView

from accounting.clusters.charts import MODEL_LABELS
from accounting.clusters.cost_ratio import cost_ratio_report
from accounting.clusters.explorer import (
    COMPARED_MODELS,
    comparison_problem,
    my_application,
    usable_models,
)
from accounting.clusters.quotes import QuoteRequest, quote_payload
from accounting.clusters.selectors import (
    NotFound,
    cluster_get,
    partition_versions_current,
    quote_get,
)
from accounting.clusters.serializers import (
    ClusterApplyInputSerializer,
    ClusterApplyOutputSerializer,
    ClusterOutputSerializer,
    CostRatioOutputSerializer,
    CostRatioQuerySerializer,
    MyApplicationSerializer,
    PartitionApplyInputSerializer,
    PartitionDetailOutputSerializer,
    PartitionOutputSerializer,
    QuoteInputSerializer,
    QuoteOutputSerializer,
)
from accounting.clusters.services import cluster_apply
from accounting.models import (
    Cluster,
    Partition,
    PartitionVersion,
)
from kit.api import ID_PATTERN, NAME_PATTERN, ApiViewSet, IsStaffOrReadOnly, acting_user


def cost_ratio_partitions(
    *, cluster: Cluster, cpu_partition: str | None, gpu_partition: str | None
) -> tuple[PartitionVersion, PartitionVersion]:
    """The CPU and GPU partitions to compare (by name, or the first of each kind), as the
    ``cost_ratio`` command picks them; a 400 keyed by the parameter that names no such one."""
    versions = partition_versions_current(cluster=cluster)

    def pick(name: str | None, *, gpu: bool) -> PartitionVersion:
        field, kind = ("gpu_partition", "GPU") if gpu else ("cpu_partition", "CPU")
        for version in versions:
            if name is None and version.is_gpu == gpu:
                return version
            if version.partition.name == name:
                if version.is_gpu != gpu:
                    break
                return version
        named = f" named {name!r}" if name else ""
        raise ValidationError({field: [f"Cluster {cluster.name} has no {kind} partition{named}."]})

    return pick(cpu_partition, gpu=False), pick(gpu_partition, gpu=True)


class PartitionFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    name = django_filters.CharFilter(field_name="name")

    class Meta:
        model = Partition
        fields: list[str] = []


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
        return self.paginated(self.filter_queryset(self.get_queryset()), ClusterOutputSerializer)

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
        return self.paginated(queryset, PartitionOutputSerializer)

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


class QuoteView(APIView):
    """What a planned job would cost: the ``quote`` command over HTTP."""

    open_to_read_only_tokens = True  # a POST that computes and writes nothing

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
        """``cost_ratio --json`` for a cluster's CPU and GPU partitions; the models that cannot
        price them, and why; with a speedup (or GPU-node hours), "my application" as well."""
        query = CostRatioQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise ValidationError({"cluster": [str(error)]}) from None
        cpu, gpu = cost_ratio_partitions(
            cluster=cluster,
            cpu_partition=options.get("cpu_partition"),
            gpu_partition=options.get("gpu_partition"),
        )
        problem = comparison_problem(cpu.spec, gpu.spec)
        if problem:
            side, reason = problem
            raise ValidationError({f"{side}_partition": [reason]})
        asked = COMPARED_MODELS if options["model"] == "all" else (options["model"],)
        models, unavailable = usable_models(cpu.spec, gpu.spec, asked)
        if options["model"] != "all" and unavailable:
            model = options["model"]
            reason = (
                f"The {MODEL_LABELS[model]} cannot price these partitions. {unavailable[model]}"
            )
            raise ValidationError({"model": [reason]})
        body = {
            "cluster": cluster.name,
            "cpu_partition": cpu.partition.name,
            "gpu_partition": gpu.partition.name,
            **cost_ratio_report(cpu=cpu.spec, gpu=gpu.spec, models=models),
            "unavailable_models": unavailable,
        }
        if "speedup" in options or "gpu_node_hours" in options:
            mine = my_application(
                cpu.spec, gpu.spec, cpu_node_hours=options["cpu_node_hours"],
                gpu_node_hours=options.get("gpu_node_hours"), speedup=options.get("speedup"),
                grid_g_per_kwh=options["grid_intensity"],
            )  # fmt: skip
            body["my_application"] = MyApplicationSerializer(mine).data
        return Response(body)

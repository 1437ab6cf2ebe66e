"""REST API of the money cost distribution (docs/api.md, docs/costs.md): staff only.

``GET /api/v1/cost-distribution/?cluster=&start=&end=&model_version=`` -- the numbers of the
cost distribution page: quantiles (every 1 %) of job size, runtime and cost with the share of
each column's sum, sum/count/mean/std-dev, and the cumulative cost share of the most expensive
jobs (PeCoH report, ch. 6).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import ValidationError
from rest_framework.views import APIView

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.costs.services import (
    FIRST_DAY,
    LAST_DAY,
    CostDistribution,
    DistributionUnavailable,
    cost_distribution_get,
    cost_distribution_request,
    cost_model_of,
)
from accounting.models import CostModelVersion
from kit.api import IsStaff, QuerySerializer


def _money(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=None, decimal_places=6, **kwargs)


class CostDistributionQuerySerializer(QuerySerializer):
    cluster = serializers.CharField(max_length=64)
    start = serializers.DateField(
        required=False, help_text="first day, the cluster's clock (default: 90 days before end)"
    )
    end = serializers.DateField(
        required=False, help_text="the day after the last day (default: tomorrow)"
    )
    model_version = serializers.IntegerField(
        required=False, min_value=1, help_text="cost model version number (default: newest)"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("start"), attrs.get("end")
        for name in ("start", "end"):
            day = attrs.get(name)
            if day is not None and not FIRST_DAY <= day <= LAST_DAY:
                raise ValidationError({name: [f"a day from {FIRST_DAY} to {LAST_DAY}"]})
        if start and end and start >= end:
            raise ValidationError({"end": ["the period must end after it starts"]})
        return attrs


class QuantileSerializer(serializers.Serializer):
    percent = serializers.DecimalField(max_digits=None, decimal_places=2)
    value = _money(allow_null=True)
    share_percent = serializers.DecimalField(
        allow_null=True, max_digits=None, decimal_places=4,
        help_text="share of the column's sum held by the jobs up to this quantile",
    )  # fmt: skip


class DistributionColumnSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="size, runtime or cost")
    unit = serializers.CharField(help_text="nodes, h, or the currency")
    quantiles = QuantileSerializer(many=True, source="statistics.quantiles")
    sum = _money(source="statistics.sum")
    count = serializers.IntegerField(source="statistics.count")
    mean = _money(source="statistics.mean", allow_null=True)
    std_dev = _money(source="statistics.std_dev", allow_null=True, help_text="population (ddof=0)")


class ConcentrationSerializer(serializers.Serializer):
    top_percent = serializers.DecimalField(max_digits=None, decimal_places=2)
    jobs = serializers.IntegerField(help_text="the ceil(top_percent % of N) costliest jobs")
    share_percent = serializers.DecimalField(allow_null=True, max_digits=None, decimal_places=4)


class CostModelVersionRefSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    name = serializers.CharField()
    currency = serializers.CharField()
    nodes_are = serializers.SerializerMethodField(
        help_text="exclusive: a job pays its nodes whole; shared: each node's time rates "
        "times the job's share of it (eq 1's max fraction)"
    )
    effective_from = serializers.DateTimeField()

    def get_nodes_are(self, version: CostModelVersion) -> str:
        return cost_model_of(version).nodes_are


class CostDistributionOutputSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField(help_text="exclusive")
    model_version = CostModelVersionRefSerializer(source="version")
    currency = serializers.CharField()
    job_count = serializers.IntegerField()
    costs_from = serializers.ChoiceField(
        source="source",
        choices=["stored", "recomputed"],
        help_text="stored: the jobs' own costs; recomputed: priced with model_version now",
    )
    columns = DistributionColumnSerializer(many=True)
    concentration = ConcentrationSerializer(many=True)


class CostDistributionView(APIView):
    """Staff: the distribution of job size, runtime and money cost over a period."""

    permission_classes = [IsAuthenticated, IsStaff]

    @extend_schema(
        tags=["costs"], parameters=[CostDistributionQuerySerializer],
        responses=CostDistributionOutputSerializer,
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        """Quantiles every 1 % (numpy's ``method="lower"``) of job size, runtime (h) and cost,
        with sum, count, mean and std-dev, and the share of the total cost held by the most
        expensive 0.1 ... 100 % of jobs. Finished jobs that ran on nodes and ended in
        [start, end) on the cluster's clock; cached until the cluster's next import."""
        query = CostDistributionQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise ValidationError({"cluster": [str(error)]}) from None
        try:
            version, start, end = cost_distribution_request(
                cluster=cluster, version_number=options.get("model_version"),
                start=options.get("start"), end=options.get("end"),
            )  # fmt: skip
        except DistributionUnavailable as error:
            raise ValidationError({error.field: [str(error)]}) from None
        distribution: CostDistribution = cost_distribution_get(
            cluster=cluster, version=version, start=start, end=end
        )
        return Response(CostDistributionOutputSerializer(distribution).data)

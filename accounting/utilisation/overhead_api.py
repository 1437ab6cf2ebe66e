"""REST: the stored true overhead of a cluster's window (DESIGN.md section 5), for staff.

``GET /api/v1/overhead/?cluster=&start=&end=`` answers with the newest done run whose window
covers ``[start, end)``: per partition the canonical unit, the time series (unit-seconds per
bucket), the histogram (node-seconds at each number of units) and the fair-billing rates.
Computing a window is the staff page's (or the daily task's) job; this only reads.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.clusters.selectors import NotFound as UnknownObject
from accounting.clusters.selectors import cluster_get
from accounting.models import OverheadPartitionResult, OverheadRun
from accounting.utilisation.overhead import (
    fair_rates,
    overhead_results,
    overhead_run_latest,
    unit_label,
)
from kit.api import QuerySerializer, StaffOnlyHidden, UtcDateTimeField


class OverheadQuerySerializer(QuerySerializer):
    cluster = serializers.CharField(max_length=64, help_text="the cluster's name")
    start = UtcDateTimeField(help_text="window start, ISO 8601 (UTC if no zone)")
    end = UtcDateTimeField(help_text="window end, ISO 8601 (UTC if no zone)")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["end"] <= attrs["start"]:
            raise ValidationError({"end": ["the window must end after it starts"]})
        return attrs


class CanonicalUnitSerializer(serializers.Serializer):
    cores = serializers.IntegerField(help_text="0: not in the unit")
    memory_mb = serializers.IntegerField(help_text="MiB; 0: not in the unit")
    gpus = serializers.IntegerField(help_text="0: not in the unit")
    text = serializers.CharField(help_text='in words, e.g. "1 core + 2 GiB"')


class RateSerializer(serializers.Serializer):
    ratio = serializers.FloatField(help_text="billable / allocated (1.43 = billed at 143 %)")
    exact = serializers.CharField(help_text="the same as an exact fraction, e.g. 10/7")


class FairRatesSerializer(serializers.Serializer):
    cores = RateSerializer(allow_null=True)
    memory = RateSerializer(allow_null=True)
    gpus = RateSerializer(allow_null=True)


class OverheadPartitionSerializer(serializers.Serializer):
    partition = serializers.CharField()
    node_count = serializers.IntegerField()
    unit = CanonicalUnitSerializer()
    buckets = serializers.ListField(
        child=serializers.ListField(),
        help_text="[bucket start, bucket end, canonical unit-seconds of true overhead]",
    )
    histogram = serializers.DictField(
        child=serializers.IntegerField(), help_text="{units of true overhead: node-seconds}"
    )
    occupied_node_seconds = serializers.IntegerField()
    allocated = serializers.DictField(
        child=serializers.IntegerField(), help_text="core_seconds, memory_mb_seconds, gpu_seconds"
    )
    billable = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="what section 3.3 bills: capacity minus true overhead on occupied nodes",
    )
    fair_rates = FairRatesSerializer()


class OverheadOutputSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    cluster = serializers.CharField()
    window_start = UtcDateTimeField()
    window_end = UtcDateTimeField()
    step = serializers.CharField()
    finished_at = UtcDateTimeField()
    jobs_seen = serializers.IntegerField()
    jobs_unplaced = serializers.IntegerField()
    unplaced_sample = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="[job id, reason] of the first jobs that could not be placed on nodes",
    )
    partitions = OverheadPartitionSerializer(many=True)


def _rate(rate: Fraction | None) -> dict[str, Any] | None:
    if rate is None:
        return None
    return {"ratio": round(float(rate), 6), "exact": str(rate)}


def _partition(result: OverheadPartitionResult) -> dict[str, Any]:
    cores, memory, gpus = fair_rates(result)
    return {
        "partition": result.partition.name,
        "node_count": result.node_count,
        "unit": {
            "cores": result.unit_cores,
            "memory_mb": result.unit_memory_mb,
            "gpus": result.unit_gpus,
            "text": unit_label(result),
        },
        "buckets": result.buckets,
        "histogram": result.histogram,
        "occupied_node_seconds": result.occupied_node_seconds,
        "allocated": {
            "core_seconds": result.allocated_core_seconds,
            "memory_mb_seconds": result.allocated_memory_mb_seconds,
            "gpu_seconds": result.allocated_gpu_seconds,
        },
        "billable": {
            "core_seconds": result.billable_core_seconds,
            "memory_mb_seconds": result.billable_memory_mb_seconds,
            "gpu_seconds": result.billable_gpu_seconds,
        },
        "fair_rates": {"cores": _rate(cores), "memory": _rate(memory), "gpus": _rate(gpus)},
    }


def overhead_payload(run: OverheadRun) -> dict[str, Any]:
    return {
        "run": run.pk,
        "cluster": run.cluster.name,
        "window_start": run.window_start,
        "window_end": run.window_end,
        "step": run.step,
        "finished_at": run.finished_at,
        "jobs_seen": run.jobs_seen,
        "jobs_unplaced": run.jobs_unplaced,
        "unplaced_sample": run.unplaced_sample,
        "partitions": [_partition(result) for result in overhead_results(run=run)],
    }


class OverheadView(APIView):
    """Staff: true overhead in canonical units of a cluster's window, as last computed."""

    permission_classes = [StaffOnlyHidden]

    @extend_schema(
        tags=["utilisation"],
        parameters=[OverheadQuerySerializer],
        responses=OverheadOutputSerializer,
    )
    def get(self, request: Request) -> Response:
        """The newest done true-overhead run whose window covers ``[start, end)``: per
        partition the canonical unit, series, histogram and fair-billing rates. 404 when no
        run covers the window (compute it on the staff page first)."""
        query = OverheadQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        try:
            cluster = cluster_get(name=options["cluster"])
        except UnknownObject as error:
            raise ValidationError({"cluster": [str(error)]}) from None
        run = overhead_run_latest(cluster=cluster, start=options["start"], end=options["end"])
        if run is None:
            raise NotFound(
                f"no done true-overhead run of {cluster.name} covers that window; "
                "compute one on the staff page /accounting/overhead/"
            )
        return Response(OverheadOutputSerializer(overhead_payload(run)).data)

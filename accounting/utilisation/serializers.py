"""Input and output serializers of the utilisation API (accounting/utilisation/api.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounting.clusters.selectors import NotFound, cluster_get, partition_get
from kit.api import QuerySerializer, UtcDateTimeField


class _WallClockDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date or time; one without a zone stays naive, to be read on the cluster's
    clock (the view knows the cluster)."""

    def enforce_timezone(self, value: Any) -> Any:
        return value


class UtilisationQuerySerializer(QuerySerializer):
    cluster = serializers.CharField(max_length=64)
    partition = serializers.CharField(
        required=False, max_length=64, help_text="one partition (default: all, and their total)"
    )
    start = _WallClockDateTimeField(
        required=False,
        help_text="ISO 8601; without a zone, the cluster's wall clock; moved back to the hour "
        "(default: local midnight 30 days before the end)",
    )
    end = _WallClockDateTimeField(
        required=False,
        help_text="exclusive; moved forward to the hour (default: the end of the current hour)",
    )
    step = serializers.ChoiceField(
        choices=["hour", "day", "week", "month"], default="day",
        help_text="bucket size on the cluster's wall clock; weeks start on Monday",
    )  # fmt: skip
    format = serializers.ChoiceField(
        choices=["json", "csv"], required=False,
        help_text="csv: one row per bucket and partition, plus the total (or Accept: text/csv)",
    )  # fmt: skip

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            attrs["cluster_object"] = cluster_get(name=attrs["cluster"])
        except NotFound as error:
            raise serializers.ValidationError({"cluster": [str(error)]}) from None
        attrs["partition_object"] = None
        if attrs.get("partition"):
            try:
                attrs["partition_object"] = partition_get(
                    cluster=attrs["cluster_object"], name=attrs["partition"]
                )
            except NotFound as error:
                raise serializers.ValidationError({"partition": [str(error)]}) from None
        return attrs


class UtilisationFiguresSerializer(serializers.Serializer):
    """One bucket of one partition, or of the total (DESIGN section 4, eqs 9-12)."""

    q_percent = serializers.CharField(
        allow_null=True, help_text="Q(T) = Op_app / Op * 100 (eq 12), decimal string, 6 places"
    )
    core_percent = serializers.CharField(
        allow_null=True, help_text="allocated / available core-seconds * 100"
    )
    gpu_percent = serializers.CharField(
        allow_null=True, help_text="allocated / available GPU-seconds * 100; null without GPUs"
    )
    used_flop = serializers.CharField(help_text="Op_app(T), eqs 10-11: whole FLOP, a string")
    capacity_flop = serializers.CharField(help_text="Op(T) = integral of P_peak (eq 9)")
    core_seconds = serializers.IntegerField()
    available_core_seconds = serializers.IntegerField()
    gpu_seconds = serializers.IntegerField()
    available_gpu_seconds = serializers.IntegerField()


class UtilisationBucketSerializer(serializers.Serializer):
    start = UtcDateTimeField()
    end = UtcDateTimeField()
    total = UtilisationFiguresSerializer(help_text="the partitions shown, together")
    partitions = serializers.DictField(child=UtilisationFiguresSerializer(), help_text="by name")


class PeakInForceSerializer(serializers.Serializer):
    """A partition's hardware from ``effective_from`` on (a rate version)."""

    effective_from = UtcDateTimeField()
    node_count = serializers.IntegerField()
    peak_flops = serializers.CharField(help_text="P_peak = nodes * P_host (eqs 1-8), FLOP/s")
    # "formula" or "vendor" (plain strings: one choice set under two names confuses the schema)
    cpu_peak_source = serializers.CharField(
        help_text="formula (eq 3 from the parameters) or vendor (the vendor's peak FLOP/s)"
    )
    gpu_peak_source = serializers.CharField(
        allow_null=True, help_text="formula (eq 7) or vendor; null on nodes without GPUs"
    )


class UtilisationPartitionSerializer(serializers.Serializer):
    name = serializers.CharField()
    now = PeakInForceSerializer(allow_null=True, help_text="in force now; null: none yet")
    in_window = PeakInForceSerializer(
        many=True, help_text="in force at the start and from each change inside the window"
    )


class UtilisationOutputSerializer(serializers.Serializer):
    """Q(T) and core/GPU utilisation per bucket, per partition and in total."""

    cluster = serializers.CharField()
    partition = serializers.CharField(allow_null=True, help_text="null: every partition")
    timezone = serializers.CharField(help_text="the cluster's: buckets follow its wall clock")
    step = serializers.ChoiceField(choices=["hour", "day", "week", "month"])
    start = UtcDateTimeField()
    end = UtcDateTimeField()
    partitions = UtilisationPartitionSerializer(many=True)
    buckets = UtilisationBucketSerializer(many=True)

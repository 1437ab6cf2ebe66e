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
    shape = serializers.ChoiceField(
        choices=["columns", "buckets"], default="columns",
        help_text="JSON shape: columns (the bucket starts once, an array per figure and series; "
        "the default) or buckets (an object per bucket, the former default)",
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
    """Q(T) and core/GPU utilisation per bucket, per partition and in total (``shape=buckets``)."""

    shape = serializers.ChoiceField(choices=["buckets"])
    cluster = serializers.CharField()
    partition = serializers.CharField(allow_null=True, help_text="null: every partition")
    timezone = serializers.CharField(help_text="the cluster's: buckets follow its wall clock")
    step = serializers.ChoiceField(choices=["hour", "day", "week", "month"])
    start = UtcDateTimeField()
    end = UtcDateTimeField()
    partitions = UtilisationPartitionSerializer(many=True)
    buckets = UtilisationBucketSerializer(many=True)


class UtilisationColumnsSerializer(serializers.Serializer):
    """One series (a partition, or ``total``): an array per figure, a value per bucket."""

    q_percent = serializers.ListField(child=serializers.CharField(allow_null=True))
    core_percent = serializers.ListField(child=serializers.CharField(allow_null=True))
    gpu_percent = serializers.ListField(child=serializers.CharField(allow_null=True))
    used_flop = serializers.ListField(child=serializers.CharField())
    capacity_flop = serializers.ListField(child=serializers.CharField())
    core_seconds = serializers.ListField(child=serializers.IntegerField())
    available_core_seconds = serializers.ListField(child=serializers.IntegerField())
    gpu_seconds = serializers.ListField(child=serializers.IntegerField())
    available_gpu_seconds = serializers.ListField(child=serializers.IntegerField())


class UtilisationColumnsOutputSerializer(serializers.Serializer):
    """Q(T) and core/GPU utilisation as columns (``shape=columns``, the default): the buckets'
    starts once, then per partition and ``total`` an array per figure."""

    shape = serializers.ChoiceField(choices=["columns"])
    cluster = serializers.CharField()
    partition = serializers.CharField(allow_null=True, help_text="null: every partition")
    timezone = serializers.CharField(help_text="the cluster's: buckets follow its wall clock")
    step = serializers.ChoiceField(choices=["hour", "day", "week", "month"])
    start = UtcDateTimeField()
    end = UtcDateTimeField()
    partitions = UtilisationPartitionSerializer(many=True)
    starts = serializers.ListField(
        child=UtcDateTimeField(),
        help_text="each bucket's start; a bucket ends where the next starts, the last at end",
    )
    series = serializers.DictField(
        child=UtilisationColumnsSerializer(), help_text="by partition name, and 'total'"
    )

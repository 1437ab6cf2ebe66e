"""Input and output serializers of the clusters, partitions, quote and cost ratio API
(accounting/clusters/api.py, docs/api.md). They check the shape of a request; rules stay in
services.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounting.clusters.charging import MODELS
from accounting.clusters.explorer import DEFAULT_GRID_G_PER_KWH, FIELDS, NumberField
from accounting.clusters.hardware import HARDWARE, HARDWARE_BY_NAME, HardwareField
from accounting.clusters.quotes import weight_explanation
from accounting.clusters.selectors import NotFound, cluster_get, partition_get
from accounting.clusters.specs import SpecFileError, cluster_definition_parse
from accounting.clusters.units import parse_memory_mb
from accounting.models import (
    Cluster,
    Partition,
    PartitionVersion,
)
from kit.api import ApiModelSerializer, QuerySerializer, UtcDateTimeField, slug_of

SU_DIGITS = 24
SU_PLACES = 6

# A planned job asks for at most what a node of the registry can hold.
_MAX_GPUS = int(HARDWARE_BY_NAME["gpus"].maximum or 0)
_MAX_MEMORY_MB = int(HARDWARE_BY_NAME["memory_mb"].maximum or 0)


def su_field(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=SU_DIGITS, decimal_places=SU_PLACES, **kwargs)


class ClusterOutputSerializer(ApiModelSerializer):
    partitions = slug_of("name", many=True)

    class Meta:
        model = Cluster
        fields = [
            "name",
            "description",
            "timezone",
            "partitions",
            "imports_enabled",
            "import_interval_minutes",
            "import_overlap_minutes",
            "last_imported_until",
            "refund_node_failures",
            "grid_intensity_g_per_kwh",
            "created_at",
            "updated_at",
        ]


class CpuPeakSerializer(serializers.Serializer):
    n_stream = serializers.IntegerField(min_value=1, max_value=1024)
    n_unit = serializers.IntegerField(min_value=1, max_value=1024)
    frequency_hz = serializers.DecimalField(
        max_digits=26, decimal_places=3, min_value=Decimal(1), coerce_to_string=False
    )


class GpuPeakSerializer(serializers.Serializer):
    n_cuda = serializers.IntegerField(min_value=0, max_value=10**6)
    n_tensor = serializers.IntegerField(min_value=0, max_value=10**6, default=0)
    matrix_order = serializers.IntegerField(min_value=0, max_value=64, default=0)
    frequency_hz = serializers.DecimalField(
        max_digits=26, decimal_places=3, min_value=Decimal(1), coerce_to_string=False
    )


def _hardware_field(field: HardwareField) -> serializers.Field[Any, Any, Any, Any]:
    """The API's input field of one hardware figure: its bounds keep every derived value
    (eq 15's weight) inside its column."""
    if field.kind == "int":
        extra: dict[str, Any] = {"default": field.default} if field.default is not None else {}
        return serializers.IntegerField(
            min_value=int(field.minimum),
            max_value=None if field.maximum is None else int(field.maximum),
            required=field.required and not extra, help_text=field.help, **extra,
        )  # fmt: skip
    return serializers.DecimalField(
        max_digits=26, decimal_places=3, min_value=Decimal(field.minimum),
        max_value=None if field.maximum is None else Decimal(field.maximum),
        required=field.required, help_text=field.help,
    )  # fmt: skip


class PartitionSpecSerializer(serializers.Serializer):
    """One partition of a spec file (docs/cluster-specs.md)."""

    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    nodelist = serializers.CharField(max_length=4096, help_text="Slurm hostlist")
    # The hardware figures come from the registry (accounting/clusters/hardware.py), in its
    # order: adding one there adds it here.
    locals().update({field.name: _hardware_field(field) for field in HARDWARE})
    cpu_peak = CpuPeakSerializer(required=False)
    gpu_peak = GpuPeakSerializer(required=False)
    node_local = serializers.DictField(
        child=serializers.DecimalField(
            max_digits=20, decimal_places=6, min_value=Decimal("0.000001")
        ),
        required=False,
        help_text='capacity per node of further resources, e.g. {"nvme_gb": "3500"}',
    )
    weight_override = serializers.DecimalField(
        max_digits=20, decimal_places=6, min_value=Decimal("0.000001"), required=False
    )
    weight_override_reason = serializers.CharField(
        required=False, allow_blank=True, max_length=2000
    )

    def validate_node_local(self, value: dict[str, Decimal]) -> dict[str, Decimal]:
        for name in value:
            if not isinstance(name, str) or not name.isidentifier() or len(name) > 32:
                raise serializers.ValidationError(f"{name!r} is not a resource name")
        return value


def _plain(value: Any) -> Any:
    """Validated data back to the JSON values a spec file holds (decimals as strings)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Decimal):
        return str(value)
    return value


class ClusterApplyInputSerializer(serializers.Serializer):
    """A whole cluster spec file, applied as ``cluster_apply`` does (idempotent, versioned)."""

    name = serializers.SlugField(max_length=64)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    timezone = serializers.CharField(max_length=64, default="UTC")
    partitions = PartitionSpecSerializer(many=True, allow_empty=False)
    grid_intensity_g_per_kwh = serializers.DecimalField(
        required=False, max_digits=9, decimal_places=3, min_value=Decimal(0),
        max_value=Decimal(100_000),
        help_text="g CO2e per kWh of the cluster's grid where no uploaded series covers the time;"
        " absent: left as it is (docs/energy-and-carbon.md)",
    )  # fmt: skip
    effective_from = UtcDateTimeField(
        required=False, help_text="new versions start then (default: now)"
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")

    def validate_partitions(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(value) > 256:
            raise serializers.ValidationError("at most 256 partitions")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        document = {
            key: _plain(attrs[key])
            for key in ("name", "description", "timezone", "partitions", "grid_intensity_g_per_kwh")
            if key in attrs
        }
        try:
            attrs["definition"] = cluster_definition_parse(document, source="request")
        except SpecFileError as error:
            raise serializers.ValidationError(str(error)) from None
        return attrs


class PartitionApplyInputSerializer(PartitionSpecSerializer):
    """One partition's spec on an existing cluster: a new partition, or a new rate version
    when the spec differs from its newest one (nothing when it is the same)."""

    cluster = serializers.SlugField(max_length=64)
    effective_from = UtcDateTimeField(
        required=False, help_text="the new version starts then (default: now)"
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            cluster = cluster_get(name=attrs["cluster"])
        except NotFound as error:
            raise serializers.ValidationError({"cluster": [str(error)]}) from None
        partition = {
            key: _plain(value)
            for key, value in attrs.items()
            if key not in {"cluster", "effective_from", "note"}
        }
        document = {
            "name": cluster.name,
            "description": cluster.description,
            "timezone": cluster.timezone,
            "partitions": [partition],
        }
        try:
            attrs["definition"] = cluster_definition_parse(document, source="request")
        except SpecFileError as error:
            raise serializers.ValidationError(str(error)) from None
        attrs["cluster_object"] = cluster
        return attrs


class ClusterApplyOutputSerializer(serializers.Serializer):
    cluster = ClusterOutputSerializer()
    cluster_created = serializers.BooleanField()
    cluster_updated = serializers.BooleanField()
    created = serializers.ListField(child=serializers.CharField(), help_text="new partitions")
    versioned = serializers.ListField(
        child=serializers.CharField(), help_text="partitions that got a new rate version"
    )
    unchanged = serializers.ListField(child=serializers.CharField())
    not_in_file = serializers.ListField(
        child=serializers.CharField(), help_text="partitions kept although not in the request"
    )


class PartitionVersionOutputSerializer(ApiModelSerializer):
    weight = serializers.DecimalField(max_digits=20, decimal_places=6, read_only=True)
    cores_per_node = serializers.IntegerField(read_only=True)
    memory_per_core_mb = serializers.DecimalField(
        max_digits=30, decimal_places=6, read_only=True, help_text="M / C (eq 8)"
    )
    weight_explanation = serializers.SerializerMethodField()

    class Meta:
        model = PartitionVersion
        fields = [
            "number",
            "effective_from",
            "nodelist",
            "node_count",
            "sockets",
            "cores_per_socket",
            "cores_per_node",
            "memory_mb",
            "memory_per_core_mb",
            "gpus",
            "cpu_tdp_watts",
            "gpu_tdp_watts",
            "gpu_streaming_multiprocessors",
            "cpu_peak_flops",
            "gpu_peak_flops",
            "node_local",
            "derived_weight",
            "weight_override",
            "weight_override_reason",
            "weight",
            "weight_explanation",
            "change_note",
            "created_at",
        ]

    def get_weight_explanation(self, version: PartitionVersion) -> str:
        """Why the weight is what it is (eq 15 for GPUs, C for CPUs, or the override)."""
        return weight_explanation(version.spec)


class PartitionOutputSerializer(ApiModelSerializer):
    cluster = slug_of("name")
    current = serializers.SerializerMethodField(
        help_text="the newest rate version (it may start in the future)"
    )

    class Meta:
        model = Partition
        fields = ["id", "cluster", "name", "description", "current", "created_at"]

    def _newest(self, partition: Partition) -> PartitionVersion | None:
        versions = list(partition.versions.all())  # prefetched newest first
        return versions[0] if versions else None

    @extend_schema_field(PartitionVersionOutputSerializer(allow_null=True))
    def get_current(self, partition: Partition) -> dict[str, Any] | None:
        version = self._newest(partition)
        if version is None:
            return None
        version.partition = partition  # the spec names its partition; no extra query
        return dict(PartitionVersionOutputSerializer(version).data)


class PartitionDetailOutputSerializer(PartitionOutputSerializer):
    versions = PartitionVersionOutputSerializer(many=True, read_only=True)

    class Meta(PartitionOutputSerializer.Meta):
        fields = [*PartitionOutputSerializer.Meta.fields, "versions"]


class PlannedJobSerializer(serializers.Serializer):
    """A planned job as the ``quote`` command takes it; what is left out takes Slurm's
    shared-node defaults (a whole node, the GPUs' share of cores, the cores' share of memory)."""

    cluster = serializers.CharField(max_length=64)
    partition = serializers.CharField(max_length=64)
    nodes = serializers.IntegerField(min_value=1, max_value=10_000, default=1)
    hours = serializers.DecimalField(
        max_digits=16, decimal_places=6, min_value=Decimal("0.000001"), max_value=Decimal(10**6),
        help_text="wall-clock hours, e.g. 1.5",
    )  # fmt: skip
    cores_per_node = serializers.DecimalField(
        max_digits=16, decimal_places=6, min_value=Decimal(0), max_value=Decimal(10**6),
        required=False, allow_null=True, help_text="default: whole node, or the GPUs' share",
    )  # fmt: skip
    gpus_per_node = serializers.IntegerField(
        min_value=0, max_value=_MAX_GPUS, required=False, allow_null=True
    )
    memory_per_node = serializers.CharField(
        max_length=32, required=False, allow_null=True,
        help_text='Slurm units, e.g. "60G", "1914M" (default: the cores\' share)',
    )  # fmt: skip

    def validate_memory_per_node(self, value: str | None) -> Decimal | None:
        if value is None or value == "":
            return None
        try:
            memory = parse_memory_mb(value)
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from None
        if memory > _MAX_MEMORY_MB:
            raise serializers.ValidationError("more memory than any node has")
        return memory

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            cluster = cluster_get(name=attrs["cluster"])
        except NotFound as error:
            raise serializers.ValidationError({"cluster": [str(error)]}) from None
        try:
            attrs["partition_object"] = partition_get(cluster=cluster, name=attrs["partition"])
        except NotFound as error:
            raise serializers.ValidationError({"partition": [str(error)]}) from None
        return attrs


class QuoteInputSerializer(PlannedJobSerializer):
    """The ``quote`` command's options, with the same names."""

    model = serializers.ChoiceField(choices=sorted(MODELS), default="energy")
    at = UtcDateTimeField(required=False, help_text="price with the rates in effect then")


class QuoteNodeSerializer(serializers.Serializer):
    """Fractions of one node; node-local resources appear as further keys."""

    cores = serializers.CharField()
    memory = serializers.CharField()
    gpus = serializers.CharField()


class QuoteOutputSerializer(serializers.Serializer):
    """Exactly the object ``python manage.py quote ... --json`` prints."""

    cluster = serializers.CharField()
    partition = serializers.CharField()
    partition_version = serializers.IntegerField()
    model = serializers.CharField()
    service_units = serializers.CharField(help_text="decimal string")
    weight = serializers.CharField(help_text="SU per node-hour, decimal string")
    hours = serializers.CharField()
    dominant_resource = serializers.CharField(help_text="cores, memory or gpus")
    energy_wh = serializers.CharField()
    nodes = QuoteNodeSerializer(many=True)
    nodes_requested = serializers.IntegerField()


def explorer_decimal(field: NumberField, **options: Any) -> serializers.DecimalField:
    """A number of the explorer whose every error is ``field``'s sentence (label and range), the
    same words the page shows."""

    def in_range(value: Decimal) -> None:
        problem = field.problem(value)
        if problem:
            raise serializers.ValidationError(problem)

    return serializers.DecimalField(
        max_digits=len(str(int(field.high))) + field.decimal_places,
        decimal_places=field.decimal_places,
        validators=[in_range],
        error_messages={
            "invalid": field.number_message, "max_string_length": field.range_message,
            "max_digits": field.range_message, "max_whole_digits": field.range_message,
            "max_decimal_places": field.decimals_message,
        },
        **options,
    )  # fmt: skip


class CostRatioQuerySerializer(QuerySerializer):
    cluster = serializers.CharField(max_length=64)
    model = serializers.ChoiceField(choices=["all", "energy", "sm", "peak"], default="all")
    cpu_partition = serializers.CharField(
        required=False, max_length=64, help_text="default: the first partition without GPUs"
    )
    gpu_partition = serializers.CharField(
        required=False, max_length=64, help_text="default: the first partition with GPUs"
    )
    speedup = explorer_decimal(
        FIELDS["speedup"], required=False,
        help_text="my application: how many times faster one GPU node is than one CPU node",
    )  # fmt: skip
    cpu_node_hours = explorer_decimal(
        FIELDS["cpu_node_hours"], default=Decimal(1), help_text="my application on a CPU node"
    )
    gpu_node_hours = explorer_decimal(
        FIELDS["gpu_node_hours"], required=False,
        help_text="my application on a GPU node (instead of a speedup)",
    )  # fmt: skip
    grid_intensity = explorer_decimal(
        FIELDS["grid_intensity"], default=DEFAULT_GRID_G_PER_KWH, help_text="g CO2 per kWh"
    )


class NodeRunSerializer(serializers.Serializer):
    partition = serializers.CharField()
    node_hours = serializers.DecimalField(max_digits=None, decimal_places=None)
    service_units = serializers.DecimalField(max_digits=None, decimal_places=None)
    energy_wh = serializers.DecimalField(max_digits=None, decimal_places=None)
    co2_kg = serializers.DecimalField(max_digits=None, decimal_places=None)


class MyApplicationSerializer(serializers.Serializer):
    """The explorer's "my application": both runs, which is lower in SU and in energy ("same"
    when the figures as shown are equal), the pick and the sentence the page shows."""

    cpu = NodeRunSerializer()
    gpu = NodeRunSerializer()
    speedup = serializers.DecimalField(max_digits=None, decimal_places=None)
    fewer_su = serializers.ChoiceField(choices=["cpu", "gpu", "same"])
    less_energy = serializers.ChoiceField(choices=["cpu", "gpu", "same"])
    recommended = serializers.ChoiceField(choices=["cpu", "gpu", "same"])
    headline = serializers.CharField()
    sentence = serializers.CharField()


class CostRatioRowSerializer(serializers.Serializer):
    application = serializers.CharField()
    perf_ratio = serializers.FloatField()
    cpu_charge = serializers.FloatField()
    gpu_charge = serializers.FloatField()
    cost_ratio = serializers.FloatField()


class CostRatioTableSerializer(serializers.Serializer):
    cpu_node_weight = serializers.FloatField()
    gpu_node_weight = serializers.FloatField()
    gpu_node_weight_exact = serializers.CharField()
    switch_speedup = serializers.FloatField()
    rows = CostRatioRowSerializer(many=True)


class Figure1PointSerializer(serializers.Serializer):
    speedup = serializers.IntegerField()
    energy_wh = serializers.DictField(child=serializers.FloatField())


class BenchmarkOutputSerializer(serializers.Serializer):
    """An application of the tables and the CPU and GPU node its ratio was measured on."""

    application = serializers.CharField()
    perf_ratio = serializers.FloatField(help_text="CPU nodes that match one GPU node")
    cpu = serializers.CharField(help_text="the CPU node measured on; empty when not stated")
    gpu = serializers.CharField(help_text="the GPU node measured on; empty when not stated")
    source = serializers.CharField()  # type: ignore[assignment]  # a JSON key; DRF pops fields
    source_url = serializers.CharField()


class CostRatioOutputSerializer(serializers.Serializer):
    """``cost_ratio --json`` (Tables II-IV, Figure 1) and the partitions compared."""

    cluster = serializers.CharField()
    cpu_partition = serializers.CharField()
    gpu_partition = serializers.CharField()
    models = serializers.DictField(child=CostRatioTableSerializer())
    energy_optimal_switch_speedup = serializers.FloatField()
    figure1 = Figure1PointSerializer(many=True)
    benchmarks = BenchmarkOutputSerializer(many=True)
    unavailable_models = serializers.DictField(
        child=serializers.CharField(), help_text="models that cannot price the pair, and why"
    )
    my_application = MyApplicationSerializer(
        required=False, help_text="with speedup or gpu_node_hours only"
    )


class MessageOutputSerializer(serializers.Serializer):
    message = serializers.CharField()

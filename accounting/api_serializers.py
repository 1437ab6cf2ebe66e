"""Input and output serializers of the accounting API (accounting/api.py, docs/api.md).

Input serializers parse and check the shape of a request; the rules themselves stay in the
services and pure modules (spec files are validated by ``cluster_definition_parse``, quotes by
the quote engine), so the API and the commands refuse the same things with the same words.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.utils.datastructures import MultiValueDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounting.charging import MODELS, SU_QUANTUM
from accounting.costmodels import job_cost_as_dict
from accounting.costs import cost_model_of, job_cost_get
from accounting.forms import SacctUploadForm
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
    QuarantinedRecord,
)
from accounting.overhead import job_fair_share_get
from accounting.quotes import weight_explanation
from accounting.sacct import parse_memory_mb
from accounting.selectors import NotFound, cluster_get, partition_get
from accounting.specs import SpecFileError, cluster_definition_parse
from portal.api import ApiModelSerializer, UtcDateTimeField, slug_of

SU_DIGITS = 24
SU_PLACES = 6

# Sanity bounds of hardware in a spec sent over the API: generous for any real machine, and
# small enough that every derived value (eq 15's weight) fits its column.
_MAX_SOCKETS = 16
_MAX_CORES_PER_SOCKET = 4096
_MAX_GPUS = 1024
_MAX_MEMORY_MB = 2**40
_MAX_WATTS = Decimal(100_000)


def _su_field(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=SU_DIGITS, decimal_places=SU_PLACES, **kwargs)


# --- Clusters and partitions ----------------------------------------------------------------


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


class PartitionSpecSerializer(serializers.Serializer):
    """One partition of a spec file (docs/cluster-specs.md)."""

    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    nodelist = serializers.CharField(max_length=4096, help_text="Slurm hostlist")
    sockets = serializers.IntegerField(min_value=1, max_value=_MAX_SOCKETS)
    cores_per_socket = serializers.IntegerField(min_value=1, max_value=_MAX_CORES_PER_SOCKET)
    memory_mb = serializers.IntegerField(min_value=1, max_value=_MAX_MEMORY_MB)
    gpus = serializers.IntegerField(min_value=0, max_value=_MAX_GPUS, default=0)
    cpu_tdp_watts = serializers.DecimalField(
        max_digits=10, decimal_places=3, min_value=Decimal(1), max_value=_MAX_WATTS
    )
    gpu_tdp_watts = serializers.DecimalField(
        max_digits=10, decimal_places=3, min_value=Decimal(1), max_value=_MAX_WATTS,
        required=False,
    )  # fmt: skip
    gpu_streaming_multiprocessors = serializers.IntegerField(
        min_value=0, max_value=10**6, required=False
    )
    cpu_peak_flops = serializers.DecimalField(
        max_digits=26, decimal_places=3, min_value=Decimal(1), required=False
    )
    gpu_peak_flops = serializers.DecimalField(
        max_digits=26, decimal_places=3, min_value=Decimal(1), required=False
    )
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
            for key in ("name", "description", "timezone", "partitions")
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


# --- Jobs -----------------------------------------------------------------------------------


_FRACTION = {"type": "string", "description": "a decimal fraction of the node"}


@extend_schema_field(
    {
        "type": "array",
        "description": (
            "Per-node fractions of cores, memory and GPUs (node-local resources as further "
            "keys); identical consecutive nodes are folded into one entry, `nodes` counts them."
        ),
        "items": {
            "type": "object",
            "properties": {
                "nodes": {"type": "string"}, "cores": _FRACTION, "memory": _FRACTION,
                "gpus": _FRACTION,
            },
            "additionalProperties": {"type": "string"},
        },
    }
)  # fmt: skip
class NodeFractionsField(serializers.JSONField):
    """The ledger's per-node fractions, as stored."""


class JobOutputSerializer(ApiModelSerializer):
    cluster = slug_of("name")
    project = slug_of("code")
    user = serializers.CharField(source="username", read_only=True, help_text="the Slurm user")
    partition = slug_of("name")
    partition_version = slug_of(
        "number", allow_null=True, help_text="the number of the rate version the charge used"
    )
    node_fractions = NodeFractionsField(read_only=True)
    cost_model_version = slug_of(
        "number", allow_null=True, help_text="the number of the cost model version priced with"
    )
    currency = slug_of(
        "currency", source="cost_model_version", allow_null=True,
        help_text="of cost; null when the job has no money cost",
    )  # fmt: skip

    class Meta:
        model = Job
        fields = [
            "id",
            "cluster",
            "job_id",
            "job_id_raw",
            "run",
            "job_name",
            "array_job_id",
            "array_task_id",
            "het_job_id",
            "het_offset",
            "project",
            "user",
            "partition",
            "qos",
            "state",
            "state_raw",
            "exit_code",
            "submit",
            "start",
            "end",
            "elapsed_seconds",
            "timelimit_minutes",
            "nnodes",
            "cpus",
            "memory_mb",
            "gpus",
            "charge_state",
            "service_units",
            "pending_service_units",
            "weight",
            "dominant_resource",
            "node_fractions",
            "partition_version",
            "energy_wh",
            "charged_at",
            "cost",
            "currency",
            "cost_model_version",
        ]
        extra_kwargs = {
            "cost": {
                "help_text": "money cost under the cluster's cost model in force at the job's "
                "end (docs/costs.md); null: not finished, or the cluster has no model"
            }
        }


class JobDetailOutputSerializer(JobOutputSerializer):
    weight_explanation = serializers.SerializerMethodField()
    cost_breakdown = serializers.SerializerMethodField()
    fair_share = serializers.SerializerMethodField()

    class Meta(JobOutputSerializer.Meta):
        fields = [
            *JobOutputSerializer.Meta.fields,
            "nodelist",
            "billing",
            "consumed_energy_joules",
            "weight_explanation",
            "cost_breakdown",
            "fair_share",
        ]

    def get_weight_explanation(self, job: Job) -> str | None:
        """Why the job's weight is what it is (from the rate version it was charged with)."""
        if job.partition_version is None:
            return None
        return weight_explanation(job.partition_version.spec)

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "description": (
                "The money cost by node set and rate (jobcost --json): currency, nodes, "
                "runtime_seconds, energy_joules, node_sets [{name, nodes, rates [{name, kind, "
                "cost}], total}], unknown_nodes, missing_data, total. An energy rate's cost is "
                "null when Slurm recorded no energy."
            ),
        }
    )
    def get_cost_breakdown(self, job: Job) -> dict[str, Any] | None:
        """The job cost meter's JSON under the version the job was priced with."""
        version = job.cost_model_version
        if job.cost is None or version is None:
            return None
        return job_cost_as_dict(job_cost_get(model=cost_model_of(version), job=job))

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "description": (
                "Section 3.3's fair billing beside the SU (docs/utilisation.md), summed over "
                "the true-overhead runs it comes from: runs [{run, window_start, window_end}] "
                "(the newest run covering the job, else the newest with disjoint windows), "
                "covers_job (false: they hold only part of the job), resources "
                "[{name, unit, allocated, billed (decimal strings, hours), factor (billed / "
                "allocated, 6 places, or null)}]. Null when no run holds the job."
            ),
        }
    )
    def get_fair_share(self, job: Job) -> dict[str, Any] | None:
        """What fair billing would charge the job, for comparison with its SU."""
        view = job_fair_share_get(job=job)
        if view is None:
            return None
        when = UtcDateTimeField()
        return {
            "runs": [
                {
                    "run": run.pk,
                    "window_start": when.to_representation(run.window_start),
                    "window_end": when.to_representation(run.window_end),
                }
                for run in view.runs
            ],
            "covers_job": view.covers_job,
            "resources": [
                {
                    "name": resource.name,
                    "unit": resource.unit,
                    "allocated": f"{resource.allocated.quantize(SU_QUANTUM)}",
                    "billed": f"{resource.billed.quantize(SU_QUANTUM)}",
                    "factor": None
                    if resource.factor is None
                    else f"{Decimal(resource.factor.numerator) / resource.factor.denominator:.6f}",
                }
                for resource in view.resources
            ],
        }


# --- Usage ----------------------------------------------------------------------------------

GRANULARITIES = ("day", "week", "month", "total")
GROUPINGS = ("project", "user", "partition")


class UsageQuerySerializer(serializers.Serializer):
    project = serializers.CharField(required=False, max_length=64, help_text="project code")
    pool = serializers.CharField(required=False, max_length=100, help_text="resource pool name")
    cluster = serializers.CharField(required=False, max_length=64)
    partition = serializers.CharField(required=False, max_length=64, help_text="partition name")
    user = serializers.CharField(required=False, max_length=64, help_text="Slurm user")
    start = serializers.DateField(required=False, help_text="first day (inclusive)")
    end = serializers.DateField(required=False, help_text="day after the last day (exclusive)")
    granularity = serializers.ChoiceField(
        choices=GRANULARITIES, default="day", help_text="day, ISO week (Monday), month or total"
    )
    group_by = serializers.MultipleChoiceField(
        choices=GROUPINGS, required=False, help_text="repeat for several: project, user, partition"
    )


class UsageRowSerializer(serializers.Serializer):
    """Daily roll-ups summed over a day, week, month or the whole range; the grouping keys that
    were not asked for are null."""

    period = serializers.DateField(allow_null=True, help_text="first day of the day/week/month")
    project = serializers.CharField(allow_null=True)
    user = serializers.CharField(allow_null=True)
    cluster = serializers.CharField(allow_null=True)
    partition = serializers.CharField(allow_null=True)
    service_units = _su_field()
    core_hours = _su_field()
    gpu_hours = _su_field()
    energy_wh = _su_field()
    cost = _su_field(
        help_text="money cost (sum of the jobs' costs under their clusters' cost models); null "
        "when the row sums clusters billing in different currencies (group by partition)",
        allow_null=True,
    )
    currency = serializers.CharField(
        allow_null=True, help_text="the cost's currency (null without a cost model)"
    )
    jobs = serializers.IntegerField()


# --- Quote ----------------------------------------------------------------------------------


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


# --- Cost ratio -----------------------------------------------------------------------------


class CostRatioQuerySerializer(serializers.Serializer):
    cluster = serializers.CharField(max_length=64)
    model = serializers.ChoiceField(choices=["all", "energy", "sm", "peak"], default="all")
    cpu_partition = serializers.CharField(
        required=False, max_length=64, help_text="default: the first partition without GPUs"
    )
    gpu_partition = serializers.CharField(
        required=False, max_length=64, help_text="default: the first partition with GPUs"
    )


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


class CostRatioOutputSerializer(serializers.Serializer):
    """``cost_ratio --json`` (Tables II-IV, Figure 1) and the partitions compared."""

    cluster = serializers.CharField()
    cpu_partition = serializers.CharField()
    gpu_partition = serializers.CharField()
    models = serializers.DictField(child=CostRatioTableSerializer())
    energy_optimal_switch_speedup = serializers.FloatField()
    figure1 = Figure1PointSerializer(many=True)


# --- Imports and quarantine -----------------------------------------------------------------


class ImportRunOutputSerializer(ApiModelSerializer):
    cluster = slug_of("name")
    started_by = slug_of("username", allow_null=True)

    class Meta:
        model = ImportRun
        fields = [
            "id",
            "cluster",
            "source",
            "status",
            "started_at",
            "finished_at",
            "started_by",
            "window_start",
            "window_end",
            "lines",
            "steps_skipped",
            "imported",
            "updated",
            "charged",
            "pending",
            "quarantined",
            "error",
        ]


class ImportUploadInputSerializer(serializers.Serializer):
    """A sacct --parsable2 file with its header line, imported in the background."""

    cluster = serializers.SlugField(max_length=64)
    file = serializers.FileField()
    create_projects = serializers.BooleanField(
        default=False, help_text="create missing projects from accounts instead of quarantining"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            cluster = cluster_get(name=attrs["cluster"])
        except NotFound as error:
            raise serializers.ValidationError({"cluster": [str(error)]}) from None
        upload: UploadedFile = attrs["file"]
        # The upload page's form holds the rules (size, a sacct header): one place for them.
        form = SacctUploadForm(
            data={"cluster": cluster.pk, "create_projects": attrs["create_projects"]},
            files=MultiValueDict({"file": [upload]}),
        )
        if not form.is_valid():
            raise serializers.ValidationError(
                {field: [str(error) for error in errors] for field, errors in form.errors.items()}
            )
        attrs["cluster_object"] = cluster
        return attrs


class QuarantinedLineOutputSerializer(ApiModelSerializer):
    cluster = slug_of("name")

    class Meta:
        model = QuarantinedRecord
        fields = [
            "id",
            "cluster",
            "import_run",
            "source",
            "line_number",
            "raw",
            "reason",
            "field",
            "job_id_raw",
            "account",
            "partition_name",
            "created_at",
            "resolved_at",
            "resolution",
        ]


class QuarantineRetryInputSerializer(serializers.Serializer):
    cluster = serializers.SlugField(max_length=64)

    def validate_cluster(self, value: str) -> Cluster:
        try:
            return cluster_get(name=value)
        except NotFound as error:
            raise serializers.ValidationError(str(error)) from None


class MessageOutputSerializer(serializers.Serializer):
    message = serializers.CharField()


# --- Utilisation Q(T) -----------------------------------------------------------------------


class _WallClockDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date or time; one without a zone stays naive, to be read on the cluster's
    clock (the view knows the cluster)."""

    def enforce_timezone(self, value: Any) -> Any:
        return value


class UtilisationQuerySerializer(serializers.Serializer):
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

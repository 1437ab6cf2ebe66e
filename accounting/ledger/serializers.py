"""Input and output serializers of the ledger API (accounting/ledger/api.py, docs/api.md)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.utils.datastructures import MultiValueDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounting.carbon.selectors import JobFootprint, job_footprint_get
from accounting.clusters.charging import SU_QUANTUM
from accounting.clusters.efficiency import job_efficiency
from accounting.clusters.quotes import weight_explanation
from accounting.clusters.selectors import NotFound, cluster_get
from accounting.clusters.serializers import su_field
from accounting.costs.costmodels import job_cost_as_dict
from accounting.costs.services import cost_model_of, job_cost_get
from accounting.ledger.forms import SacctUploadForm
from accounting.ledger.pipeline import BUCKETS
from accounting.ledger.selectors import (
    JOB_FRACTION_COLUMNS,
    job_node_fractions,
    job_node_fractions_of_row,
)
from accounting.ledger.usage import held_of, usage_of
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    QuarantinedRecord,
)
from accounting.utilisation.overhead import job_fair_share_get
from kit.api import ApiModelSerializer, QuerySerializer, RowField, UtcDateTimeField, slug_of

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
class NodeFractionsField(RowField):
    """The job's per-node fractions, derived from its shape (``job_node_fractions``)."""

    row_columns = JOB_FRACTION_COLUMNS

    def to_representation(self, value: Job) -> list[dict[str, str]]:
        return job_node_fractions(value)

    def from_row(self, row: dict[str, Any]) -> list[dict[str, str]]:
        return job_node_fractions_of_row(row)


class JobOutputSerializer(ApiModelSerializer):
    cluster = slug_of("name")
    project = slug_of("code")
    user = serializers.CharField(source="username", read_only=True, help_text="the Slurm user")
    partition = slug_of("name")
    partition_version = slug_of(
        "number", allow_null=True, help_text="the number of the rate version the charge used"
    )
    node_fractions = NodeFractionsField()
    warnings = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="bad optional sacct values left out of the record, and why (never charged)",
    )
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
            "warnings",
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
    energy = serializers.SerializerMethodField()
    co2e_g = serializers.SerializerMethodField()

    class Meta(JobOutputSerializer.Meta):
        fields = [
            *JobOutputSerializer.Meta.fields,
            "nodelist",
            "billing",
            "consumed_energy_joules",
            "weight_explanation",
            "cost_breakdown",
            "fair_share",
            "energy",
            "co2e_g",
        ]

    def _footprint(self, job: Job) -> JobFootprint:
        # Both fields come from one read of the intensity.
        cached = getattr(self, "_footprint_of", None)
        if cached is None or cached[0] != job.pk:
            cached = (job.pk, job_footprint_get(job=job))
            self._footprint_of = cached
        return cached[1]

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                "wh": {"type": "string", "format": "decimal", "description": "watt-hours"},
                "source": {
                    "type": "string",
                    "enum": ["measured", "estimated"],
                    "description": "measured: Slurm's ConsumedEnergyRaw; estimated: the charging"
                    " engine's estimate from the hardware's TDP (eq 29), where Slurm measured"
                    " nothing",
                },
            },
            "required": ["wh", "source"],
        }
    )
    def get_energy(self, job: Job) -> dict[str, str]:
        """The job's best energy: measured where Slurm has it, else the engine's estimate."""
        energy = self._footprint(job).energy
        return {"wh": f"{energy.wh.quantize(SU_QUANTUM)}", "source": energy.source}

    @extend_schema_field(
        serializers.DecimalField(
            max_digits=24, decimal_places=3, allow_null=True,
            help_text="grams of CO2e: energy.wh over the hours the job ran, each hour at the "
            "cluster's grid intensity in it / 1000 (docs/energy-and-carbon.md); null when an "
            "hour of the run has no intensity",
        )
    )  # fmt: skip
    def get_co2e_g(self, job: Job) -> str | None:
        grams = self._footprint(job).co2e_g
        return None if grams is None else f"{grams:.3f}"

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
                "cost}], total}], unknown_nodes, missing_data, nodes_are (exclusive: whole nodes; "
                "shared: time rates times node_share), node_share (the part of each node paid "
                'for, an exact fraction as text: "1/8", "1"), total. An energy rate\'s cost '
                "is null when Slurm recorded no energy."
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


GRANULARITIES = ("day", "week", "month", "total")
GROUPINGS = ("project", "user", "partition")


class UsageQuerySerializer(QuerySerializer):
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
    service_units = su_field()
    core_hours = su_field()
    gpu_hours = su_field()
    energy_wh = su_field()
    cost = su_field(
        help_text="money cost (sum of the jobs' costs under their clusters' cost models); null "
        "when the row sums clusters billing in different currencies (group by partition)",
        allow_null=True,
    )
    currency = serializers.CharField(
        allow_null=True, help_text="the cost's currency (null without a cost model)"
    )
    jobs = serializers.IntegerField()


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
            "checksum",
            "lines",
            *BUCKETS,  # the import's own list: a new bucket is in the API at once
            "error",
            "heartbeat_at",
            "attempts",
            "interruptions",
        ]


class ImportUploadInputSerializer(serializers.Serializer):
    """A sacct --parsable2 file with its header line (or a --noheader one with its columns),
    or sacct --json output, imported in the background."""

    cluster = serializers.SlugField(max_length=64)
    file = serializers.FileField()
    create_projects = serializers.BooleanField(
        default=False, help_text="create missing projects from accounts instead of quarantining"
    )
    columns = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=2000,
        help_text="for a --noheader dump: the columns it was made with",
    )
    delimiter = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=8,
        trim_whitespace=False,
        help_text="for a --noheader dump made with sacct --delimiter (default |)",
    )
    import_again = serializers.BooleanField(
        default=False, help_text="import content that was imported before, on purpose"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            cluster = cluster_get(name=attrs["cluster"])
        except NotFound as error:
            raise serializers.ValidationError({"cluster": [str(error)]}) from None
        upload: UploadedFile = attrs["file"]
        # The upload page's form holds the rules (size, a sacct header): one place for them.
        form = SacctUploadForm(
            data={
                "cluster": cluster.pk,
                "create_projects": attrs["create_projects"],
                "columns": attrs["columns"],
                "delimiter": attrs["delimiter"],
                "import_again": attrs["import_again"],
            },
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


# --- Efficiency (docs/efficiency.md) ---------------------------------------------------------


def ratio_field(**kwargs: Any) -> serializers.DecimalField:
    """A ratio of used to held, 0 to 1, as a decimal string; null: not measured."""
    return serializers.DecimalField(
        max_digits=5, decimal_places=4, min_value=Decimal(0), max_value=Decimal(1),
        allow_null=True, **kwargs,
    )  # fmt: skip


class EfficiencyRatiosSerializer(serializers.Serializer):
    """What share of what it held a job, or a group of jobs, used; null: not measured."""

    cpu = ratio_field(help_text="CPU time / (elapsed x cores held)")
    memory = ratio_field(help_text="peak memory / memory held")
    gpu = ratio_field(help_text="mean GPU utilisation; null without GPUs or a measurement")
    walltime = ratio_field(help_text="elapsed / time limit")


class JobEfficiencyOutputSerializer(JobDetailOutputSerializer):
    """A job with its charge breakdown and, from what Slurm measured, its efficiency."""

    efficiency = serializers.SerializerMethodField()
    right_sized_service_units = su_field(
        read_only=True, allow_null=True,
        help_text="SU of a request sized to what the job used (docs/efficiency.md); "
        "null without usage data",
    )  # fmt: skip

    class Meta(JobDetailOutputSerializer.Meta):
        fields = [*JobDetailOutputSerializer.Meta.fields, "efficiency", "right_sized_service_units"]

    @extend_schema_field(EfficiencyRatiosSerializer)
    def get_efficiency(self, job: Job) -> dict[str, Any]:
        """Ratios of used to held; every one null for a job without usage data."""
        ratios = job_efficiency(held_of(job.__dict__), usage_of(job.__dict__))
        return dict(EfficiencyRatiosSerializer(ratios).data)


class EfficiencyQuerySerializer(QuerySerializer):
    project = serializers.CharField(required=False, max_length=64, help_text="project code")
    user = serializers.CharField(required=False, max_length=64, help_text="Slurm user")
    partition = serializers.CharField(required=False, max_length=64, help_text="partition name")
    start = serializers.DateField(required=False, help_text="first day (inclusive)")
    end = serializers.DateField(required=False, help_text="day after the last day (exclusive)")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("start"), attrs.get("end")
        if start and end and end <= start:
            raise serializers.ValidationError({"end": ["must be after start"]})
        return attrs


class EfficiencyTotalsSerializer(EfficiencyRatiosSerializer):
    """Sums of the efficiency roll-ups of a group of jobs and the ratios made of them."""

    jobs = serializers.IntegerField(help_text="charged jobs, with usage data or not")
    measured_jobs = serializers.IntegerField(help_text="jobs with usage data: the ratios' jobs")
    unmeasured_jobs = serializers.IntegerField(help_text="jobs without usage data: in no ratio")
    charged_service_units = su_field(help_text="SU charged for every job, measured or not")
    service_units = su_field(help_text="SU charged for the measured jobs")
    right_sized_service_units = su_field(help_text="SU of right-sized requests for them")
    su_left_on_the_table = su_field(help_text="service_units - right_sized_service_units")
    core_hours_held = su_field()
    core_hours_used = su_field()
    memory_mb_hours_held = serializers.DecimalField(
        max_digits=28, decimal_places=6, help_text="of the jobs whose memory peak was measured"
    )
    memory_mb_hours_used = serializers.DecimalField(max_digits=28, decimal_places=6)
    gpu_hours_held = su_field(help_text="of the jobs whose GPU utilisation was measured")
    gpu_hours_used = su_field()
    hours_run = su_field(help_text="of the jobs with a time limit")
    hours_asked = su_field()


class EfficiencyMonthSerializer(EfficiencyTotalsSerializer):
    """One month's totals (an :class:`EfficiencyRow` keyed by the month's first day)."""

    month = serializers.DateField(help_text="first day of the month")

    def to_representation(self, instance: Any) -> Any:
        # This serializer's own fields (made once for all the months of a list, where a
        # serializer per month deep-copied its twenty fields each time).
        return super().to_representation(_MonthTotals(instance))


class _MonthTotals:
    """An EfficiencyRow read as its totals with a ``month``."""

    def __init__(self, row: Any) -> None:
        self.month = row.key
        self._totals = row.totals

    def __getattr__(self, name: str) -> Any:
        return getattr(self._totals, name)


def _distribution() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(min_value=0), min_length=10, max_length=10,
        help_text="measured jobs per tenth: under 10 %, 10-20 %, ..., 90-100 %",
    )  # fmt: skip


class EfficiencyDistributionsSerializer(serializers.Serializer):
    cpu = _distribution()
    memory = _distribution()
    gpu = _distribution()
    walltime = _distribution()


class EfficiencyOutputSerializer(serializers.Serializer):
    summary = EfficiencyTotalsSerializer()
    months = EfficiencyMonthSerializer(many=True)
    distributions = EfficiencyDistributionsSerializer(
        help_text="whole months that overlap [start, end): the buckets are kept per month"
    )

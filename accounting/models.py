"""Clusters, partitions and the versioned hardware specs (rate versions) that charging uses."""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import models
from django.db.models import F, Q, Value

from accounting.clusters import charging
from accounting.clusters.hardware import HARDWARE_NAMES

# Steps included (no --allocations): the peaks of what jobs used are on their steps' lines
# (docs/efficiency.md). A cluster configured with --allocations gets CPU efficiency only.
DEFAULT_SACCT_ARGUMENTS = "--allusers --parsable2 --duplicates"

# FLOP/s and frequencies are large whole numbers: 30 digits hold exa-scale with room to spare.


class Cluster(models.Model):
    """A Slurm cluster (one sacct source, one time zone)."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    slurm_cluster_name = models.CharField(
        max_length=64,
        blank=True,
        help_text="Slurm's ClusterName, when it differs from the portal's name: selects the rows"
        " of sacct/sacctmgr output and is passed as -M",
    )
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="Time zone sacct prints its times in."
    )
    sacct_command = models.CharField(
        max_length=500, default="sacct", help_text="Path of sacct on the host that runs imports"
    )
    sacct_arguments = models.CharField(
        max_length=1000,
        default=DEFAULT_SACCT_ARGUMENTS,
        help_text="Arguments before --starttime/--endtime/--format, which the importer adds",
    )
    slurmrestd_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="Read jobs from this slurmrestd (e.g. http://slurm-head:6820) instead of"
        " running sacct on this host; empty: sacct",
    )
    slurmrestd_api = models.CharField(
        max_length=16,
        default="v0.0.38",
        help_text="slurmrestd's slurmdb API version: v0.0.38 (Slurm 22.05) to v0.0.43 (25.05)",
    )
    slurmrestd_user = models.CharField(
        max_length=64, default="root", help_text="X-SLURM-USER-NAME: whom the token was made for"
    )
    slurmrestd_token_file = models.CharField(
        max_length=500,
        blank=True,
        help_text="File holding the JWT (scontrol token's output), renewed by the site; never the"
        " token itself in the database",
    )
    import_interval_minutes = models.PositiveIntegerField(
        default=15, help_text="How often beat runs the sacct import of this cluster"
    )
    import_overlap_minutes = models.PositiveIntegerField(
        default=60, help_text="Each window starts this long before the previous one ended"
    )
    imports_enabled = models.BooleanField(
        default=False, help_text="Run sacct on this host on the beat schedule"
    )
    last_imported_until = models.DateTimeField(null=True, blank=True)
    refund_node_failures = models.BooleanField(
        default=True, help_text="Policy: jobs ended by NODE_FAIL are not charged"
    )
    enforcement_enabled = models.BooleanField(
        default=False,
        help_text="Run the pools' Slurm commands (sacctmgr) on this host; off: only list them",
    )
    grid_intensity_g_per_kwh = models.DecimalField(
        null=True,
        blank=True,
        max_digits=9,
        decimal_places=3,
        help_text="Grams of CO2e per kWh of the grid that powers the cluster, when no uploaded"
        " time series covers the time; empty: not set (no CO2e is shown)",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(grid_intensity_g_per_kwh__gte=0),
                name="cluster_grid_intensity_not_negative",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def zoneinfo(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def slurm_name(self) -> str:
        """The name Slurm knows this cluster by (``ClusterName`` in slurm.conf)."""
        return self.slurm_cluster_name or self.name


class GridIntensity(models.Model):
    """A step of a cluster's grid carbon intensity: ``g_per_kwh`` from ``starts_at`` until the
    next step (docs/energy-and-carbon.md). Uploaded as CSV by staff."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="grid_intensity")
    starts_at = models.DateTimeField()
    g_per_kwh = models.DecimalField(max_digits=9, decimal_places=3)

    class Meta:
        ordering = ["cluster", "starts_at"]
        verbose_name_plural = "grid intensities"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "starts_at"], name="grid_intensity_unique_start"
            ),
            models.CheckConstraint(
                condition=Q(g_per_kwh__gte=0), name="grid_intensity_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} {self.starts_at.isoformat()} {self.g_per_kwh} g/kWh"


class Partition(models.Model):
    """A Slurm partition: identical nodes. Its hardware lives in ``PartitionVersion`` rows."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="partitions")
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    # The canonical unit of true overhead (DESIGN.md section 5); blank means the paper's
    # default: 1 GPU on GPU nodes, 1 core + 2 GB on CPU nodes.
    canonical_cores = models.PositiveIntegerField(
        null=True, blank=True, help_text="Cores in one canonical unit (blank: the default)"
    )
    canonical_memory_mb = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="MiB in one canonical unit (blank: the default)"
    )
    canonical_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs in one canonical unit (blank: the default)"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"], name="partition_unique_per_cluster"
            ),
            # A threshold of 0 would make every node hold infinitely many canonical units.
            models.CheckConstraint(
                condition=(Q(canonical_cores__isnull=True) | Q(canonical_cores__gte=1))
                & (Q(canonical_memory_mb__isnull=True) | Q(canonical_memory_mb__gte=1))
                & (Q(canonical_gpus__isnull=True) | Q(canonical_gpus__gte=1)),
                name="partition_canonical_unit_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"


class PartitionVersion(models.Model):
    """The specification of a partition from ``effective_from`` on: a rate version.

    Rows are never edited: a change to anything that affects charging (or the node list)
    adds a version, and every charge records the version it used, so history is never
    rewritten. Derived values (C, weight, node count) are computed, never typed.
    """

    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField(help_text="1, 2, ... per partition")
    effective_from = models.DateTimeField()
    nodelist = models.CharField(max_length=4096, help_text="Slurm hostlist, e.g. nid[1001-1004]")
    node_count = models.PositiveIntegerField(help_text="Derived from the node list")
    sockets = models.PositiveSmallIntegerField()
    cores_per_socket = models.PositiveIntegerField()
    memory_mb = models.PositiveBigIntegerField(help_text="Memory per node in MiB (Slurm MB)")
    gpus = models.PositiveSmallIntegerField(default=0, help_text="GPUs per node")
    cpu_tdp_watts = models.DecimalField(
        help_text="TDP per CPU socket", max_digits=10, decimal_places=3
    )
    gpu_tdp_watts = models.DecimalField(
        default=Decimal(0), help_text="TDP per GPU", max_digits=10, decimal_places=3
    )
    gpu_streaming_multiprocessors = models.PositiveIntegerField(default=0)
    cpu_peak_flops = models.DecimalField(null=True, blank=True, max_digits=30, decimal_places=3)
    gpu_peak_flops = models.DecimalField(null=True, blank=True, max_digits=30, decimal_places=3)
    cpu_peak_n_stream = models.PositiveIntegerField(null=True, blank=True)
    cpu_peak_n_unit = models.PositiveIntegerField(null=True, blank=True)
    cpu_peak_frequency_hz = models.DecimalField(
        null=True, blank=True, max_digits=30, decimal_places=3
    )
    gpu_peak_n_cuda = models.PositiveIntegerField(null=True, blank=True)
    gpu_peak_n_tensor = models.PositiveIntegerField(null=True, blank=True)
    gpu_peak_matrix_order = models.PositiveIntegerField(null=True, blank=True)
    gpu_peak_frequency_hz = models.DecimalField(
        null=True, blank=True, max_digits=30, decimal_places=3
    )
    node_local = models.JSONField(
        default=dict,
        blank=True,
        help_text='Capacity per node of further resources: {"nvme_gb": "3500"}',
    )
    derived_weight = models.DecimalField(
        help_text="w from eq 15 (GPU) or C (CPU), SU per node-hour", max_digits=20, decimal_places=6
    )
    weight_override = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=6)
    weight_override_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    change_note = models.TextField(blank=True)

    class Meta:
        ordering = ["partition", "-effective_from"]
        get_latest_by = "effective_from"
        constraints = [
            models.UniqueConstraint(
                fields=["partition", "effective_from"], name="version_unique_effective_from"
            ),
            models.UniqueConstraint(fields=["partition", "number"], name="version_unique_number"),
            models.CheckConstraint(
                condition=Q(sockets__gte=1) & Q(cores_per_socket__gte=1) & Q(memory_mb__gte=1),
                name="version_hardware_positive",
            ),
            models.CheckConstraint(
                condition=Q(gpus=0) | Q(gpu_tdp_watts__gt=0), name="version_gpu_needs_tdp"
            ),
            models.CheckConstraint(
                condition=Q(weight_override__isnull=True)
                | (Q(weight_override__gt=0) & ~Q(weight_override_reason="")),
                name="version_override_needs_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.partition} v{self.number} from {self.effective_from:%Y-%m-%d %H:%M}"

    @cached_property
    def spec(self) -> charging.PartitionSpec:
        """This version as the pure charging engine's input."""
        return charging.PartitionSpec(
            name=self.partition.name,
            **{name: getattr(self, name) for name in HARDWARE_NAMES},
            node_local={name: Decimal(str(value)) for name, value in self.node_local.items()},
            weight_override=self.weight_override,
        )

    @property
    def cores_per_node(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def memory_per_core_mb(self) -> Decimal:
        """M / C (eq 8): the memory that one core-equivalent of charge buys."""
        return Decimal(self.memory_mb) / Decimal(self.cores_per_node)

    @property
    def weight(self) -> Decimal:
        """The weight charged: the override when staff set one, else the derived value."""
        return self.weight_override if self.weight_override is not None else self.derived_weight

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0


class ImportRun(models.Model):
    """One import of sacct records (a file, an upload or a sacct window) and its summary."""

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="import_runs")
    source = models.CharField(max_length=500, help_text="file path, upload name or sacct window")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    task_id = models.CharField(max_length=64, blank=True)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    header = models.TextField(blank=True, help_text="the header line, to re-read quarantined lines")
    checksum = models.CharField(
        max_length=64, blank=True, db_index=True, help_text="sha256 of an uploaded file"
    )
    lines = models.PositiveBigIntegerField(default=0, help_text="data lines read (header excluded)")
    blank = models.PositiveBigIntegerField(default=0, help_text="empty lines, skipped")
    other_clusters = models.PositiveBigIntegerField(
        default=0, help_text="rows of other Slurm clusters (Cluster column), skipped"
    )
    steps_skipped = models.PositiveBigIntegerField(default=0)
    imported = models.PositiveBigIntegerField(default=0)
    updated = models.PositiveBigIntegerField(default=0)
    charged = models.PositiveBigIntegerField(default=0)
    pending = models.PositiveBigIntegerField(default=0)
    quarantined = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True)
    upload_deleted_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="when the uploaded file was deleted, PORTAL_UPLOAD_RETENTION_DAYS after the run",
    )

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"import {self.pk} of {self.cluster} from {self.source} ({self.status})"


class Job(models.Model):
    """The ledger: one row per run of a Slurm job allocation, with its charge.

    Keyed on the cluster and JobIDRaw; ``run`` is empty for a job's current incarnation and
    holds the start time of an earlier incarnation that Slurm requeued (``--duplicates``).
    """

    class ChargeState(models.TextChoices):
        PENDING = "pending", "pending (not finished)"
        CHARGED = "charged", "charged"
        REFUNDED = "refunded", "not charged by policy"

    # Foreign keys whose lookups the composite indexes below already serve carry no index of
    # their own: every index costs time on each of millions of inserts.
    cluster = models.ForeignKey(
        Cluster, on_delete=models.PROTECT, related_name="jobs", db_index=False
    )
    job_id_raw = models.CharField(max_length=64)
    run = models.CharField(max_length=40, blank=True, default="")
    job_id = models.CharField(max_length=64)
    job_name = models.CharField(max_length=256, blank=True)
    array_job_id = models.CharField(max_length=64, blank=True)
    array_task_id = models.CharField(max_length=64, blank=True)
    het_job_id = models.CharField(max_length=64, blank=True)
    het_offset = models.PositiveSmallIntegerField(null=True, blank=True)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="jobs", db_index=False
    )
    username = models.CharField(max_length=64, help_text="Slurm user, even without a portal login")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        db_index=False,
    )
    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="jobs")
    partition_version = models.ForeignKey(
        PartitionVersion,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="jobs",
        db_index=False,
    )
    qos = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=32)
    state_raw = models.CharField(max_length=64)
    exit_code = models.CharField(max_length=16, blank=True)
    submit = models.DateTimeField(null=True, blank=True)
    start = models.DateTimeField(null=True, blank=True)
    end = models.DateTimeField(null=True, blank=True)
    elapsed_seconds = models.PositiveBigIntegerField(default=0)
    timelimit_minutes = models.PositiveIntegerField(null=True, blank=True)
    nnodes = models.PositiveIntegerField(default=0)
    cpus = models.PositiveIntegerField(default=0)
    memory_mb = models.DecimalField(max_digits=20, decimal_places=3, default=Decimal(0))
    gpus = models.PositiveIntegerField(default=0)
    nodelist = models.TextField(blank=True)
    billing = models.DecimalField(
        max_digits=20, decimal_places=3, null=True, blank=True, help_text="Slurm's billing TRES"
    )
    consumed_energy_joules = models.PositiveBigIntegerField(null=True, blank=True)
    charge_state = models.CharField(
        max_length=16, choices=ChargeState.choices, default=ChargeState.PENDING
    )
    service_units = models.DecimalField(
        default=Decimal(0), help_text="booked SU", max_digits=24, decimal_places=6
    )
    pending_service_units = models.DecimalField(
        default=Decimal(0),
        help_text="SU so far of a job still running",
        max_digits=24,
        decimal_places=6,
    )
    weight = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=6)
    dominant_resource = models.CharField(max_length=32, blank=True)
    node_fractions = models.JSONField(default=list, blank=True)
    warnings = models.JSONField(
        default=list,
        # A database default too: rows written in SQL (COPY, fills) without it get [].
        db_default=Value([], output_field=models.JSONField()),
        blank=True,
        help_text="bad optional sacct values left out, and why",
    )
    energy_wh = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    # What the job used (sacct TotalCPU, and its steps' peaks: accounting.clusters.efficiency);
    # null when the dump did not say. right_sized_service_units: the SU of the same job had it
    # asked for what it used; null without usage data.
    cpu_seconds_used = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=3)
    memory_peak_mb = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=3)
    gpu_utilisation = models.DecimalField(
        null=True, blank=True, max_digits=7, decimal_places=3, help_text="percent of GPUs held"
    )
    gpu_memory_peak_mb = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=3)
    right_sized_service_units = models.DecimalField(
        null=True, blank=True, max_digits=24, decimal_places=6
    )
    # Money (PeCoH cost model in force at the job's end); null when the cluster has none.
    cost = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)
    cost_model_version = models.ForeignKey(
        "CostModelVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    charged_at = models.DateTimeField(null=True, blank=True)
    import_run = models.ForeignKey(
        ImportRun,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        db_index=False,
    )
    line_number = models.PositiveIntegerField(null=True, blank=True)
    source_hash = models.CharField(
        max_length=32, blank=True, help_text="fingerprint of the sacct line this row was read from"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-end", "-job_id_raw"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "job_id_raw", "run"], name="job_unique_run_per_cluster"
            ),
            models.CheckConstraint(
                condition=Q(service_units__gte=0) & Q(pending_service_units__gte=0),
                name="job_service_units_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(start__isnull=True) | Q(end__isnull=True) | Q(start__lte=F("end")),
                name="job_start_before_end",
            ),
            models.CheckConstraint(
                condition=Q(cost__isnull=True) | Q(cost__gte=0), name="job_cost_not_negative"
            ),
        ]
        indexes = [
            models.Index(fields=["project", "end"], name="job_project_end"),
            models.Index(fields=["cluster", "end"], name="job_cluster_end"),
            models.Index(fields=["username", "end"], name="job_username_end"),
            # Running jobs only: the pending charges a balance shows.
            models.Index(
                fields=["cluster"], name="job_pending", condition=Q(charge_state="pending")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}:{self.job_id}"


class UsageDaily(models.Model):
    """Roll-up of charged jobs per project, partition, user and day (the cluster's local day
    on which the job ended). Kept by the import in the same transaction as the charges;
    balances and charts read these, never a scan of jobs."""

    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="usage_days"
    )
    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="usage_days")
    username = models.CharField(max_length=64)
    day = models.DateField()
    service_units = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    core_hours = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    gpu_hours = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    energy_wh = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    cost = models.DecimalField(
        default=Decimal(0), db_default=Decimal(0), max_digits=24, decimal_places=6
    )
    jobs = models.IntegerField(default=0)
    # Energy Slurm measured (ConsumedEnergyRaw / 3600) of the jobs that have a measurement, and
    # the engine's estimate of those same jobs: best energy = measured + energy_wh - this.
    energy_measured_wh = models.DecimalField(
        default=Decimal(0), db_default=Decimal(0), max_digits=24, decimal_places=6
    )
    energy_measured_estimate_wh = models.DecimalField(
        default=Decimal(0), db_default=Decimal(0), max_digits=24, decimal_places=6
    )
    energy_measured_jobs = models.IntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["day"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "partition", "username", "day"], name="usage_daily_unique"
            )
        ]
        indexes = [models.Index(fields=["project", "day"], name="usage_project_day")]

    def __str__(self) -> str:
        return f"{self.project} {self.partition} {self.username} {self.day}"


class EfficiencySums(models.Model):
    """The sums of the efficiency roll-ups (abstract): of charged jobs WITH usage data, so that
    any period and any grouping is a ratio of sums: CPU efficiency = core_hours_used /
    core_hours_held, and the SU left on the table = service_units - right_sized_service_units.
    Jobs without usage data are not in them (they are in UsageDaily)."""

    jobs = models.IntegerField(default=0)
    service_units = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    right_sized_service_units = models.DecimalField(
        default=Decimal(0), max_digits=24, decimal_places=6
    )
    core_hours_held = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    core_hours_used = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    # Memory: MiB-hours of the jobs whose peak was measured, held and at their peak.
    memory_jobs = models.IntegerField(default=0)
    memory_mb_hours_held = models.DecimalField(default=Decimal(0), max_digits=28, decimal_places=6)
    memory_mb_hours_used = models.DecimalField(default=Decimal(0), max_digits=28, decimal_places=6)
    # GPUs: GPU-hours of the jobs whose GPU utilisation was measured.
    gpu_jobs = models.IntegerField(default=0)
    gpu_hours_held = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    gpu_hours_used = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    # Walltime: hours run and hours asked for, of the jobs with a time limit.
    walltime_jobs = models.IntegerField(default=0)
    hours_run = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    hours_asked = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)

    class Meta:
        abstract = True


class EfficiencyDaily(EfficiencySums):
    """Roll-up of the efficiency of charged jobs with usage data (:class:`EfficiencySums`), per
    project, partition, user and day (as UsageDaily: the cluster's local day the job ended)."""

    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="efficiency_days"
    )
    partition = models.ForeignKey(
        Partition, on_delete=models.PROTECT, related_name="efficiency_days"
    )
    username = models.CharField(max_length=64)
    day = models.DateField()

    class Meta:
        ordering = ["day"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "partition", "username", "day"], name="efficiency_daily_unique"
            )
        ]
        indexes = [
            models.Index(fields=["project", "day"], name="efficiency_project_day"),
            models.Index(fields=["day"], name="efficiency_day"),
        ]

    def __str__(self) -> str:
        return f"{self.project} {self.partition} {self.username} {self.day}"


class EfficiencyMonthly(EfficiencySums):
    """EfficiencyDaily summed per calendar month, with the month's charged jobs measured or
    not (``all_jobs``, ``charged_service_units``: UsageDaily's ``jobs`` and ``service_units``),
    so that a period of whole months (a year: 12 rows per user, not 365) is read from one
    table. Kept by the import beside the daily rows, in the same transaction; a period that
    starts or ends within a month reads those days from the daily tables
    (accounting.ledger.efficiency_selectors)."""

    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="efficiency_months"
    )
    partition = models.ForeignKey(
        Partition, on_delete=models.PROTECT, related_name="efficiency_months"
    )
    username = models.CharField(max_length=64)
    month = models.DateField(help_text="first day of the month")
    all_jobs = models.IntegerField(default=0)
    charged_service_units = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)

    class Meta:
        ordering = ["month"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "partition", "username", "month"],
                name="efficiency_monthly_unique",
            )
        ]
        indexes = [models.Index(fields=["project", "month"], name="efficiency_project_month")]

    def __str__(self) -> str:
        return f"{self.project} {self.partition} {self.username} {self.month:%Y-%m}"


class EfficiencyBucket(models.Model):
    """How many measured jobs of a project, partition, user and month had an efficiency in each
    tenth (bucket 0: under 10 %, ..., bucket 9: 90 % to 100 %): the distributions."""

    class Metric(models.TextChoices):
        CPU = "cpu", "CPU"
        MEMORY = "memory", "memory"
        GPU = "gpu", "GPU"
        WALLTIME = "walltime", "walltime"

    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="efficiency_buckets"
    )
    partition = models.ForeignKey(
        Partition, on_delete=models.PROTECT, related_name="efficiency_buckets"
    )
    username = models.CharField(max_length=64)
    month = models.DateField(help_text="first day of the month")
    metric = models.CharField(max_length=8, choices=Metric.choices)
    bucket = models.PositiveSmallIntegerField()
    jobs = models.IntegerField(default=0)

    class Meta:
        ordering = ["month", "metric", "bucket"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "partition", "username", "month", "metric", "bucket"],
                name="efficiency_bucket_unique",
            )
        ]
        indexes = [models.Index(fields=["project", "month"], name="efficiency_bucket_project")]

    def __str__(self) -> str:
        return f"{self.project} {self.month} {self.metric} {self.bucket}"


class QuarantinedRecord(models.Model):
    """A sacct line that could not be parsed or charged, kept whole with the reason.

    Nothing is dropped: once the cause is fixed (a partition or project added) the line is
    read again and charged, and the record is marked resolved.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="quarantine")
    import_run = models.ForeignKey(
        ImportRun,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="quarantined_records",
    )
    source = models.CharField(max_length=500)
    line_number = models.PositiveIntegerField()
    header = models.TextField()
    raw = models.TextField()
    raw_hash = models.CharField(max_length=64, help_text="sha256 of header and line")
    reason = models.TextField()
    field = models.CharField(max_length=64, blank=True)
    job_id_raw = models.CharField(max_length=64, blank=True)
    account = models.CharField(max_length=64, blank=True)
    partition_name = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "raw_hash"], name="quarantine_unique_line")
        ]
        indexes = [models.Index(fields=["cluster", "resolved_at"], name="quarantine_open")]

    def __str__(self) -> str:
        return f"{self.cluster} line {self.line_number}: {self.reason}"


class UtilisationHourly(models.Model):
    """Allocated core-seconds and GPU-seconds per partition and clock hour (Q(T), eqs 10-11).

    Kept by the import in the same transaction as the charges, from each finished job's overlap
    with each hour; series of any step are summed from these rows and priced with the partition
    versions' peak performance when they are asked for (accounting.utilisation.quality).
    """

    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="+")
    hour_start = models.DateTimeField(help_text="start of a local clock hour, as an instant")
    core_seconds = models.BigIntegerField(default=0)
    gpu_seconds = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["hour_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["partition", "hour_start"], name="utilisation_hour_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.partition} {self.hour_start:%Y-%m-%d %H:00}"


class CostModelVersion(models.Model):
    """A money cost model (PeCoH report, chapter 4 format) in force on a cluster from
    ``effective_from``: versioned like rates, rows never edited. ``text`` is the model file
    as staff uploaded or pasted it; ``currency`` is read from it."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="cost_models")
    number = models.PositiveIntegerField(help_text="1, 2, ... per cluster")
    name = models.CharField(max_length=100)
    effective_from = models.DateTimeField()
    text = models.TextField(help_text="The cost model description (chapter 4 format)")
    currency = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    change_note = models.TextField(blank=True)

    class Meta:
        ordering = ["cluster", "-effective_from"]
        get_latest_by = "effective_from"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "effective_from"], name="cost_model_unique_effective_from"
            ),
            models.UniqueConstraint(fields=["cluster", "number"], name="cost_model_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name} cost model v{self.number} {self.name}"


class OverheadRun(models.Model):
    """One true-overhead computation (DESIGN.md section 5) over a window of a cluster."""

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="overhead_runs")
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    step = models.CharField(max_length=8, default="hour")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    jobs_seen = models.PositiveIntegerField(default=0)
    jobs_unplaced = models.PositiveIntegerField(default=0)
    unplaced_sample = models.JSONField(
        default=list, blank=True, help_text="[job id, reason] of the first unplaced jobs"
    )
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(window_start__lt=F("window_end")), name="overhead_window_ordered"
            )
        ]

    def __str__(self) -> str:
        start, end = f"{self.window_start:%Y-%m-%d}", f"{self.window_end:%Y-%m-%d}"
        return f"{self.cluster.name} overhead {start} to {end}"


class OverheadPartitionResult(models.Model):
    """A partition's true overhead over a run's window: time series, histogram, fair rates."""

    run = models.ForeignKey(OverheadRun, on_delete=models.CASCADE, related_name="partitions")
    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="+")
    unit_cores = models.PositiveIntegerField()
    unit_memory_mb = models.PositiveBigIntegerField()
    unit_gpus = models.PositiveIntegerField()
    node_count = models.PositiveIntegerField()
    buckets = models.JSONField(
        default=list, help_text="[bucket start ISO, bucket end ISO, unit-seconds] in time order"
    )
    histogram = models.JSONField(
        default=dict, help_text="{units of true overhead: node-seconds spent there}"
    )
    occupied_node_seconds = models.BigIntegerField(default=0)
    allocated_core_seconds = models.BigIntegerField(default=0)
    allocated_memory_mb_seconds = models.BigIntegerField(default=0)
    allocated_gpu_seconds = models.BigIntegerField(default=0)
    billable_core_seconds = models.BigIntegerField(default=0)
    billable_memory_mb_seconds = models.BigIntegerField(default=0)
    billable_gpu_seconds = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["run", "partition"]
        constraints = [
            models.UniqueConstraint(fields=["run", "partition"], name="overhead_partition_once")
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.partition.name}"


class JobFairShare(models.Model):
    """What section 3.3's fair billing charges a job within a run's window: its allocation
    plus its pro-rata share of the unallocated resources that are not true overhead."""

    run = models.ForeignKey(OverheadRun, on_delete=models.CASCADE, related_name="fair_shares")
    # Enforced by PostgreSQL against the ledger's key table (accounting/partitions.py).
    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, related_name="fair_shares", db_constraint=False
    )
    allocated_core_seconds = models.BigIntegerField()
    allocated_memory_mb_seconds = models.BigIntegerField()
    allocated_gpu_seconds = models.BigIntegerField()
    billed_core_seconds = models.BigIntegerField()
    billed_memory_mb_seconds = models.BigIntegerField()
    billed_gpu_seconds = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "job"], name="fair_share_once")]

    def __str__(self) -> str:
        return f"{self.job} in {self.run}"

"""The jobs ledger: import runs, jobs, their daily usage and efficiency roll-ups, and the
quarantine."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import F, Q, Value

from accounting.models.clusters import Cluster, Partition, PartitionVersion


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
    # Runs that finish themselves (docs/importing.md, "Runs that finish themselves").
    heartbeat_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="last sign of life: each committed batch, and the task when it starts",
    )
    attempts = models.PositiveSmallIntegerField(
        default=1, help_text="times the import was started (the recovery task's included)"
    )
    task_options = models.JSONField(
        default=dict, blank=True, help_text="the import task's arguments, to queue it again"
    )
    task_unsent = models.BooleanField(
        default=False, help_text="failed because its task could not be sent (broker down)"
    )
    interruptions = models.TextField(
        blank=True, help_text="what interrupted the run and how it went on, one line each"
    )

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"import {self.pk} of {self.cluster} from {self.source} ({self.status})"


# Slurm's job states that do not read as words when lower-cased (sacct's State column).
_STATE_WORDS = {
    "TIMEOUT": "timed out", "NODE_FAIL": "node failure", "OUT_OF_MEMORY": "out of memory",
    "BOOT_FAIL": "failed to boot", "DEADLINE": "past its deadline", "PREEMPTED": "preempted",
}  # fmt: skip


def state_in_words(state: str, exit_code: str = "") -> str:
    """A Slurm job state in words, the one rule of every page: see :attr:`Job.state_words`."""
    words = _STATE_WORDS.get(state, state.lower().replace("_", " "))
    code = exit_code.partition(":")[0]
    if state == "FAILED" and code not in {"", "0"}:
        return f"{words} (exit code {code})"
    return words


class LedgerStamp(models.Model):
    """One row: how many import batches have committed, ever. Every batch adds one in its own
    transaction (``accounting.ledger.pipeline``), after its jobs, roll-ups and counters, so
    the number moves with every change an import makes and is read in one lookup
    (``accounting.ledger.selectors.ledger_stamp``): the import runs themselves grow by about
    300 a day at a centre that imports every five minutes, and an aggregate over six years of
    them (630,000) took 58 ms. Concurrent batches take turns on the row for the moment between
    their last statement and their commit."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    batches = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.batches} batches"


class ImportRunChange(models.Model):
    """What a run's corrections did to one project's charges: the jobs booked before it that
    it read again with a different record, and the net change of their SU (new minus old),
    written in the batch's transaction (the ledger keeps only the record as now read)."""

    run = models.ForeignKey(ImportRun, on_delete=models.CASCADE, related_name="changes")
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="+")
    corrected_jobs = models.PositiveIntegerField(default=0)
    service_units = models.DecimalField(
        max_digits=24, decimal_places=6, default=0, help_text="net SU change: new minus old"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "project"], name="import_run_change_unique")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id}, project {self.project_id}: {self.service_units} SU"


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
    # their own: every index costs time on each of millions of inserts. None is a database
    # constraint either (migration 0022, docs/importing.md "The lean ledger"): the import checks
    # a batch's references set-wise (accounting/ledger/references.py), and the ORM still
    # follows them (select_related, the admin, on_delete).
    cluster = models.ForeignKey(
        Cluster, on_delete=models.PROTECT, related_name="jobs", db_index=False, db_constraint=False
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
        "projects.Project",
        on_delete=models.PROTECT,
        related_name="jobs",
        db_index=False,
        db_constraint=False,
    )
    username = models.CharField(max_length=64, help_text="Slurm user, even without a portal login")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        db_index=False,
        db_constraint=False,
    )
    partition = models.ForeignKey(
        Partition,
        on_delete=models.PROTECT,
        related_name="jobs",
        db_index=False,
        db_constraint=False,
    )
    partition_version = models.ForeignKey(
        PartitionVersion,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="jobs",
        db_index=False,
        db_constraint=False,
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
    reserved_service_units = models.DecimalField(
        null=True,
        blank=True,
        help_text="SU a queued or running job holds: its price at its requested size and time "
        "limit (without a limit, its SU so far); null once finished",
        max_digits=24,
        decimal_places=6,
    )
    weight = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=6)
    dominant_resource = models.CharField(max_length=32, blank=True)
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
        "CostModelVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    charged_at = models.DateTimeField(null=True, blank=True)
    import_run = models.ForeignKey(
        ImportRun,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        db_index=False,
        db_constraint=False,
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
        # Only what the pages read (docs/importing.md, "The lean ledger"): a project's jobs by
        # end (its job list, its page of a month), a cluster's jobs by end (utilisation, true
        # overhead, money and exports of a window). The balance reads the key table.
        indexes = [
            models.Index(fields=["project", "end"], name="job_project_end"),
            models.Index(fields=["cluster", "end"], name="job_cluster_end"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}:{self.job_id}"

    @property
    def state_words(self) -> str:
        """The job's state as every page writes it: Slurm's word in lower case ("running",
        "timed out"), with the exit code only for a job that failed ("failed (exit code 2)").
        A job still running has no exit code yet, whatever sacct printed in its place."""
        return state_in_words(self.state, self.exit_code)


class UsageDaily(models.Model):
    """Roll-up of charged jobs per project, partition, user and day (the cluster's local day
    on which the job ended). Kept by the import in the same transaction as the charges;
    balances and charts read these, never a scan of jobs."""

    # No index of its own: the (project, day) index and the unique key both lead with it. On
    # PostgreSQL the (project, day) index carries the user and the SU (INCLUDE, migration 0033):
    # the project page's SU per user reads it alone, never the table.
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="usage_days", db_index=False
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


class ProjectUsageDaily(models.Model):
    """UsageDaily summed over the users: charged jobs per project, local day they ended and
    partition, with their SU and money. What a balance reads: a project's rows grow with its
    days and partitions, not with how many of its people ran jobs (a project of 40 active users
    reads 40 times fewer rows than from UsageDaily). Kept by the import from the same deltas as
    UsageDaily, in the same statement's transaction (``accounting.ledger.rollups``), and by a
    cost model's re-costing of UsageDaily; equal to UsageDaily grouped by project, day and
    partition, always (tests/accounting/test_project_usage_daily.py)."""

    # The unique key leads with the project, then the partition (a pool's days are one stretch
    # of it): it serves the import's upsert and the balance's read of many projects' days,
    # with no index of its own. On PostgreSQL it also carries service_units, cost and jobs
    # (INCLUDE, migration 0031), so those reads never visit the table; Django's
    # UniqueConstraint(include=...) is not used: it would create no constraint at all on
    # SQLite, whose upsert needs one.
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    day = models.DateField()
    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="+")
    service_units = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    cost = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)
    jobs = models.IntegerField(default=0)

    class Meta:
        ordering = ["day"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "partition", "day"], name="project_usage_day_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.project_id} {self.partition_id} {self.day}"


class EnergyHourly(models.Model):
    """The best energy (measured, else estimated) of booked jobs per project, local day they
    ended (as UsageDaily), partition and UTC clock hour of their run: each job's energy split
    over the hours it ran in proportion to its seconds in each
    (``accounting.carbon.footprint.energy_hour_shares``). CO2e multiplies each hour by the
    grid's intensity in that hour, the rule a job's own CO2e uses, so a project's month is the
    sum of its jobs' (docs/energy-and-carbon.md). A day's rows add up to its UsageDaily best
    energy exactly. Kept by the import in the batch's transaction, like the other roll-ups."""

    # The unique key leads with the project and the day: it serves the import's upsert and a
    # project's range read, with no index of its own.
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    day = models.DateField()
    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="+")
    hour_start = models.DateTimeField(help_text="start of a UTC clock hour")
    energy_wh = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)

    class Meta:
        ordering = ["day", "hour_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "day", "partition", "hour_start"], name="energy_hour_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.project_id} {self.partition_id} {self.day} {self.hour_start:%Y-%m-%d %H:00}"


class UsageShape(models.Model):
    """The sums of a roll-up of CHARGED jobs per shape (abstract): the size a job held, which
    is all the charging engine needs besides the time to price it again (the import prices
    ``split_evenly(nnodes, cpus, memory_mb, gpus)``), and the jobs, seconds and SU of that
    shape. Every charging model is linear in the elapsed seconds, so a partition version prices
    a shape's summed seconds in one call (accounting.ledger.repricing; the rounding bound is in
    docs/allocations.md, "Re-pricing at the round's rates"). Refunded jobs are not in it."""

    # The unique key of each concrete table leads with the project and the day or month, and
    # serves both the import's upsert and the record's range reads: no index of its own.
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="+")
    nnodes = models.PositiveIntegerField()
    cpus = models.PositiveIntegerField()
    gpus = models.PositiveIntegerField()
    memory_mb = models.DecimalField(max_digits=20, decimal_places=3)
    jobs = models.IntegerField(default=0)
    elapsed_seconds = models.BigIntegerField(default=0)
    service_units = models.DecimalField(default=Decimal(0), max_digits=24, decimal_places=6)

    class Meta:
        abstract = True


class UsageShapeDaily(UsageShape):
    """Charged jobs per project, local day they ended (as UsageDaily), partition and shape
    (:class:`UsageShape`): the days at either end of a period that is not whole months."""

    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "day", "partition", "nnodes", "cpus", "gpus", "memory_mb"],
                name="usage_shape_daily_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.project_id} {self.partition_id} {self.day} {self.nnodes}x{self.cpus}"


class UsageShapeMonthly(UsageShape):
    """UsageShapeDaily summed per calendar month, kept beside it by the import in the same
    transaction: a year of a project is at most twelve rows per shape."""

    month = models.DateField(help_text="first day of the month")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "month", "partition", "nnodes", "cpus", "gpus", "memory_mb"],
                name="usage_shape_monthly_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.project_id} {self.partition_id} {self.month:%Y-%m} {self.nnodes}x{self.cpus}"


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

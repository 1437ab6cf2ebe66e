"""Hourly utilisation roll-ups, true overhead runs and fair shares (docs/utilisation.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from accounting.models.clusters import Cluster, Partition
from accounting.models.ledger import Job


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


class UtilisationMonth(models.Model):
    """What the import added to a partition's hourly rows of one UTC month: the month's stamp.

    Kept by the import (``hourly_apply``) in the same transaction as the hourly rows: the sums
    of the month's core- and GPU-seconds and ``changes``, one more for each batch that touched
    the month. A Q(T) series cached per block of buckets is keyed on the stamps of the months
    the block overlaps (accounting.utilisation.selectors), so a month an import did not touch
    is served from the cache, one it touched is computed again, and none is ever stale.
    """

    partition = models.ForeignKey(Partition, on_delete=models.PROTECT, related_name="+")
    month = models.DateField(help_text="first day of the UTC month of the hours")
    core_seconds = models.BigIntegerField(default=0)
    gpu_seconds = models.BigIntegerField(default=0)
    changes = models.BigIntegerField(default=0, help_text="batches that touched the month")

    class Meta:
        ordering = ["month"]
        constraints = [
            models.UniqueConstraint(fields=["partition", "month"], name="utilisation_month_unique")
        ]

    def __str__(self) -> str:
        return f"{self.partition} {self.month:%Y-%m}"


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
    # Enforced by PostgreSQL against the ledger's key table (accounting/ledger_storage.py).
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

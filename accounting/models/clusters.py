"""Clusters, partitions and the versioned hardware specs (rate versions) that charging uses."""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import models
from django.db.models import Q

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


class RateDraft(models.Model):
    """A cluster's next rates as staff draft them, stored but never in force.

    ``spec`` is a cluster spec document (the format of ``examples/clusters/``, checked by the
    same validation as ``cluster_apply``) and ``cost_model_text`` an optional cost model
    (docs/costs.md). Charging, the import and every page read only ``PartitionVersion`` and
    ``CostModelVersion``, so a draft changes no charge until it is published, which applies it
    through the same services as a spec file or a cost model upload (docs/costs.md, "A rate
    change seen before it ships").
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="rate_drafts")
    spec = models.JSONField(help_text="A cluster spec document (examples/clusters/*.json)")
    cost_model_text = models.TextField(
        blank=True, help_text="A draft cost model (chapter 4 format); empty: the current one"
    )
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["cluster", "-created_at"]

    def __str__(self) -> str:
        return f"{self.cluster.name} rate draft {self.pk}"

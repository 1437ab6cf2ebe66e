"""Clusters, partitions and the versioned hardware specs (rate versions) that charging uses."""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import models
from django.db.models import Q

from accounting import charging

# FLOP/s and frequencies are large whole numbers; 30 digits hold exa-scale with room to spare.
_BIG = {"max_digits": 30, "decimal_places": 3}
_WATTS = {"max_digits": 10, "decimal_places": 3}
_WEIGHT = {"max_digits": 20, "decimal_places": 6}


class Cluster(models.Model):
    """A Slurm cluster (one sacct source, one time zone)."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="Time zone sacct prints its times in."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def zoneinfo(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


class Partition(models.Model):
    """A Slurm partition: identical nodes. Its hardware lives in ``PartitionVersion`` rows."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="partitions")
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="partition_unique_per_cluster")
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
    cpu_tdp_watts = models.DecimalField(help_text="TDP per CPU socket", **_WATTS)
    gpu_tdp_watts = models.DecimalField(default=Decimal(0), help_text="TDP per GPU", **_WATTS)
    gpu_streaming_multiprocessors = models.PositiveIntegerField(default=0)
    cpu_peak_flops = models.DecimalField(null=True, blank=True, **_BIG)
    gpu_peak_flops = models.DecimalField(null=True, blank=True, **_BIG)
    cpu_peak_n_stream = models.PositiveIntegerField(null=True, blank=True)
    cpu_peak_n_unit = models.PositiveIntegerField(null=True, blank=True)
    cpu_peak_frequency_hz = models.DecimalField(null=True, blank=True, **_BIG)
    gpu_peak_n_cuda = models.PositiveIntegerField(null=True, blank=True)
    gpu_peak_n_tensor = models.PositiveIntegerField(null=True, blank=True)
    gpu_peak_matrix_order = models.PositiveIntegerField(null=True, blank=True)
    gpu_peak_frequency_hz = models.DecimalField(null=True, blank=True, **_BIG)
    node_local = models.JSONField(
        default=dict,
        blank=True,
        help_text='Capacity per node of further resources: {"nvme_gb": "3500"}',
    )
    derived_weight = models.DecimalField(
        help_text="w from eq 15 (GPU) or C (CPU), SU per node-hour", **_WEIGHT
    )
    weight_override = models.DecimalField(null=True, blank=True, **_WEIGHT)
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
            sockets=self.sockets,
            cores_per_socket=self.cores_per_socket,
            memory_mb=self.memory_mb,
            gpus=self.gpus,
            cpu_tdp_watts=self.cpu_tdp_watts,
            gpu_tdp_watts=self.gpu_tdp_watts,
            gpu_streaming_multiprocessors=self.gpu_streaming_multiprocessors,
            cpu_peak_flops=self.cpu_peak_flops,
            gpu_peak_flops=self.gpu_peak_flops,
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

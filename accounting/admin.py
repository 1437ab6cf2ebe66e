"""Staff administration of clusters, partitions and rate versions.

Versions are append-only here as everywhere: the admin adds a version through the same service
as ``cluster_apply`` and never edits one, so charges keep the rates they were made with.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from accounting.clusters.hardware import HARDWARE, HARDWARE_NAMES
from accounting.clusters.quotes import weight_explanation
from accounting.clusters.services import (
    cluster_import_schedule_sync,
    partition_version_create,
    version_start_problem,
)
from accounting.clusters.specs import PartitionDefinition, SpecFileError, cluster_definition_parse
from accounting.models import (
    Cluster,
    CostModelVersion,
    GridIntensity,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
    QuarantinedRecord,
    UsageDaily,
)
from accounting.quarantine import quarantine_retry_enqueue


class PartitionInline(admin.TabularInline):
    model = Partition
    extra = 0
    fields = ("name", "description")
    show_change_link = True


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = (
        "name", "timezone", "imports_enabled", "last_imported_until", "grid_intensity_g_per_kwh",
    )  # fmt: skip
    search_fields = ("name",)
    readonly_fields = ("last_imported_until",)
    inlines = [PartitionInline]

    def save_model(self, request: HttpRequest, obj: Cluster, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        cluster_import_schedule_sync(cluster=obj)


class PartitionVersionInline(admin.TabularInline):
    model = PartitionVersion
    extra = 0
    can_delete = False
    fields = (
        "number",
        "effective_from",
        "node_count",
        "cores",
        "gpus",
        "memory_mb",
        "weight_shown",
    )
    readonly_fields = fields

    @admin.display(description="cores (C)")
    def cores(self, obj: PartitionVersion) -> int:
        return obj.cores_per_node

    @admin.display(description="weight (SU per node-hour)")
    def weight_shown(self, obj: PartitionVersion) -> str:
        return weight_explanation(obj.spec)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PartitionForm(forms.ModelForm):
    """A canonical-unit threshold is blank (the paper's default) or at least 1."""

    class Meta:
        model = Partition
        fields = (
            "cluster", "name", "description", "canonical_cores", "canonical_memory_mb",
            "canonical_gpus",
        )  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in ("canonical_cores", "canonical_memory_mb", "canonical_gpus"):
            if data.get(name) == 0:
                self.add_error(name, "a threshold is at least 1; leave it blank for the default")
        return data


@admin.register(Partition)
class PartitionAdmin(admin.ModelAdmin):
    form = PartitionForm
    list_display = ("name", "cluster", "current_weight", "canonical_unit")
    list_filter = ("cluster",)
    inlines = [PartitionVersionInline]
    fieldsets = (
        (None, {"fields": ("cluster", "name", "description")}),
        (
            "Canonical unit of true overhead",
            {
                "fields": ("canonical_cores", "canonical_memory_mb", "canonical_gpus"),
                "description": "All blank: the paper's default, 1 GPU on GPU nodes and 1 core "
                "+ 2 GB (2048 MiB) on CPU nodes. Otherwise the resources given are the "
                "thresholds of one unit (a blank one is left out of it).",
            },
        ),
    )

    @admin.display(description="weight now")
    def current_weight(self, obj: Partition) -> str:
        version = obj.versions.order_by("-effective_from").first()
        return weight_explanation(version.spec) if version else "no specification"

    @admin.display(description="canonical unit")
    def canonical_unit(self, obj: Partition) -> str:
        parts = [
            f"{value} {label}"
            for value, label in (
                (obj.canonical_cores, "cores"),
                (obj.canonical_memory_mb, "MiB"),
                (obj.canonical_gpus, "GPUs"),
            )
            if value is not None
        ]
        return " + ".join(parts) or "default"


class PartitionVersionForm(forms.ModelForm):
    """Validates a new version with the same rules as spec files (one place for the rules)."""

    definition: PartitionDefinition

    class Meta:
        model = PartitionVersion
        fields = (
            "partition", "effective_from", "nodelist", *HARDWARE_NAMES, "node_local",
            "weight_override", "weight_override_reason", "change_note",
        )  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        partition = data.get("partition")
        if partition is None or self.errors:
            return data
        document: dict[str, Any] = {
            "name": partition.name,
            "nodelist": data.get("nodelist"),
            "node_local": data.get("node_local") or {},
        }
        for field in HARDWARE:  # as a spec file writes them: decimals as strings
            value = data.get(field.name)
            if field.kind == "int":
                document[field.name] = value if field.required else (value or field.default)
            elif field.required or value:
                document[field.name] = str(value)
        if data.get("weight_override"):
            document["weight_override"] = str(data["weight_override"])
        if data.get("weight_override_reason"):
            document["weight_override_reason"] = data["weight_override_reason"]
        cluster = {"name": partition.cluster.name, "partitions": [document]}
        try:
            self.definition = cluster_definition_parse(cluster, source="new version").partitions[0]
        except SpecFileError as error:
            raise forms.ValidationError(str(error)) from None
        when = data.get("effective_from")
        problem = when and version_start_problem(partition=partition, effective_from=when)
        if problem:
            raise forms.ValidationError(problem)
        return data


@admin.register(PartitionVersion)
class PartitionVersionAdmin(admin.ModelAdmin):
    """Add-only: a new version is a new row with a later effective date."""

    list_display = ("partition", "number", "effective_from", "node_count", "weight_display")
    list_filter = ("partition__cluster", "partition")
    readonly_fields = ("number", "node_count", "derived_weight", "weight_display", "created_by")
    fields = (
        "partition",
        "effective_from",
        "nodelist",
        *HARDWARE_NAMES,
        "node_local",
        "weight_override",
        "weight_override_reason",
        "change_note",
        "number",
        "node_count",
        "derived_weight",
        "weight_display",
        "created_by",
    )

    @admin.display(description="weight")
    def weight_display(self, obj: PartitionVersion) -> str:
        return weight_explanation(obj.spec) if obj.pk else "computed on save"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    form = PartitionVersionForm

    def save_model(
        self, request: HttpRequest, obj: PartitionVersion, form: Any, change: bool
    ) -> None:
        saved = partition_version_create(
            partition=obj.partition,
            definition=form.definition,
            effective_from=obj.effective_from,
            created_by=request.user,  # type: ignore[arg-type]
            note=obj.change_note,
        )
        obj.pk = saved.pk


class ReadOnlyAdmin(admin.ModelAdmin):
    """The ledger is written by imports and services only; staff read it here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ImportRun)
class ImportRunAdmin(ReadOnlyAdmin):
    list_display = (
        "pk",
        "cluster",
        "source",
        "status",
        "started_at",
        "lines",
        "charged",
        "quarantined",
    )
    list_filter = ("cluster", "status")


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = (
        "job_id",
        "cluster",
        "project",
        "username",
        "partition",
        "state",
        "end",
        "service_units",
    )
    list_filter = ("cluster", "charge_state", "state", "partition")
    search_fields = ("job_id_raw", "job_id", "username", "project__code")
    list_select_related = ("cluster", "project", "partition")
    show_full_result_count = False  # counting a million rows on every page is not worth it


@admin.register(UsageDaily)
class UsageDailyAdmin(ReadOnlyAdmin):
    list_display = ("day", "project", "partition", "username", "service_units", "jobs")
    list_filter = ("partition",)
    search_fields = ("project__code", "username")
    date_hierarchy = "day"


@admin.register(QuarantinedRecord)
class QuarantinedRecordAdmin(ReadOnlyAdmin):
    list_display = ("cluster", "line_number", "reason", "source", "created_at", "resolved_at")
    list_filter = ("cluster", ("resolved_at", admin.EmptyFieldListFilter))
    search_fields = ("raw", "reason", "job_id_raw", "account")
    actions = ["retry"]

    @admin.action(description="Read the selected clusters' open lines again")
    def retry(self, request: HttpRequest, queryset: Any) -> None:
        for cluster in Cluster.objects.filter(quarantine__in=queryset).distinct():
            quarantine_retry_enqueue(cluster=cluster)
        self.message_user(request, "Retry queued.")


@admin.register(CostModelVersion)
class CostModelVersionAdmin(ReadOnlyAdmin):
    """Read-only: versions are added on the cluster's cost model page or by ``cost_model_apply``
    (one place for the rules), and never edited, so costs keep the model they were made with."""

    list_display = ("cluster", "number", "name", "effective_from", "currency", "created_by")
    list_filter = ("cluster",)
    fields = (
        "cluster", "number", "name", "effective_from", "currency", "text", "change_note",
        "created_at", "created_by",
    )  # fmt: skip
    readonly_fields = fields


@admin.register(GridIntensity)
class GridIntensityAdmin(admin.ModelAdmin):
    """A cluster's grid intensity series; staff load whole files on the cluster's grid
    intensity page (or with ``grid_intensity_load``) and correct a step here."""

    list_display = ("cluster", "starts_at", "g_per_kwh")
    list_filter = ("cluster",)
    date_hierarchy = "starts_at"
    ordering = ("cluster", "-starts_at")

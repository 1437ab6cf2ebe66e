"""Staff administration of projects, their members and the resource pools."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from projects.models import Membership, PoolPartition, Project, ResourcePool
from projects.services import project_create


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("code", "title", "pi", "status", "field_of_science", "finance_code")
    list_filter = ("status",)
    search_fields = ("code", "title", "finance_code")
    inlines = [MembershipInline]

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        created = project_create(
            code=obj.code, title=obj.title, pi=obj.pi, field_of_science=obj.field_of_science,
            finance_code=obj.finance_code,
        )  # fmt: skip
        obj.pk = created.pk
        obj.status = created.status


class PoolPartitionInline(admin.TabularInline):
    model = PoolPartition
    extra = 1


@admin.register(ResourcePool)
class ResourcePoolAdmin(admin.ModelAdmin):
    list_display = (
        "name", "cluster", "slurm_account_suffix", "budget_months", "split", "carry_over",
        "notify_thresholds",
    )  # fmt: skip
    inlines = [PoolPartitionInline]

"""Staff administration of projects and memberships."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from allocations.models import Membership, Project
from allocations.services import project_create


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("code", "title", "pi", "status", "field_of_science")
    list_filter = ("status",)
    search_fields = ("code", "title")
    inlines = [MembershipInline]

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        created = project_create(
            code=obj.code, title=obj.title, pi=obj.pi, field_of_science=obj.field_of_science
        )
        obj.pk = created.pk
        obj.status = created.status

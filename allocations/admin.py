"""Staff administration of allocations. Grants, adjustments and request decisions go through
the services (and their audit trail); here they are read, and pools and rounds are set up."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from allocations.models import (
    Adjustment,
    Allocation,
    AllocationRequest,
    AllocationRound,
    BudgetPeriod,
    CommitteeMember,
    EnforcementAction,
    PriorityAction,
    PriorityPolicy,
    ProfilingCoefficient,
    ProjectRequest,
    ProjectRequestAmount,
    ProjectRequestTransition,
    RequestAmount,
    RequestTransition,
    Review,
    RoundPool,
    ThresholdNotice,
)
from allocations.priorities.services import (
    PriorityError,
    priority_action_dismiss,
    priority_action_execute,
)
from allocations.slurm.enforcement import enforcement_dismiss, enforcement_execute


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RoundPoolInline(admin.TabularInline):
    model = RoundPool
    extra = 1


class CommitteeInline(admin.TabularInline):
    model = CommitteeMember
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(AllocationRound)
class AllocationRoundAdmin(admin.ModelAdmin):
    list_display = ("name", "opens_at", "closes_at", "period_start", "period_end")
    inlines = [RoundPoolInline, CommitteeInline]


class AmountInline(ReadOnlyInline):
    model = RequestAmount


class TransitionInline(ReadOnlyInline):
    model = RequestTransition


class ReviewInline(ReadOnlyInline):
    model = Review


@admin.register(AllocationRequest)
class AllocationRequestAdmin(ReadOnlyAdmin):
    list_display = ("project", "round", "kind", "state", "created_at", "decided_at")
    list_filter = ("round", "state", "kind")
    search_fields = ("project__code",)
    inlines = [AmountInline, ReviewInline, TransitionInline]


class ProjectRequestAmountInline(ReadOnlyInline):
    model = ProjectRequestAmount


class ProjectRequestTransitionInline(ReadOnlyInline):
    model = ProjectRequestTransition
    fk_name = "request"


@admin.register(ProjectRequest)
class ProjectRequestAdmin(ReadOnlyAdmin):
    """Requests for new projects: decided on their pages (the services), read here."""

    list_display = ("title", "requester", "pi", "state", "project", "created_at", "decided_at")
    list_filter = ("state",)
    search_fields = ("title", "requester__username", "pi__username", "project__code")
    inlines = [ProjectRequestAmountInline, ProjectRequestTransitionInline]


class BudgetPeriodInline(ReadOnlyInline):
    model = BudgetPeriod


@admin.register(Allocation)
class AllocationAdmin(ReadOnlyAdmin):
    list_display = ("project", "pool", "period_start", "period_end", "granted_su", "granted_by")
    list_filter = ("pool",)
    search_fields = ("project__code",)
    inlines = [BudgetPeriodInline]


@admin.register(Adjustment)
class AdjustmentAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "project", "kind", "amount_su", "actor", "reason")
    list_filter = ("kind",)
    search_fields = ("project__code", "reason")


@admin.register(ThresholdNotice)
class ThresholdNoticeAdmin(ReadOnlyAdmin):
    list_display = ("notified_at", "budget_period", "threshold", "percent_used", "recipients")


@admin.register(EnforcementAction)
class EnforcementActionAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "project", "pool", "kind", "status", "command", "exit_code")
    list_filter = ("status", "kind", "pool")
    actions = ["run", "dismiss"]

    @admin.action(description="Run (where the cluster enables enforcement)")
    def run(self, request: HttpRequest, queryset: Any) -> None:
        for action in queryset:
            enforcement_execute(action=action, actor=request.user)  # type: ignore[arg-type]
        self.message_user(request, "Done; see each action's status and output.", messages.INFO)

    @admin.action(description="Dismiss")
    def dismiss(self, request: HttpRequest, queryset: Any) -> None:
        for action in queryset:
            enforcement_dismiss(action=action, actor=request.user)  # type: ignore[arg-type]


# --- Dynamic priority: set on /allocations/priorities/ (and the API), read here. ---


@admin.register(PriorityPolicy)
class PriorityPolicyAdmin(ReadOnlyAdmin):
    list_display = ("cluster", "base_priority", "k1", "k2", "c0", "c1", "c2",
                    "execution_enabled", "updated_at", "updated_by")  # fmt: skip


@admin.register(ProfilingCoefficient)
class ProfilingCoefficientAdmin(ReadOnlyAdmin):
    list_display = ("posted_at", "cluster", "project", "job", "k_prof", "source", "posted_by")
    list_filter = ("cluster", "source")
    search_fields = ("project__code", "note")
    raw_id_fields = ("job",)


@admin.register(PriorityAction)
class PriorityActionAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "cluster", "project", "k_prof", "priority", "status",
                    "command", "exit_code")  # fmt: skip
    list_filter = ("status", "cluster")
    search_fields = ("project__code", "command")
    actions = ["run", "dismiss"]

    @admin.action(description="Run (where the cluster's priority policy enables execution)")
    def run(self, request: HttpRequest, queryset: Any) -> None:
        self._decide(request, queryset, priority_action_execute)

    @admin.action(description="Dismiss")
    def dismiss(self, request: HttpRequest, queryset: Any) -> None:
        self._decide(request, queryset, priority_action_dismiss)

    def _decide(self, request: HttpRequest, queryset: Any, decide: Any) -> None:
        for action in queryset.filter(status=PriorityAction.Status.PROPOSED):
            try:
                decide(action=action, reviewed_by=request.user)
            except PriorityError as error:
                self.message_user(request, f"{action.command}: {error}", messages.ERROR)
        self.message_user(request, "Done; see each action's status and output.", messages.INFO)

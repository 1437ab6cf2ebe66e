"""Input and output serializers of the projects, balances, allocations and adjustments API
(allocations/grants/api.py, docs/api.md).

Objects named in a request body are looked up among those the caller may see: a project code
of someone else's project is "unknown", exactly like one that does not exist. The rules (who
may act, amounts) stay in the services."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounting.clusters.serializers import SU_DIGITS, SU_PLACES
from allocations.grants.budget import GrantBalance, GrantStatus
from allocations.grants.selectors import grant_balances_of
from allocations.models import Adjustment, Allocation, BudgetPeriod
from kit.api import ApiModelSerializer, EndsAfterStart, QuerySerializer, SlugField, slug_of
from projects.access import projects_visible
from projects.models import INVITABLE_ROLES, Invitation, Membership, Project, ResourcePool


def _su_field(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=SU_DIGITS, decimal_places=SU_PLACES, **kwargs)


def su_out_field(**kwargs: Any) -> serializers.DecimalField:
    """An SU figure computed by the portal (sums can outgrow a column's digits)."""
    return serializers.DecimalField(max_digits=None, decimal_places=SU_PLACES, **kwargs)


# --- Looking up what a request names --------------------------------------------------------


@extend_schema_field(OpenApiTypes.STR)
class VisibleProjectField(SlugField):
    """A project code among the caller's projects (any project for staff)."""

    default_error_messages = {
        "does_not_exist": "unknown project {value}",
        "invalid": "a project code is a string",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("slug_field", "code")
        super().__init__(**kwargs)

    def get_queryset(self) -> QuerySet[Project]:
        return projects_visible(user=self.context["request"].user)


@extend_schema_field(OpenApiTypes.STR)
class ProjectCodeField(SlugField):
    """Any project's code: a transfer may go to a project the caller does not belong to."""

    default_error_messages = VisibleProjectField.default_error_messages

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("slug_field", "code")
        kwargs.setdefault("queryset", Project.objects.all())
        super().__init__(**kwargs)


def _pool_field(**kwargs: Any) -> serializers.SlugRelatedField[ResourcePool]:
    return SlugField(
        slug_field="name", queryset=ResourcePool.objects.all(), help_text="resource pool name",
        error_messages={"does_not_exist": "unknown pool {value}"}, **kwargs,
    )  # fmt: skip


def user_field(**kwargs: Any) -> serializers.SlugRelatedField[User]:
    """An active user named by username."""
    return SlugField(
        slug_field="username", queryset=User.objects.filter(is_active=True),
        error_messages={"does_not_exist": "unknown user {value}"}, **kwargs,
    )  # fmt: skip


class PoolAmountSerializer(serializers.Serializer):
    pool = _pool_field()
    su = _su_field(min_value=0)


def pool_amounts(items: list[dict[str, Any]], what: str) -> dict[ResourcePool, Any]:
    """``[{pool, su}, ...]`` as one amount per pool; a pool named twice is refused."""
    amounts: dict[ResourcePool, Any] = {}
    for item in items:
        if item["pool"] in amounts:
            raise serializers.ValidationError(f"{item['pool']} is named twice in {what}")
        amounts[item["pool"]] = item["su"]
    return amounts


# --- Projects and members -------------------------------------------------------------------


class ProjectOutputSerializer(ApiModelSerializer):
    pi = slug_of("username", allow_null=True)

    class Meta:
        model = Project
        fields = [
            "code", "title", "pi", "status", "status_since", "field_of_science", "finance_code",
            "created_at",
        ]  # fmt: skip


class ProjectCreateInputSerializer(serializers.Serializer):
    # The code's rules (a Slurm account's characters, not taken) are project_create's.
    code = serializers.CharField(max_length=64, help_text="the Slurm account")
    title = serializers.CharField(required=False, allow_blank=True, max_length=300, default="")
    pi = user_field(required=False, allow_null=True, help_text="username of the PI")
    field_of_science = serializers.CharField(
        required=False, allow_blank=True, max_length=120, default=""
    )
    finance_code = serializers.CharField(
        required=False, allow_blank=True, max_length=64, default="",
        help_text="the finance office's code the project is billed to (monthly statements)",
    )  # fmt: skip


class ProjectUpdateInputSerializer(serializers.Serializer):
    """What staff change on a project; a field left out stays. The code never changes."""

    title = serializers.CharField(required=False, allow_blank=True, max_length=300)
    field_of_science = serializers.CharField(required=False, allow_blank=True, max_length=120)
    finance_code = serializers.CharField(required=False, allow_blank=True, max_length=64)
    pi = user_field(
        required=False, help_text="username of the new PI (the PI before stays a member)"
    )


class MemberOutputSerializer(ApiModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    full_name = serializers.CharField(source="user.get_full_name", read_only=True)

    class Meta:
        model = Membership
        fields = ["username", "full_name", "role", "joined_at"]


class MemberAddInputSerializer(serializers.Serializer):
    username = user_field()
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class MemberRoleInputSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=INVITABLE_ROLES)


class InvitationInputSerializer(serializers.Serializer):
    email = serializers.EmailField(max_length=254)
    role = serializers.ChoiceField(
        choices=INVITABLE_ROLES,
        default=Membership.Role.MEMBER,
    )


class InvitationOutputSerializer(ApiModelSerializer):
    invited_by = serializers.CharField(source="invited_by.username", read_only=True)
    accepted_by = serializers.CharField(
        source="accepted_by.username", read_only=True, allow_null=True, default=None
    )
    state = serializers.ChoiceField(
        choices=["pending", "accepted", "revoked", "expired"], read_only=True
    )

    class Meta:
        model = Invitation
        fields = ["id", "email", "role", "state", "invited_by", "created_at", "expires_at",
                  "accepted_by", "accepted_at", "revoked_at"]  # fmt: skip


class InvitationSentSerializer(serializers.Serializer):
    invitation = InvitationOutputSerializer()
    link = serializers.URLField(help_text="the signed link mailed to the address")


# --- Balances -------------------------------------------------------------------------------


class BalanceQuerySerializer(QuerySerializer):
    on = serializers.DateField(required=False, help_text="the day (default: today on the cluster)")
    periods = serializers.ChoiceField(
        choices=["current", "all"], default="current",
        help_text="all: every budget period of the grant covering the day",
    )  # fmt: skip


class BalanceSerializer(serializers.Serializer):
    """``allocations.grants.budget.Balance``: one budget period of one pool."""

    period_start = serializers.DateField(source="start")
    period_end = serializers.DateField(source="end", help_text="the day after the last day")
    period_last_day = serializers.DateField(
        source="last_day", help_text="the last day: what the pages and su-balance show"
    )
    budget_su = su_out_field()
    carried_in_su = su_out_field()
    adjustments_su = su_out_field(help_text="refunds, top-ups, transfers (+/-)")
    available_su = su_out_field(help_text="budget + carried in + adjustments")
    used_su = su_out_field(help_text="charged jobs, from the daily roll-ups")
    pending_su = su_out_field(help_text="so far, of jobs still running (not deducted)")
    remaining_su = su_out_field(help_text="available - used")
    reserved_su = su_out_field(
        help_text="what queued and running jobs hold: each at its requested size and time "
        "limit (without a limit, what it used so far); in the current period only"
    )
    free_su = su_out_field(help_text="remaining - reserved: left once those jobs end")
    percent_used = serializers.DecimalField(max_digits=None, decimal_places=2, allow_null=True)
    used_last_7_days_su = su_out_field()
    used_last_30_days_su = su_out_field()
    burn_rate_7_days = su_out_field(help_text="SU per day")
    burn_rate_30_days = su_out_field(help_text="SU per day")
    projected_exhaustion = serializers.DateField(
        allow_null=True, help_text="at the higher burn rate; null if not before the period ends"
    )
    on = serializers.DateField(help_text="the day this balance is for")
    used_cost = su_out_field(
        help_text="money cost of the period's booked jobs (charged and refunded) under the "
        "cluster's cost model, in the pool's currency (0 without a model)"
    )


_GRANT_STATUSES = [status.value for status in GrantStatus]


class GrantBalanceSerializer(serializers.Serializer):
    """``allocations.grants.budget.GrantBalance``: one grant on one pool, as a whole."""

    id = serializers.IntegerField(source="allocation_id", help_text="the allocation's id")
    start = serializers.DateField()
    end = serializers.DateField(help_text="the day after the last day")
    last_day = serializers.DateField()
    status = serializers.ChoiceField(
        choices=_GRANT_STATUSES, help_text="relative to today on the pool's cluster"
    )
    granted_su = su_out_field()
    adjustments_su = su_out_field(help_text="refunds, top-ups, transfers over its periods")
    used_su = su_out_field()
    remaining_su = su_out_field(help_text="its budget periods' budgets + adjustments - used")


class PoolBalanceSerializer(serializers.Serializer):
    pool = serializers.CharField()
    cluster = serializers.CharField()
    partitions = serializers.ListField(child=serializers.CharField())
    account = serializers.CharField(help_text="the Slurm account: sbatch --account=...")
    submit_with = serializers.ListField(
        child=serializers.CharField(),
        help_text="sbatch --account=... --partition=..., one line per partition of the pool",
    )
    current = BalanceSerializer(allow_null=True, help_text="null: no budget period that day")
    periods = BalanceSerializer(many=True, help_text="the current one, or all with periods=all")
    currency = serializers.CharField(
        allow_null=True, help_text="of the cluster's cost model (used_cost); null without one"
    )
    grants = GrantBalanceSerializer(
        many=True, help_text="every grant on the pool, past, current and future (periods=all)"
    )


class ProjectBalanceOutputSerializer(serializers.Serializer):
    project = serializers.CharField(source="project.code")
    title = serializers.CharField(source="project.title")
    pools = PoolBalanceSerializer(many=True)


# --- Allocations ----------------------------------------------------------------------------


class BudgetPeriodOutputSerializer(ApiModelSerializer):
    class Meta:
        model = BudgetPeriod
        fields = ["id", "start", "end", "budget_su"]


_SU_OUT = su_out_field()


class AllocationOutputSerializer(ApiModelSerializer):
    """A grant, with its figures as a whole (``context["grants"]``: allocation id ->
    ``GrantBalance``, from the one balance selector; read per grant when missing)."""

    project = slug_of("code")
    pool = slug_of("name")
    cluster = serializers.CharField(source="pool.cluster.name", read_only=True)
    granted_by = slug_of("username")
    budget_periods = BudgetPeriodOutputSerializer(many=True, read_only=True)
    period_last_day = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField()
    adjustments_su = serializers.SerializerMethodField()
    used_su = serializers.SerializerMethodField()
    remaining_su = serializers.SerializerMethodField()

    def _grant(self, allocation: Allocation) -> GrantBalance:
        grants = self.context.get("grants")
        if grants is not None and allocation.pk in grants:
            return grants[allocation.pk]
        # Rendered without the view's figures (one balance read per project of a page): read
        # this grant's project once per serializer.
        read: dict[int, GrantBalance] = self.__dict__.setdefault("_grants_read", {})
        if allocation.pk not in read:
            read.update(grant_balances_of(allocations=[allocation]))
        return read[allocation.pk]

    @extend_schema_field(OpenApiTypes.DATE)
    def get_period_last_day(self, allocation: Allocation) -> Any:
        return serializers.DateField().to_representation(self._grant(allocation).last_day)

    @extend_schema_field(
        serializers.ChoiceField(
            choices=_GRANT_STATUSES, help_text="relative to today on the pool's cluster"
        )
    )
    def get_status(self, allocation: Allocation) -> str:
        return self._grant(allocation).status.value

    @extend_schema_field(su_out_field(help_text="refunds, top-ups, transfers (+/-)"))
    def get_adjustments_su(self, allocation: Allocation) -> Any:
        return _SU_OUT.to_representation(self._grant(allocation).adjustments_su)

    @extend_schema_field(su_out_field(help_text="charged jobs in the grant's period"))
    def get_used_su(self, allocation: Allocation) -> Any:
        return _SU_OUT.to_representation(self._grant(allocation).used_su)

    @extend_schema_field(su_out_field(help_text="its budget periods' budgets + adjustments - used"))
    def get_remaining_su(self, allocation: Allocation) -> Any:
        return _SU_OUT.to_representation(self._grant(allocation).remaining_su)

    class Meta:
        model = Allocation
        fields = [
            "id",
            "project",
            "pool",
            "cluster",
            "request",
            "period_start",
            "period_end",
            "period_last_day",
            "status",
            "granted_su",
            "adjustments_su",
            "used_su",
            "remaining_su",
            "granted_by",
            "granted_at",
            "reason",
            "budget_periods",
        ]


class AllocationGrantInputSerializer(EndsAfterStart):
    project = VisibleProjectField()
    pool = _pool_field()
    amount = _su_field(min_value=0)
    period_start = serializers.DateField()
    period_end = serializers.DateField(help_text="the day after the last day")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=5000, default="")
    custom_budgets = serializers.ListField(
        child=_su_field(min_value=0), required=False, allow_null=True, max_length=1200,
        help_text="SU per budget period, for pools that split grants by hand",
    )  # fmt: skip


# --- Adjustments ----------------------------------------------------------------------------


class AdjustmentOutputSerializer(ApiModelSerializer):
    project = slug_of("code")
    pool = serializers.CharField(source="budget_period.allocation.pool.name", read_only=True)
    period_start = serializers.DateField(source="budget_period.start", read_only=True)
    period_end = serializers.DateField(source="budget_period.end", read_only=True)
    actor = slug_of("username")

    class Meta:
        model = Adjustment
        fields = [
            "id",
            "project",
            "pool",
            "period_start",
            "period_end",
            "kind",
            "amount_su",
            "job",
            "transfer_id",
            "actor",
            "reason",
            "created_at",
        ]


class RefundInputSerializer(serializers.Serializer):
    project = VisibleProjectField()
    pool = _pool_field()
    reason = serializers.CharField(max_length=5000)
    amount = _su_field(required=False, allow_null=True, min_value=0, help_text="or give a job")
    job = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**62,
        help_text="id of a job (GET /api/v1/jobs/): its whole charge, once",
    )  # fmt: skip
    on = serializers.DateField(required=False, help_text="budget period of this day (today)")


class TopUpInputSerializer(serializers.Serializer):
    project = VisibleProjectField()
    pool = _pool_field()
    amount = _su_field(min_value=0)
    reason = serializers.CharField(max_length=5000)
    on = serializers.DateField(required=False, help_text="budget period of this day (today)")


class TransferInputSerializer(serializers.Serializer):
    source = VisibleProjectField(  # type: ignore[assignment]  # a field named like Field.source
        help_text="your project, which gives the SU"
    )
    target = ProjectCodeField(help_text="the project that receives them")
    pool = _pool_field()
    amount = _su_field(min_value=0)
    reason = serializers.CharField(max_length=5000)
    on = serializers.DateField(required=False, help_text="budget periods of this day (today)")


class TransferOutputSerializer(serializers.Serializer):
    transfer_out = AdjustmentOutputSerializer()
    transfer_in = AdjustmentOutputSerializer()


# --- Rate drafts: a rate change seen before it ships (docs/costs.md) --------------------------


class RatesImpactInputSerializer(serializers.Serializer):
    cluster = serializers.SlugField(max_length=64, help_text="the portal's cluster")
    spec = serializers.JSONField(
        help_text="the draft: a cluster spec document, as examples/clusters/*.json"
    )
    cost_model = serializers.CharField(
        required=False, allow_blank=True, max_length=1024 * 1024, trim_whitespace=False,
        help_text="a draft cost model (docs/costs.md); absent: the cluster's current one",
    )  # fmt: skip
    months = serializers.IntegerField(min_value=1, max_value=120, default=12)
    keep = serializers.BooleanField(
        default=False, help_text="keep the draft (GET or DELETE /api/v1/rate-drafts/{id}/)"
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=500)

    def validate_spec(self, value: Any) -> Any:
        # PostgreSQL's jsonb holds no NUL character; no spec field may hold one either.
        if "\\u0000" in json.dumps(value):
            raise serializers.ValidationError("must not contain a NUL character")
        return value

    def validate_cost_model(self, value: str) -> str:
        if "\x00" in value:
            raise serializers.ValidationError("must not contain a NUL character")
        return value


class ImpactMonthsQuerySerializer(QuerySerializer):
    months = serializers.IntegerField(min_value=1, max_value=120, default=12)


class ImpactProjectSerializer(serializers.Serializer):
    project = serializers.CharField()
    pool = serializers.CharField(help_text='"no pool" for partitions in none')
    jobs = serializers.IntegerField()
    charged_su = su_out_field()
    draft_su = su_out_field()
    change_su = su_out_field()
    change_percent = serializers.DecimalField(max_digits=None, decimal_places=2, allow_null=True)
    unpriced_jobs = serializers.IntegerField(help_text="jobs of shapes the draft cannot hold")
    problems = serializers.ListField(child=serializers.CharField())
    current_money = serializers.DecimalField(max_digits=None, decimal_places=6, allow_null=True)
    draft_money = serializers.DecimalField(max_digits=None, decimal_places=6, allow_null=True)


class ImpactExhaustionSerializer(serializers.Serializer):
    project = serializers.CharField()
    pool = serializers.CharField()
    remaining_su = su_out_field()
    burn_rate_su_per_day = su_out_field()
    draft_burn_rate_su_per_day = su_out_field()
    exhaustion = serializers.DateField(
        allow_null=True, help_text="at today's burn rate; null: not before the period ends"
    )
    draft_exhaustion = serializers.DateField()
    period_end = serializers.DateField(help_text="exclusive")
    days_earlier = serializers.IntegerField()


class ImpactWeightsSerializer(serializers.Serializer):
    partition = serializers.CharField()
    before = serializers.CharField(allow_null=True, help_text="null: a partition new in the draft")
    after = serializers.CharField()


class RatesImpactOutputSerializer(serializers.Serializer):
    draft = serializers.IntegerField(allow_null=True, help_text="the kept draft's id, or null")
    cluster = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField(help_text="exclusive")
    months = serializers.IntegerField()
    currency = serializers.CharField(allow_null=True)
    money_note = serializers.CharField()
    projects = ImpactProjectSerializer(many=True)
    earlier_exhaustion = ImpactExhaustionSerializer(many=True)
    tres_billing_weights = ImpactWeightsSerializer(many=True)

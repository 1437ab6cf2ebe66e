"""Input and output serializers of the rounds, requests and reviews API
(allocations/rounds/api.py, docs/api.md). The rules of the allocation process (who may act,
states, amounts) stay in ``allocations.rounds.services``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounting.clusters.serializers import SU_PLACES, PlannedJobSerializer
from allocations.access import requests_visible
from allocations.grants.serializers import (
    PoolAmountSerializer,
    VisibleProjectField,
    pool_amounts,
    su_out_field,
    user_field,
)
from allocations.models import (
    AllocationRequest,
    AllocationRound,
    ProgressReport,
    RequestAmount,
    RequestEstimate,
    RequestTransition,
    Review,
    RoundPool,
    WhatIfDraft,
)
from kit.api import ApiModelSerializer, EndsAfterStart, UtcDateTimeField, slug_of
from projects.models import ResourcePool

# --- Rounds ---------------------------------------------------------------------------------


class RoundPoolOutputSerializer(ApiModelSerializer):
    pool = slug_of("name")

    class Meta:
        model = RoundPool
        fields = ["pool", "available_su"]


class RoundOutputSerializer(ApiModelSerializer):
    pools = RoundPoolOutputSerializer(many=True, read_only=True)

    class Meta:
        model = AllocationRound
        fields = [
            "id",
            "name",
            "opens_at",
            "closes_at",
            "period_start",
            "period_end",
            "requires_progress_report",
            "pools",
            "created_at",
        ]


class RoundCreateInputSerializer(EndsAfterStart):
    # The API's convention for spans ("must be after period_start" on the end field); the same
    # rules are round_create's too, on the same fields, for the staff page and PATCH. A name
    # taken is round_create's alone.
    spans = (("opens_at", "closes_at"), ("period_start", "period_end"))
    name = serializers.CharField(max_length=200)
    opens_at = UtcDateTimeField()
    closes_at = UtcDateTimeField()
    period_start = serializers.DateField(help_text="first day the grants cover")
    period_end = serializers.DateField(help_text="the day after the last day the grants cover")
    available = PoolAmountSerializer(many=True, help_text="SU available per pool")
    chair = user_field()
    committee = serializers.ListField(child=user_field(), required=False, max_length=200)
    requires_progress_report = serializers.BooleanField(
        default=False, help_text="every renewal in the round carries a progress report"
    )

    def validate_available(self, value: list[dict[str, Any]]) -> dict[ResourcePool, Any]:
        return pool_amounts(value, "available")


class RoundUpdateInputSerializer(serializers.Serializer):
    """What staff change on a round; a field left out stays as it is."""

    name = serializers.CharField(max_length=200, required=False)
    opens_at = UtcDateTimeField(required=False)
    closes_at = UtcDateTimeField(required=False)
    period_start = serializers.DateField(required=False)
    period_end = serializers.DateField(required=False)
    available = PoolAmountSerializer(many=True, required=False, help_text="SU offered per pool")
    requires_progress_report = serializers.BooleanField(
        required=False, help_text="every renewal in the round carries a progress report"
    )

    def validate_available(self, value: list[dict[str, Any]]) -> dict[ResourcePool, Any]:
        return pool_amounts(value, "available")


class CommitteeSeatInputSerializer(serializers.Serializer):
    username = user_field()
    chair = serializers.BooleanField(
        default=False, help_text="the chair before stays on the committee"
    )


class RoundPoolSummarySerializer(serializers.Serializer):
    pool = serializers.CharField(source="pool.name")
    available_su = su_out_field()
    requested_su = su_out_field()
    granted_su = su_out_field()


class RoundRequestSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField(source="request.pk")
    project = serializers.CharField(source="request.project.code")
    kind = serializers.CharField(source="request.kind")
    state = serializers.CharField(source="request.state")
    requested = serializers.SerializerMethodField()
    average_score = serializers.DecimalField(max_digits=4, decimal_places=2, allow_null=True)
    reviews = serializers.IntegerField(allow_null=True, help_text="null: a request in conflict")
    conflict = serializers.BooleanField(
        help_text="a request of the caller's own project: its scores are not shown"
    )

    @extend_schema_field(PoolAmountSerializer(many=True))
    def get_requested(self, summary: Any) -> list[dict[str, Any]]:
        names = self.context["pool_names"]
        return [
            {"pool": names.get(pool_id, str(pool_id)), "su": f"{amount:.{SU_PLACES}f}"}
            for pool_id, amount in sorted(summary.requested.items())
        ]


class RoundOverviewOutputSerializer(serializers.Serializer):
    round = RoundOutputSerializer()
    pools = RoundPoolSummarySerializer(many=True)
    requests = RoundRequestSummarySerializer(many=True)


# --- Requests and reviews -------------------------------------------------------------------


class RequestAmountOutputSerializer(ApiModelSerializer):
    pool = slug_of("name")

    class Meta:
        model = RequestAmount
        fields = ["pool", "requested_su", "granted_su"]


class RequestEstimateOutputSerializer(ApiModelSerializer):
    cluster = serializers.CharField(source="partition.cluster.name", read_only=True)
    partition = slug_of("name")

    class Meta:
        model = RequestEstimate
        fields = [
            "id",
            "cluster",
            "partition",
            "description",
            "jobs",
            "nodes",
            "hours",
            "cores_per_node",
            "gpus_per_node",
            "memory_per_node_mb",
            "service_units",
        ]


class RequestTransitionOutputSerializer(ApiModelSerializer):
    actor = slug_of("username")

    class Meta:
        model = RequestTransition
        fields = ["from_state", "to_state", "actor", "at", "note"]


class ProgressReportOutputSerializer(serializers.Serializer):
    text = serializers.CharField()
    outputs = serializers.SerializerMethodField(help_text="ids of the project's research outputs")
    updated_by = serializers.CharField(source="updated_by.username")
    updated_at = UtcDateTimeField()

    def get_outputs(self, report: ProgressReport) -> list[int]:
        return sorted(output.pk for output in report.outputs.all())


class RequestOutputSerializer(ApiModelSerializer):
    round_name = serializers.CharField(source="round.name", read_only=True, allow_null=True)
    project = slug_of("code")
    created_by = slug_of("username")
    amounts = RequestAmountOutputSerializer(many=True, read_only=True)
    estimates = RequestEstimateOutputSerializer(many=True, read_only=True)
    transitions = RequestTransitionOutputSerializer(many=True, read_only=True)
    progress_report = serializers.SerializerMethodField(
        help_text="a renewal's progress report; null without one"
    )

    class Meta:
        model = AllocationRequest
        fields = [
            "id",
            "round",
            "round_name",
            "project",
            "kind",
            "state",
            "grant",
            "new_end",
            "appeal_of",
            "justification",
            "created_by",
            "created_at",
            "decided_at",
            "decision_reason",
            "amounts",
            "estimates",
            "transitions",
            "progress_report",
        ]

    @extend_schema_field(ProgressReportOutputSerializer(allow_null=True))
    def get_progress_report(self, request: AllocationRequest) -> dict[str, Any] | None:
        try:
            report = request.progress_report
        except ProgressReport.DoesNotExist:
            return None
        return dict(ProgressReportOutputSerializer(report).data)


@extend_schema_field(OpenApiTypes.INT)
class VisibleRequestField(serializers.PrimaryKeyRelatedField):
    """A request the caller may see (see ``requests_visible``)."""

    default_error_messages = {
        "does_not_exist": "unknown request {pk_value}",
        "incorrect_type": "a request id is a number",
    }

    def get_queryset(self) -> QuerySet[AllocationRequest]:
        return requests_visible(user=self.context["request"].user)


class RequestCreateInputSerializer(serializers.Serializer):
    """What each kind needs (docs/api.md): ``new`` a ``round``; ``top_up`` and ``extension``
    one pool in ``amounts`` (the grant in force there), an extension its ``new_end``;
    ``renewal`` nothing more (the next open round, amounts from the grants in force);
    ``appeal`` the decided request it appeals (``appeal_of``; the project follows from it).
    The services check the rules; this checks that what a kind needs is there."""

    kind = serializers.ChoiceField(
        choices=AllocationRequest.Kind.choices, default=AllocationRequest.Kind.NEW
    )
    round = serializers.PrimaryKeyRelatedField(
        queryset=AllocationRound.objects.all(), required=False, allow_null=True, default=None
    )
    project = VisibleProjectField(required=False)
    new_end = serializers.DateField(
        required=False, allow_null=True, default=None,
        help_text="an extension: the grant's new end (the day after its last day)",
    )  # fmt: skip
    appeal_of = VisibleRequestField(required=False, allow_null=True, default=None)
    justification = serializers.CharField(
        required=False, allow_blank=True, max_length=50_000, default=""
    )
    amounts = PoolAmountSerializer(many=True, required=False, help_text="SU requested per pool")

    def validate_amounts(self, value: list[dict[str, Any]]) -> dict[ResourcePool, Any]:
        return pool_amounts(value, "amounts")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs["kind"]
        Kind = AllocationRequest.Kind
        errors: dict[str, str] = {}
        if kind == Kind.APPEAL:
            appealed = attrs.get("appeal_of")
            if appealed is None:
                errors["appeal_of"] = "an appeal names the decided request it appeals"
            elif "project" in attrs and attrs["project"] != appealed.project:
                errors["project"] = f"request {appealed.pk} is not a request of this project"
            else:
                attrs["project"] = appealed.project
        elif "project" not in attrs:
            errors["project"] = "this field is required"
        if kind == Kind.NEW and attrs.get("round") is None:
            errors["round"] = "an application names its round"
        if kind in (Kind.TOP_UP, Kind.EXTENSION, Kind.APPEAL) and attrs.get("round") is not None:
            errors["round"] = f"a {Kind(kind).label} is not made in a round"
        if kind in (Kind.TOP_UP, Kind.EXTENSION) and len(attrs.get("amounts") or {}) != 1:
            errors["amounts"] = f"a {Kind(kind).label} names one pool and its SU"
        if kind == Kind.EXTENSION and attrs.get("new_end") is None:
            errors["new_end"] = "an extension names the grant's new end"
        if kind != Kind.EXTENSION and attrs.get("new_end") is not None:
            errors["new_end"] = "only an extension has a new end"
        if kind != Kind.APPEAL and attrs.get("appeal_of") is not None:
            errors["appeal_of"] = "only an appeal names a decision"
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class RequestUpdateInputSerializer(serializers.Serializer):
    justification = serializers.CharField(required=False, allow_blank=True, max_length=50_000)
    amounts = PoolAmountSerializer(many=True, required=False, help_text="SU requested per pool")

    def validate_amounts(self, value: list[dict[str, Any]]) -> dict[ResourcePool, Any]:
        return pool_amounts(value, "amounts")


class ProgressReportInputSerializer(serializers.Serializer):
    """A draft renewal's progress report; sent again, it replaces the text and the outputs."""

    text = serializers.CharField(
        max_length=50_000, help_text="what the project did with the grant it renews"
    )
    outputs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), required=False,
        default=list, max_length=1000, help_text="ids of the project's own research outputs",
    )  # fmt: skip


class RequestEstimateInputSerializer(PlannedJobSerializer):
    """One estimate line: ``jobs`` times the quote of one job (energy model) on a partition."""

    jobs = serializers.IntegerField(min_value=1, max_value=10**6)
    description = serializers.CharField(
        required=False, allow_blank=True, max_length=200, default=""
    )


class RequestDecideInputSerializer(serializers.Serializer):
    granted = PoolAmountSerializer(many=True, help_text="SU granted per pool (0: none)")
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=5000, default="",
        help_text="required when the grant differs from the request",
    )  # fmt: skip

    def validate_granted(self, value: list[dict[str, Any]]) -> dict[ResourcePool, Any]:
        return pool_amounts(value, "granted")


class ReviewOutputSerializer(ApiModelSerializer):
    round = serializers.IntegerField(source="request.round_id", read_only=True)
    project = serializers.CharField(source="request.project.code", read_only=True)
    reviewer = slug_of("username")

    class Meta:
        model = Review
        fields = ["id", "request", "round", "project", "reviewer", "score", "comment", "created_at"]


class ReviewInputSerializer(serializers.Serializer):
    request = VisibleRequestField()
    score = serializers.IntegerField(min_value=1, max_value=5)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=20_000, default="")


# --- Reviewers and the applicant's record ---------------------------------------------------


class ReviewAssignInputSerializer(serializers.Serializer):
    username = user_field(help_text="a member of the request's round's committee")


class ReviewAssignmentOutputSerializer(serializers.Serializer):
    username = serializers.CharField(source="reviewer.username")
    assigned_by = serializers.CharField(source="assigned_by.username")
    assigned_at = UtcDateTimeField()


class RecordProjectSerializer(serializers.Serializer):
    code = serializers.CharField()
    title = serializers.CharField()
    pi = serializers.CharField()
    field_of_science = serializers.CharField()


class RecordQuarterSerializer(serializers.Serializer):
    name = serializers.CharField(source="label", help_text='e.g. "2026 Q2"')
    start = serializers.DateField()
    end = serializers.DateField(help_text="the day after the quarter's last day")


class RecordPoolQuarterSerializer(serializers.Serializer):
    granted_su = su_out_field()
    used_su = su_out_field()
    share_used = serializers.DecimalField(
        max_digits=None, decimal_places=2, allow_null=True,
        help_text="used / granted (1.00: all of it); null without a grant",
    )  # fmt: skip


class RecordPoolSerializer(serializers.Serializer):
    pool = serializers.CharField(source="pool_name")
    quarters = RecordPoolQuarterSerializer(many=True, help_text="in the order of `quarters`")


def _ratio_out(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=None, decimal_places=4, allow_null=True, **kwargs)


class RecordEfficiencySerializer(serializers.Serializer):
    quarter = serializers.CharField(source="quarter.label")
    jobs = serializers.IntegerField(source="totals.jobs")
    measured_jobs = serializers.IntegerField(source="totals.measured_jobs")
    cpu = _ratio_out(source="totals.cpu")
    memory = _ratio_out(source="totals.memory")
    gpu = _ratio_out(source="totals.gpu")
    walltime = _ratio_out(source="totals.walltime")
    su_left_on_the_table = su_out_field(source="totals.su_left_on_the_table")


class RepricedPartitionSerializer(serializers.Serializer):
    partition = serializers.CharField(source="partition_name")
    version = serializers.IntegerField(source="version_id", allow_null=True)
    version_label = serializers.CharField()
    jobs = serializers.IntegerField()
    charged_su = su_out_field()
    repriced_su = su_out_field()
    unpriced_jobs = serializers.IntegerField()


class RepricingSerializer(serializers.Serializer):
    start = serializers.DateField()
    end = serializers.DateField(help_text="the day after the last day")
    at = serializers.DateField(help_text="the day whose rate versions price the jobs")
    charged_su = su_out_field()
    repriced_su = su_out_field()
    partitions = RepricedPartitionSerializer(many=True)


class RecordAskSerializer(serializers.Serializer):
    pool = serializers.CharField(source="pool_name")
    requested_su = su_out_field()
    used_last_year_su = su_out_field()
    times_last_year = serializers.DecimalField(
        max_digits=None, decimal_places=2, allow_null=True,
        help_text="requested / last year's use; null: no use in the last year",
    )  # fmt: skip
    in_words = serializers.CharField()


class RecordOutputSerializer(serializers.Serializer):
    kind = serializers.CharField()
    title = serializers.CharField()
    year = serializers.IntegerField(allow_null=True)
    venue = serializers.CharField()
    doi = serializers.CharField()
    url = serializers.CharField()


class RecordProgressReportSerializer(serializers.Serializer):
    text = serializers.CharField()
    updated_at = UtcDateTimeField()


class ApplicantRecordOutputSerializer(serializers.Serializer):
    """The applicant's record (docs/allocations.md, "The applicant's record")."""

    request = serializers.IntegerField(source="request.pk")
    project = RecordProjectSerializer()
    day = serializers.DateField(help_text="the request's day: the history ends before it")
    quarters = RecordQuarterSerializer(many=True)
    pools = RecordPoolSerializer(many=True)
    efficiency = RecordEfficiencySerializer(many=True)
    last_year_start = serializers.DateField()
    repricing = RepricingSerializer()
    asks = RecordAskSerializer(many=True)
    ask_total = RecordAskSerializer()
    estimate_total_su = su_out_field(allow_null=True)
    outputs_since = serializers.DateField(allow_null=True)
    outputs = RecordOutputSerializer(many=True)
    progress_report = RecordProgressReportSerializer(allow_null=True)


# --- The chair's what-if ---------------------------------------------------------------------


class WhatIfInputSerializer(serializers.Serializer):
    method = serializers.ChoiceField(choices=WhatIfDraft.Method.choices)
    threshold_su = serializers.DecimalField(
        max_digits=24, decimal_places=6, required=False, default=Decimal(0),
        help_text="protect_small: requests below it (on a pool) are granted in full",
    )  # fmt: skip
    exponent = serializers.DecimalField(
        max_digits=6, decimal_places=3, required=False, default=Decimal(1),
        help_text="score_weighted: k in g(score) = (score / 5) ** k, from 0 to 10",
    )  # fmt: skip
    floor_su = serializers.DecimalField(
        max_digits=24, decimal_places=6, required=False, default=Decimal(0),
        help_text="every request gets at least min(floor, request) on each pool",
    )  # fmt: skip


class WhatIfProposalOutputSerializer(serializers.Serializer):
    """A proposal, from its object or from a row of ``what_if_proposal_rows``."""

    id = serializers.IntegerField()
    request = serializers.IntegerField()
    project = serializers.CharField()
    pool = serializers.CharField()
    requested_su = su_out_field()
    score = serializers.DecimalField(
        max_digits=4, decimal_places=2, allow_null=True, help_text="mean review score"
    )
    proposed_su = su_out_field()
    reason = serializers.CharField()
    edited = serializers.BooleanField(help_text="the chair changed the method's figure")


def what_if_proposal_out(row: dict[str, Any]) -> dict[str, Any]:
    """``WhatIfProposalOutputSerializer``'s output for a row, written out: a draft of a round
    of 500 requests has 1,500 proposals, and DRF's generic rendering of them took longer than
    the what-if itself (tests/api/test_what_if_api.py compares the two)."""
    score = row["score"]
    return {
        "id": row["id"],
        "request": row["request"],
        "project": row["project"],
        "pool": row["pool"],
        "requested_su": f"{row['requested_su']:.{SU_PLACES}f}",
        "score": None if score is None else f"{score:.2f}",
        "proposed_su": f"{row['proposed_su']:.{SU_PLACES}f}",
        "reason": row["reason"],
        "edited": row["edited"],
    }


class WhatIfProposalInputSerializer(serializers.Serializer):
    proposed_su = serializers.DecimalField(max_digits=24, decimal_places=6)
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=5000, default="",
        help_text="required when the figure differs from the request",
    )  # fmt: skip


class WhatIfPoolTotalSerializer(serializers.Serializer):
    pool = serializers.CharField(source="pool.name")
    remaining_su = su_out_field(help_text="what the round has left on the pool now")
    requested_su = su_out_field()
    proposed_su = su_out_field()
    fits = serializers.BooleanField()
    factor = serializers.CharField(help_text="the method's factor on the pool")
    notes = serializers.ListField(child=serializers.CharField())


class WhatIfParametersSerializer(serializers.Serializer):
    threshold_su = serializers.CharField()
    exponent = serializers.CharField()
    floor_su = serializers.CharField()


class WhatIfOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="draft.pk")
    round = serializers.IntegerField(source="draft.round_id")
    method = serializers.ChoiceField(source="draft.method", choices=WhatIfDraft.Method.choices)
    parameters = WhatIfParametersSerializer(source="draft.parameters")
    created_by = serializers.CharField(source="draft.created_by.username")
    created_at = UtcDateTimeField(source="draft.created_at")
    applied_at = UtcDateTimeField(source="draft.applied_at", allow_null=True)
    pools = WhatIfPoolTotalSerializer(many=True, source="totals")
    proposals = serializers.SerializerMethodField()
    hidden = serializers.IntegerField(help_text="proposals of the caller's own projects")
    conflicted = serializers.SerializerMethodField(
        help_text="requests under review of the caller's own projects: staff decide them"
    )
    submitted = serializers.IntegerField(help_text="requests not yet opened for review")

    @extend_schema_field(WhatIfProposalOutputSerializer(many=True))
    def get_proposals(self, view: Any) -> list[dict[str, Any]]:
        return [what_if_proposal_out(row) for row in view.proposals]

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_conflicted(self, view: Any) -> list[int]:
        return [request.pk for request in view.conflicted]

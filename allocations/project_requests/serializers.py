"""Input and output serializers of the project requests API
(allocations/project_requests/api.py, docs/api.md). Input is parsed here; the rules (who may
act, states, amounts, pools) stay in ``allocations.project_requests.services``."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounting.clusters.quotes import QuoteRequest
from accounting.clusters.serializers import PlannedJobSerializer
from allocations.models import (
    ProjectRequest,
    ProjectRequestAmount,
    ProjectRequestEstimate,
    ProjectRequestTransition,
)
from allocations.project_requests.services import EstimateLine
from kit.api import ApiModelSerializer, EndsAfterStart, slug_of


class ProjectRequestAmountOutputSerializer(ApiModelSerializer):
    pool = slug_of("name")

    class Meta:
        model = ProjectRequestAmount
        fields = ["pool", "requested_su", "granted_su"]


class ProjectRequestEstimateOutputSerializer(ApiModelSerializer):
    cluster = serializers.CharField(source="partition.cluster.name", read_only=True)
    partition = slug_of("name")

    class Meta:
        model = ProjectRequestEstimate
        fields = [
            "id", "cluster", "partition", "description", "jobs", "nodes", "hours",
            "cores_per_node", "gpus_per_node", "memory_per_node_mb", "service_units",
        ]  # fmt: skip


class ProjectRequestTransitionOutputSerializer(ApiModelSerializer):
    actor = slug_of("username")

    class Meta:
        model = ProjectRequestTransition
        fields = ["from_state", "to_state", "actor", "at", "note"]


class ProjectRequestOutputSerializer(ApiModelSerializer):
    requester = slug_of("username")
    pi = slug_of("username")
    decided_by = slug_of("username", allow_null=True)
    project = slug_of("code", allow_null=True)
    amounts = ProjectRequestAmountOutputSerializer(many=True, read_only=True)
    estimates = ProjectRequestEstimateOutputSerializer(many=True, read_only=True)
    transitions = ProjectRequestTransitionOutputSerializer(many=True, read_only=True)

    class Meta:
        model = ProjectRequest
        fields = [
            "id", "title", "abstract", "field_of_science", "requester", "pi",
            "pi_confirmed_at", "state", "created_at", "decided_by", "decided_at",
            "decision_reason", "project", "amounts", "estimates", "transitions",
        ]  # fmt: skip


class PoolAskSerializer(serializers.Serializer):
    """SU on one pool, named by its name (an unknown pool is refused by the service)."""

    pool = serializers.CharField(max_length=100, help_text="resource pool name")
    su = serializers.CharField(max_length=40, help_text="SU, a decimal number")


def _by_pool(items: list[dict[str, Any]], what: str) -> dict[str, str]:
    amounts: dict[str, str] = {}
    for item in items:
        if item["pool"] in amounts:
            raise serializers.ValidationError(f"{item['pool']} is named twice in {what}")
        amounts[item["pool"]] = item["su"]
    return amounts


class ProjectRequestEstimateInputSerializer(PlannedJobSerializer):
    """One estimate line: ``jobs`` times the quote of one job on a partition."""

    jobs = serializers.IntegerField(min_value=1, max_value=10**6)
    description = serializers.CharField(
        required=False, allow_blank=True, max_length=200, default=""
    )

    def line(self) -> EstimateLine:
        return estimate_line(self.validated_data)


def estimate_line(values: dict[str, Any]) -> EstimateLine:
    """The estimate line a validated ``ProjectRequestEstimateInputSerializer`` names."""
    return EstimateLine(
        partition=values["partition_object"], jobs=values["jobs"],
        description=values["description"],
        quote=QuoteRequest(
            nodes=values["nodes"], hours=values["hours"],
            cores_per_node=values.get("cores_per_node"),
            gpus_per_node=values.get("gpus_per_node"),
            memory_per_node_mb=values.get("memory_per_node"),
        ),
    )  # fmt: skip


class ProjectRequestCreateInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=300)
    abstract = serializers.CharField(max_length=50_000)
    field_of_science = serializers.CharField(max_length=120)
    pi = serializers.CharField(
        required=False, allow_blank=True, max_length=254, default="",
        help_text="the PI's username or e-mail address (blank: you); they confirm first",
    )  # fmt: skip
    amounts = PoolAskSerializer(many=True, help_text="SU asked per pool")
    estimates = ProjectRequestEstimateInputSerializer(many=True, required=False, default=list)

    def validate_amounts(self, value: list[dict[str, Any]]) -> dict[str, str]:
        return _by_pool(value, "amounts")


class ProjectRequestResubmitInputSerializer(serializers.Serializer):
    title = serializers.CharField(required=False, max_length=300)
    abstract = serializers.CharField(required=False, max_length=50_000)
    field_of_science = serializers.CharField(required=False, max_length=120)
    amounts = PoolAskSerializer(many=True, required=False, help_text="SU asked per pool")

    def validate_amounts(self, value: list[dict[str, Any]]) -> dict[str, str]:
        return _by_pool(value, "amounts")


class ProjectRequestConfirmInputSerializer(serializers.Serializer):
    accept = serializers.BooleanField(help_text="true: you lead the project; false: you decline")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=5000, default="")


class ProjectRequestReasonInputSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=5000, help_text="what the requester reads")


class ProjectRequestApproveInputSerializer(EndsAfterStart):
    code = serializers.CharField(
        required=False, allow_blank=True, max_length=64, default="",
        help_text="the project's code (Slurm account); blank: the centre's next code",
    )  # fmt: skip
    period_start = serializers.DateField(required=False, help_text="default: today")
    period_end = serializers.DateField(
        required=False, help_text="the day after the last day; default: a year after the start"
    )
    granted = PoolAskSerializer(
        many=True, required=False, help_text="SU granted per pool (default: as asked)"
    )
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=5000, default="",
        help_text="required when the grant differs from the request",
    )  # fmt: skip

    def validate_granted(self, value: list[dict[str, Any]]) -> dict[str, str]:
        return _by_pool(value, "granted")

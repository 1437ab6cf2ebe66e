"""REST API of projects, members, invitations, balances, allocations and adjustments (docs/api.md).

Views are thin: an input serializer parses, a service or selector does the work, an output
serializer renders. Querysets are scoped to what the caller may see, so another project's
objects are 404; the services decide who may change what (``PermissionDenied`` is a 403)."""

from __future__ import annotations

from typing import Any

import django_filters  # type: ignore[import-untyped]
from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.ledger.rate_drafts import (
    DraftRates,
    rate_draft_check,
    rate_draft_create,
    rate_draft_discard,
    rate_draft_rates,
)
from accounting.models import Job, RateDraft
from allocations.grants.expiry import project_unarchive
from allocations.grants.rates_impact import rates_impact_get, rates_impact_payload
from allocations.grants.selectors import grant_balances_of, project_balances_get
from allocations.grants.serializers import (
    AdjustmentOutputSerializer,
    AllocationGrantInputSerializer,
    AllocationOutputSerializer,
    BalanceQuerySerializer,
    ImpactMonthsQuerySerializer,
    InvitationInputSerializer,
    InvitationOutputSerializer,
    InvitationSentSerializer,
    MemberAddInputSerializer,
    MemberOutputSerializer,
    MemberRoleInputSerializer,
    ProjectBalanceOutputSerializer,
    ProjectCreateInputSerializer,
    ProjectOutputSerializer,
    ProjectUpdateInputSerializer,
    RatesImpactInputSerializer,
    RatesImpactOutputSerializer,
    RefundInputSerializer,
    TopUpInputSerializer,
    TransferInputSerializer,
    TransferOutputSerializer,
)
from allocations.grants.services import (
    adjustment_refund,
    adjustment_top_up,
    adjustment_transfer,
    allocation_grant,
)
from allocations.models import Adjustment, Allocation, BudgetPeriod
from kit.access import Actor, require
from kit.api import (
    CODE_PATTERN,
    ID_PATTERN,
    ApiViewSet,
    EnumFilter,
    IsStaff,
    IsStaffOrReadOnly,
    acting_user,
)
from projects.access import can_delegate, can_manage_project, leads_a_project, projects_visible
from projects.invitations import (
    invitation_revoke,
    invitation_send,
    invitations_of,
    membership_role_set,
)
from projects.models import Project
from projects.selectors import memberships_of
from projects.services import membership_add, membership_remove, project_create, project_update

# --- Selectors the API needs (read-only; scoped to what the caller may see) -----------------


def project_visible(*, user: Actor, code: str) -> Project:
    """The project ``code`` if ``user`` may see it; 404 otherwise, whether it exists or not."""
    return get_object_or_404(projects_visible(user=user), code=code)


# --- Filters --------------------------------------------------------------------------------


class ProjectFilter(django_filters.FilterSet):
    status = EnumFilter(choices=Project.Status.choices)

    class Meta:
        model = Project
        fields: list[str] = []


class AllocationFilter(django_filters.FilterSet):
    project = django_filters.CharFilter(field_name="project__code")
    pool = django_filters.CharFilter(field_name="pool__name")

    class Meta:
        model = Allocation
        fields: list[str] = []


class AdjustmentFilter(django_filters.FilterSet):
    project = django_filters.CharFilter(field_name="project__code")
    pool = django_filters.CharFilter(field_name="budget_period__allocation__pool__name")
    kind = EnumFilter(choices=Adjustment.Kind.choices)

    class Meta:
        model = Adjustment
        fields: list[str] = []


# --- Projects, members, balances ------------------------------------------------------------


@extend_schema(tags=["projects"])
class ProjectViewSet(ApiViewSet):
    """Projects: the caller's own (every project for staff). Staff create them."""

    permission_classes = [IsAuthenticated, IsStaffOrReadOnly]
    serializer_class = ProjectOutputSerializer
    lookup_field = "code"
    lookup_value_regex = CODE_PATTERN
    filterset_class = ProjectFilter
    ordering_fields = ["code", "created_at"]
    ordering = ["code"]

    def get_queryset(self) -> QuerySet[Project]:
        return projects_visible(user=self.request.user).select_related("pi")

    def list(self, request: Request) -> Response:
        """Your projects (staff: every project)."""
        return self.paginated(self.filter_queryset(self.get_queryset()), ProjectOutputSerializer)

    def retrieve(self, request: Request, code: str) -> Response:
        return Response(
            ProjectOutputSerializer(get_object_or_404(self.get_queryset(), code=code)).data
        )

    @extend_schema(request=ProjectCreateInputSerializer, responses={201: ProjectOutputSerializer})
    def create(self, request: Request) -> Response:
        """Staff: a project for a Slurm account (its quarantined jobs are then charged)."""
        data = ProjectCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project = project_create(**data.validated_data, actor=acting_user(request))
        return Response(ProjectOutputSerializer(project).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ProjectUpdateInputSerializer, responses=ProjectOutputSerializer)
    def partial_update(self, request: Request, code: str) -> Response:
        """Staff: change a project's title, field of science or PI (``project_update``, as the
        staff page)."""
        project = get_object_or_404(self.get_queryset(), code=code)
        data = ProjectUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project = project_update(project=project, actor=acting_user(request), **data.validated_data)
        return Response(ProjectOutputSerializer(project).data)

    @extend_schema(request=None, responses={200: ProjectOutputSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsStaff])
    def unarchive(self, request: Request, code: str) -> Response:
        """Staff: make an archived (read-only) project writable again: expired, or active when
        a grant is current. The one write an archived project takes."""
        project = get_object_or_404(self.get_queryset(), code=code)
        project = project_unarchive(project=project, actor=acting_user(request))
        return Response(ProjectOutputSerializer(project).data)


@extend_schema(tags=["projects"])
class ProjectMemberViewSet(ApiViewSet):
    """A project's members. Members read; the PI (and staff) add and remove; a member may
    leave."""

    serializer_class = MemberOutputSerializer
    filter_backends: list[Any] = []

    def _project(self) -> Project:
        return project_visible(user=self.request.user, code=self.kwargs["code"])

    def list(self, request: Request, code: str) -> Response:
        return self.paginated(memberships_of(project=self._project()), MemberOutputSerializer)

    def retrieve(self, request: Request, code: str, username: str) -> Response:
        membership = get_object_or_404(
            memberships_of(project=self._project()), user__username=username
        )
        return Response(MemberOutputSerializer(membership).data)

    @extend_schema(request=MemberAddInputSerializer, responses={201: MemberOutputSerializer})
    def create(self, request: Request, code: str) -> Response:
        """The PI adds a member (adding someone already in the project changes nothing)."""
        project = self._project()
        require(can_manage_project(request.user, project), f"only the PI of {project} adds members")
        data = MemberAddInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = membership_add(
            project=project, user=data.validated_data["username"], actor=acting_user(request),
            role=data.validated_data["role"],
        )  # fmt: skip
        return Response(MemberOutputSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=MemberRoleInputSerializer, responses={200: MemberOutputSerializer})
    def partial_update(self, request: Request, code: str, username: str) -> Response:
        """The PI (or staff) gives or takes a member's role: ``manager`` (the PI's proxy,
        who runs members, invitations and requests) or ``member``."""
        membership = get_object_or_404(
            memberships_of(project=self._project()), user__username=username
        )
        require(
            can_delegate(request.user, membership.project),
            f"only the PI of {membership.project} changes roles",
        )
        data = MemberRoleInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = membership_role_set(
            project=membership.project, user=membership.user,
            role=data.validated_data["role"], actor=acting_user(request),
        )  # fmt: skip
        return Response(MemberOutputSerializer(membership).data)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, code: str, username: str) -> Response:
        """The PI removes a member, or a member leaves. The PI stays."""
        membership = get_object_or_404(
            memberships_of(project=self._project()), user__username=username
        )
        membership_remove(
            project=membership.project, user=membership.user, actor=acting_user(request)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["projects"])
class ProjectInvitationViewSet(ApiViewSet):
    """Invitations to a project: its PI, managers and staff send, list and revoke them. The
    invitee accepts in the browser, signed in, from the mailed link."""

    serializer_class = InvitationOutputSerializer
    filter_backends: list[Any] = []

    def _project(self) -> Project:
        project = project_visible(user=self.request.user, code=self.kwargs["code"])
        require(
            can_manage_project(self.request.user, project),
            f"only the PI or a manager of {project} manages invitations",
        )
        return project

    def list(self, request: Request, code: str) -> Response:
        return self.paginated(invitations_of(project=self._project()), InvitationOutputSerializer)

    @extend_schema(request=InvitationInputSerializer, responses={201: InvitationSentSerializer})
    def create(self, request: Request, code: str) -> Response:
        """Invite an e-mail address as ``member`` or (the PI only) ``manager``; the answer
        carries the link that was mailed."""
        project = self._project()
        data = InvitationInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        sent = invitation_send(
            project=project, email=data.validated_data["email"],
            role=data.validated_data["role"], actor=acting_user(request),
        )  # fmt: skip
        body = {"invitation": InvitationOutputSerializer(sent.invitation).data, "link": sent.link}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, code: str, pk: str) -> Response:
        """Revoke a pending invitation: its link stops working."""
        invitation = get_object_or_404(invitations_of(project=self._project()), pk=pk)
        invitation_revoke(invitation=invitation, actor=acting_user(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


# Building a serializer's fields costs more than rendering a balance with them: one instance
# renders every answer (``to_representation`` keeps no state between calls).
_BALANCE_RENDERER = ProjectBalanceOutputSerializer()


class ProjectBalanceView(APIView):
    """A project's balances: what ``su-balance`` prints."""

    @extend_schema(
        tags=["projects"], parameters=[BalanceQuerySerializer],
        responses=ProjectBalanceOutputSerializer,
    )  # fmt: skip
    def get(self, request: Request, code: str) -> Response:
        """Per pool: budget, carried in, adjustments, used, pending, remaining, percent used,
        burn rates and projected exhaustion of the current budget period (``periods=all``: of
        every budget period of the grant). Reads the daily roll-ups, never the jobs."""
        project = project_visible(user=request.user, code=code)
        query = BalanceQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        every = query.validated_data["periods"] == "all"
        balances = project_balances_get(
            project=project, on=query.validated_data.get("on"), all_periods=every, grants=every
        )
        return Response(_BALANCE_RENDERER.to_representation(balances))


# --- Allocations and rounds -----------------------------------------------------------------


@extend_schema(tags=["allocations"])
class AllocationViewSet(ApiViewSet):
    """Grants of SU on a pool for a period, split into budget periods."""

    permission_classes = [IsAuthenticated, IsStaffOrReadOnly]
    serializer_class = AllocationOutputSerializer
    lookup_value_regex = ID_PATTERN
    filterset_class = AllocationFilter
    ordering_fields = ["period_start", "granted_at", "id"]
    ordering = ["project__code", "pool__name", "period_start", "id"]

    def get_queryset(self) -> QuerySet[Allocation]:
        return (
            Allocation.objects.filter(project__in=projects_visible(user=self.request.user))
            .select_related("project", "pool__cluster", "granted_by")
            .prefetch_related(Prefetch("budget_periods", BudgetPeriod.objects.order_by("start")))
        )

    @staticmethod
    def _rendered(allocations: list[Allocation]) -> Any:
        """The grants with their status, used and remaining SU (one balance per project)."""
        grants = grant_balances_of(allocations=allocations)
        return AllocationOutputSerializer(allocations, many=True, context={"grants": grants}).data

    def list(self, request: Request) -> Response:
        """Grants of your projects (staff: all), each with its status (future, current,
        ended: relative to today on the pool's cluster), used and remaining SU."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self._rendered(list(page or [])))

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(self._rendered([self.get_object()])[0])

    @extend_schema(
        request=AllocationGrantInputSerializer, responses={201: AllocationOutputSerializer}
    )
    def create(self, request: Request) -> Response:
        """Staff: grant SU outside a round, split into budget periods by the pool's policy."""
        data = AllocationGrantInputSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        allocation = allocation_grant(
            project=values["project"], pool=values["pool"], amount=values["amount"],
            period_start=values["period_start"], period_end=values["period_end"],
            actor=acting_user(request), reason=values["reason"],
            custom_budgets=values.get("custom_budgets"),
        )  # fmt: skip
        allocation = self.get_queryset().get(pk=allocation.pk)
        return Response(self._rendered([allocation])[0], status.HTTP_201_CREATED)


# --- Adjustments ----------------------------------------------------------------------------


@extend_schema(tags=["adjustments"])
class AdjustmentViewSet(ApiViewSet):
    """The balance's audit trail: refunds, top-ups and transfers (append-only)."""

    serializer_class = AdjustmentOutputSerializer
    lookup_value_regex = ID_PATTERN
    filterset_class = AdjustmentFilter
    ordering_fields = ["created_at", "id"]
    ordering = ["created_at", "id"]

    def get_queryset(self) -> QuerySet[Adjustment]:
        return Adjustment.objects.filter(
            project__in=projects_visible(user=self.request.user)
        ).select_related("project", "budget_period__allocation__pool", "actor")

    def _respond(self, adjustment: Adjustment) -> Response:
        adjustment = Adjustment.objects.select_related(
            "project", "budget_period__allocation__pool", "actor"
        ).get(pk=adjustment.pk)
        return Response(AdjustmentOutputSerializer(adjustment).data, status=status.HTTP_201_CREATED)

    def list(self, request: Request) -> Response:
        """Adjustments of your projects (staff: all)."""
        queryset = self.filter_queryset(self.get_queryset())
        return self.paginated(queryset, AdjustmentOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(AdjustmentOutputSerializer(self.get_object()).data)

    @extend_schema(
        request=RefundInputSerializer, responses={201: AdjustmentOutputSerializer}, filters=False
    )
    @action(detail=False, methods=["post"], permission_classes=[IsStaff])
    def refund(self, request: Request) -> Response:
        """Staff give SU back: a job's whole charge (once per job), or an amount."""
        data = RefundInputSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        job = None
        if values.get("job") is not None:
            job = Job.objects.filter(pk=values["job"]).first()
            if job is None:
                raise serializers.ValidationError({"job": [f"unknown job {values['job']}"]})
        adjustment = adjustment_refund(
            project=values["project"], pool=values["pool"], actor=acting_user(request),
            reason=values["reason"], amount=values.get("amount"), job=job, on=values.get("on"),
        )  # fmt: skip
        return self._respond(adjustment)

    @extend_schema(
        request=TopUpInputSerializer, responses={201: AdjustmentOutputSerializer}, filters=False
    )
    @action(detail=False, methods=["post"], url_path="top-up", permission_classes=[IsStaff])
    def top_up(self, request: Request) -> Response:
        """Staff add SU to the project's current budget period on a pool."""
        data = TopUpInputSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        adjustment = adjustment_top_up(
            project=values["project"], pool=values["pool"], amount=values["amount"],
            actor=acting_user(request), reason=values["reason"], on=values.get("on"),
        )  # fmt: skip
        return self._respond(adjustment)

    @extend_schema(
        request=TransferInputSerializer, responses={201: TransferOutputSerializer}, filters=False
    )
    @action(detail=False, methods=["post"])
    def transfer(self, request: Request) -> Response:
        """Staff, or the source project's PI, move SU to another project on one pool; never
        more than the source has left."""
        require(leads_a_project(request.user), "only centre staff or a project's PI transfer SU")
        data = TransferInputSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        out, into = adjustment_transfer(
            source=values["source"], target=values["target"], pool=values["pool"],
            amount=values["amount"], actor=acting_user(request), reason=values["reason"],
            on=values.get("on"),
        )  # fmt: skip
        return Response(
            TransferOutputSerializer({"transfer_out": out, "transfer_in": into}).data,
            status=status.HTTP_201_CREATED,
        )


# --- Rate drafts: a rate change seen before it ships (docs/costs.md) --------------------------


def _impact_response(rates: DraftRates, *, months: int, draft: int | None) -> Response:
    payload = rates_impact_payload(rates_impact_get(rates=rates, months=months))
    return Response(RatesImpactOutputSerializer({"draft": draft, **payload}).data)


class RatesImpactView(APIView):
    """Staff: what a draft of a cluster's rates would do, before it ships."""

    permission_classes = [IsAuthenticated, IsStaff]

    @extend_schema(
        tags=["rates"], request=RatesImpactInputSerializer,
        responses={200: RatesImpactOutputSerializer},
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        """Each project's charged jobs of the last ``months`` months re-priced under the draft
        (SU per pool, money), the current budget periods that would run out earlier and by
        how many days, and the ``TRESBillingWeights`` lines it changes. The draft is checked
        as a spec file is; with ``keep`` it is kept (never in force) under the returned id."""
        body = RatesImpactInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            cluster = cluster_get(name=data["cluster"])
        except NotFound as error:
            raise ValidationError({"cluster": [str(error)]}) from None
        cost_model = data.get("cost_model", "")
        if not data["keep"]:
            rates = rate_draft_check(cluster=cluster, spec=data["spec"], cost_model_text=cost_model)
            return _impact_response(rates, months=data["months"], draft=None)
        draft = rate_draft_create(
            cluster=cluster, spec=data["spec"], cost_model_text=cost_model,
            note=data.get("note", ""), created_by=acting_user(request),
        )  # fmt: skip
        return _impact_response(rate_draft_rates(draft), months=data["months"], draft=draft.pk)


class RateDraftView(APIView):
    """Staff: a kept rate draft's impact, or its discarding."""

    permission_classes = [IsAuthenticated, IsStaff]

    @extend_schema(
        tags=["rates"], parameters=[ImpactMonthsQuerySerializer],
        responses={200: RatesImpactOutputSerializer},
    )  # fmt: skip
    def get(self, request: Request, pk: str) -> Response:
        """The draft's impact over the last ``months`` months (as ``POST /rates-impact/``)."""
        draft = get_object_or_404(RateDraft.objects.select_related("cluster"), pk=int(pk))
        query = ImpactMonthsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        months = query.validated_data["months"]
        return _impact_response(rate_draft_rates(draft), months=months, draft=draft.pk)

    @extend_schema(tags=["rates"], responses={204: None})
    def delete(self, request: Request, pk: str) -> Response:
        """Discard the draft; nothing else changes."""
        draft = get_object_or_404(RateDraft, pk=int(pk))
        rate_draft_discard(draft=draft)
        return Response(status=status.HTTP_204_NO_CONTENT)

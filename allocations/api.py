"""REST API of the allocations app (docs/api.md): projects, members, balances, allocations,
rounds, requests (and their submit / review-start / decide steps), reviews and adjustments.

Views are thin: an input serializer parses, a service or selector does the work, an output
serializer renders. Querysets are scoped to what the caller may see, so another project's
objects are 404; the services decide who may change what (``PermissionDenied`` is a 403).
"""

from __future__ import annotations

from typing import Any

import django_filters  # type: ignore[import-untyped]
from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.clusters.quotes import QuoteRequest
from accounting.models import Job
from allocations.access import can_decide, requests_visible, reviews_visible, sits_on_a_committee
from allocations.api_serializers import (
    AdjustmentOutputSerializer,
    AllocationGrantInputSerializer,
    AllocationOutputSerializer,
    BalanceQuerySerializer,
    InvitationInputSerializer,
    InvitationOutputSerializer,
    InvitationSentSerializer,
    MemberAddInputSerializer,
    MemberOutputSerializer,
    MemberRoleInputSerializer,
    ProjectBalanceOutputSerializer,
    ProjectCreateInputSerializer,
    ProjectOutputSerializer,
    RefundInputSerializer,
    RequestCreateInputSerializer,
    RequestDecideInputSerializer,
    RequestEstimateInputSerializer,
    RequestEstimateOutputSerializer,
    RequestOutputSerializer,
    RequestUpdateInputSerializer,
    ReviewInputSerializer,
    ReviewOutputSerializer,
    RoundCreateInputSerializer,
    RoundOutputSerializer,
    RoundOverviewOutputSerializer,
    TopUpInputSerializer,
    TransferInputSerializer,
    TransferOutputSerializer,
)
from allocations.models import (
    Adjustment,
    Allocation,
    AllocationRequest,
    AllocationRound,
    BudgetPeriod,
    RequestTransition,
    Review,
)
from allocations.selectors import project_balances_get, round_overview
from allocations.services import (
    adjustment_refund,
    adjustment_top_up,
    adjustment_transfer,
    allocation_grant,
    request_create,
    request_decide,
    request_estimate_add,
    request_review_start,
    request_submit,
    request_update,
    review_submit,
    round_create,
)
from kit.access import Actor, require
from kit.api import (
    CODE_PATTERN,
    ID_PATTERN,
    ApiViewSet,
    EnumFilter,
    IdFilter,
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
from projects.services import membership_add, membership_remove, project_create

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


class RequestFilter(django_filters.FilterSet):
    round = IdFilter(field_name="round_id")
    project = django_filters.CharFilter(field_name="project__code")
    state = EnumFilter(choices=AllocationRequest.State.choices)
    kind = EnumFilter(choices=AllocationRequest.Kind.choices)

    class Meta:
        model = AllocationRequest
        fields: list[str] = []


class ReviewFilter(django_filters.FilterSet):
    request = IdFilter(field_name="request_id")
    round = IdFilter(field_name="request__round_id")

    class Meta:
        model = Review
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
        project = project_create(**data.validated_data)
        return Response(ProjectOutputSerializer(project).data, status=status.HTTP_201_CREATED)


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
        balances = project_balances_get(
            project=project,
            on=query.validated_data.get("on"),
            all_periods=query.validated_data["periods"] == "all",
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

    def list(self, request: Request) -> Response:
        """Grants of your projects (staff: all)."""
        queryset = self.filter_queryset(self.get_queryset())
        return self.paginated(queryset, AllocationOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(AllocationOutputSerializer(self.get_object()).data)

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
        return Response(AllocationOutputSerializer(allocation).data, status.HTTP_201_CREATED)


@extend_schema(tags=["rounds"])
class RoundViewSet(ApiViewSet):
    """Allocation rounds (calls for applications): everyone signed in sees them."""

    permission_classes = [IsAuthenticated, IsStaffOrReadOnly]
    serializer_class = RoundOutputSerializer
    lookup_value_regex = ID_PATTERN
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[AllocationRound]:
        return AllocationRound.objects.prefetch_related("pools__pool").order_by("-opens_at", "id")

    def list(self, request: Request) -> Response:
        """Rounds, the newest first, with the SU each offers per pool."""
        return self.paginated(self.get_queryset(), RoundOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(RoundOutputSerializer(self.get_object()).data)

    @extend_schema(request=RoundCreateInputSerializer, responses={201: RoundOutputSerializer})
    def create(self, request: Request) -> Response:
        """Staff: open a call with its dates, SU per pool and its committee and chair."""
        data = RoundCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        round_ = round_create(
            name=values["name"], opens_at=values["opens_at"], closes_at=values["closes_at"],
            period_start=values["period_start"], period_end=values["period_end"],
            available=values["available"], chair=values["chair"],
            committee=values.get("committee", []), actor=acting_user(request),
        )  # fmt: skip
        round_ = self.get_queryset().get(pk=round_.pk)
        return Response(RoundOutputSerializer(round_).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses=RoundOverviewOutputSerializer)
    @action(detail=True, methods=["get"])
    def overview(self, request: Request, pk: str) -> Response:
        """The chair's view (and staff's): requested against available SU per pool, and each
        submitted request with its average score."""
        round_ = self.get_object()
        overview = round_overview(round_=round_, actor=request.user)
        names = {item.pool.pk: item.pool.name for item in overview["pools"]}
        return Response(RoundOverviewOutputSerializer(overview, context={"pool_names": names}).data)


# --- Requests and reviews -------------------------------------------------------------------


def _request_detail(pk: int) -> AllocationRequest:
    return (
        AllocationRequest.objects.select_related("round", "project", "created_by")
        .prefetch_related(
            "amounts__pool",
            "estimates__partition__cluster",
            Prefetch("transitions", RequestTransition.objects.select_related("actor")),
        )
        .get(pk=pk)
    )


@extend_schema(tags=["requests"])
class RequestViewSet(ApiViewSet):
    """Applications and top-up requests. PIs write their projects' requests; the round's
    committee sees the submitted ones, its chair opens review and decides."""

    serializer_class = RequestOutputSerializer
    lookup_value_regex = ID_PATTERN
    filterset_class = RequestFilter
    ordering_fields = ["created_at", "id"]
    ordering = ["-created_at", "-id"]

    def get_queryset(self) -> QuerySet[AllocationRequest]:
        return (
            requests_visible(user=self.request.user)
            .select_related("round", "project", "created_by")
            .prefetch_related(
                "amounts__pool",
                "estimates__partition__cluster",
                Prefetch("transitions", RequestTransition.objects.select_related("actor")),
            )
        )

    def _respond(self, request_: AllocationRequest, code: int = status.HTTP_200_OK) -> Response:
        return Response(RequestOutputSerializer(_request_detail(request_.pk)).data, status=code)

    def list(self, request: Request) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        return self.paginated(queryset, RequestOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(RequestOutputSerializer(self.get_object()).data)

    @extend_schema(request=RequestCreateInputSerializer, responses={201: RequestOutputSerializer})
    def create(self, request: Request) -> Response:
        """The PI starts a request (a draft) in a round: SU per pool and a justification."""
        require(leads_a_project(request.user), "only a project's PI applies for it")
        data = RequestCreateInputSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        created = request_create(
            round_=values["round"], project=values["project"], actor=acting_user(request),
            kind=values["kind"], justification=values["justification"],
            amounts=values.get("amounts", {}),
        )  # fmt: skip
        return self._respond(created, status.HTTP_201_CREATED)

    @extend_schema(request=RequestUpdateInputSerializer, responses=RequestOutputSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        """The PI edits a draft: justification and/or SU per pool."""
        request_ = self.get_object()
        project = request_.project
        require(can_manage_project(request.user, project), f"only the PI of {project} edits it")
        data = RequestUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        request_update(
            request=request_, actor=acting_user(request),
            justification=data.validated_data.get("justification"),
            amounts=data.validated_data.get("amounts"),
        )  # fmt: skip
        return self._respond(request_)

    @extend_schema(
        request=RequestEstimateInputSerializer, responses={201: RequestEstimateOutputSerializer}
    )
    @action(detail=True, methods=["post"])
    def estimates(self, request: Request, pk: str) -> Response:
        """The PI adds an estimate line to a draft, priced by the quote engine."""
        request_ = self.get_object()
        project = request_.project
        require(can_manage_project(request.user, project), f"only the PI of {project} edits it")
        data = RequestEstimateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        line = request_estimate_add(
            request=request_, actor=acting_user(request), partition=values["partition_object"],
            jobs=values["jobs"], description=values["description"],
            quote=QuoteRequest(
                nodes=values["nodes"], hours=values["hours"],
                cores_per_node=values.get("cores_per_node"),
                gpus_per_node=values.get("gpus_per_node"),
                memory_per_node_mb=values.get("memory_per_node"),
            ),
        )  # fmt: skip
        return Response(RequestEstimateOutputSerializer(line).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=RequestOutputSerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str) -> Response:
        """The PI submits a draft while the round is open (a top-up any time)."""
        request_ = request_submit(request=self.get_object(), actor=acting_user(request))
        return self._respond(request_)

    @extend_schema(request=None, responses=RequestOutputSerializer)
    @action(detail=True, methods=["post"], url_path="review-start")
    def review_start(self, request: Request, pk: str) -> Response:
        """The round's chair opens a submitted request for review."""
        request_ = request_review_start(request=self.get_object(), actor=acting_user(request))
        return self._respond(request_)

    @extend_schema(request=RequestDecideInputSerializer, responses=RequestOutputSerializer)
    @action(detail=True, methods=["post"])
    def decide(self, request: Request, pk: str) -> Response:
        """The round's chair grants SU per pool (a reason when it differs from the request);
        an application becomes allocations, a top-up adds to the current budget period."""
        request_ = self.get_object()
        require(can_decide(request.user, request_), "only the round's chair grants SU")
        data = RequestDecideInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        request_decide(
            request=request_, actor=acting_user(request),
            granted=data.validated_data["granted"], reason=data.validated_data["reason"],
        )  # fmt: skip
        return self._respond(request_)


@extend_schema(tags=["reviews"])
class ReviewViewSet(ApiViewSet):
    """Reviews: the round's committee (and staff) read them; committee members write theirs."""

    serializer_class = ReviewOutputSerializer
    lookup_value_regex = ID_PATTERN
    filterset_class = ReviewFilter
    ordering_fields = ["created_at", "score", "id"]
    ordering = ["request_id", "id"]

    def get_queryset(self) -> QuerySet[Review]:
        return reviews_visible(user=self.request.user).select_related(
            "request__project", "reviewer"
        )

    def list(self, request: Request) -> Response:
        return self.paginated(self.filter_queryset(self.get_queryset()), ReviewOutputSerializer)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(ReviewOutputSerializer(self.get_object()).data)

    @extend_schema(request=ReviewInputSerializer, responses={201: ReviewOutputSerializer})
    def create(self, request: Request) -> Response:
        """A committee member scores (1-5) and comments a request under review; again
        replaces their review. Never on a project they belong to."""
        require(sits_on_a_committee(request.user), "only the round's committee reviews requests")
        data = ReviewInputSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        review = review_submit(
            request=data.validated_data["request"], reviewer=acting_user(request),
            score=data.validated_data["score"], comment=data.validated_data["comment"],
        )  # fmt: skip
        review = self.get_queryset().get(pk=review.pk)
        return Response(ReviewOutputSerializer(review).data, status=status.HTTP_201_CREATED)


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

"""REST API of rounds, requests (and their submit / review-start / decide steps) and reviews
(docs/api.md).

Views are thin: an input serializer parses, a service or selector does the work, an output
serializer renders. Querysets are scoped to what the caller may see, so another project's
objects are 404; the services decide who may change what (``PermissionDenied`` is a 403)."""

from __future__ import annotations

from typing import Any

import django_filters  # type: ignore[import-untyped]
from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.generics import get_object_or_404
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from accounting.clusters.quotes import QuoteRequest
from allocations.access import (
    asks_for_changes,
    can_ask_for_change,
    can_assign_reviewers,
    can_decide,
    can_decide_round,
    can_read_letter,
    can_read_record,
    requests_visible,
    reviews_visible,
    sits_on_a_committee,
)
from allocations.models import (
    AllocationRequest,
    AllocationRound,
    RequestTransition,
    Review,
    WhatIfDraft,
)
from allocations.rounds.letters import letter_filename, letter_pdf
from allocations.rounds.record import applicant_record
from allocations.rounds.selectors import (
    decision_letter_of,
    request_assignments,
    round_overview,
    what_if_draft_for,
    what_if_proposal_rows,
    what_if_proposals,
    what_if_view,
)
from allocations.rounds.serializers import (
    ApplicantRecordOutputSerializer,
    CommitteeSeatInputSerializer,
    ProgressReportInputSerializer,
    RequestCreateInputSerializer,
    RequestDecideInputSerializer,
    RequestEstimateInputSerializer,
    RequestEstimateOutputSerializer,
    RequestOutputSerializer,
    RequestUpdateInputSerializer,
    ReviewAssignInputSerializer,
    ReviewAssignmentOutputSerializer,
    ReviewInputSerializer,
    ReviewOutputSerializer,
    RoundCreateInputSerializer,
    RoundOutputSerializer,
    RoundOverviewOutputSerializer,
    RoundUpdateInputSerializer,
    WhatIfInputSerializer,
    WhatIfOutputSerializer,
    WhatIfProposalInputSerializer,
    WhatIfProposalOutputSerializer,
)
from allocations.rounds.services import (
    committee_add,
    committee_remove,
    progress_report_set,
    request_create,
    request_decide,
    request_estimate_add,
    request_review_start,
    request_submit,
    request_update,
    review_assign,
    review_submit,
    review_unassign,
    round_close,
    round_create,
    round_update,
)
from allocations.rounds.what_if_services import (
    RUN_ROUND,
    what_if_apply,
    what_if_draft_create,
    what_if_proposal_set,
)
from kit.access import require
from kit.api import (
    ID_PATTERN,
    USERNAME_PATTERN,
    ApiViewSet,
    EnumFilter,
    IdFilter,
    IsStaffOrReadOnly,
    PdfRenderer,
    acting_user,
)
from projects.access import can_manage_project


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
            requires_progress_report=values["requires_progress_report"],
        )  # fmt: skip
        round_ = self.get_queryset().get(pk=round_.pk)
        return Response(RoundOutputSerializer(round_).data, status=status.HTTP_201_CREATED)

    def _fresh(self, round_: AllocationRound) -> Response:
        return Response(RoundOutputSerializer(self.get_queryset().get(pk=round_.pk)).data)

    @extend_schema(request=RoundUpdateInputSerializer, responses=RoundOutputSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        """Staff: change a round's name, window, period or SU per pool (``round_update``, as
        the staff page); what is left out stays."""
        round_ = self.get_object()
        data = RoundUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        round_update(
            round_=round_, actor=acting_user(request),
            **{name: values.get(name, getattr(round_, name)) for name in
               ("name", "opens_at", "closes_at", "period_start", "period_end")},
            available=values.get("available"),
            requires_progress_report=values.get("requires_progress_report"),
        )  # fmt: skip
        return self._fresh(round_)

    @extend_schema(request=None, responses=RoundOutputSerializer)
    @action(detail=True, methods=["post"])
    def close(self, request: Request, pk: str) -> Response:
        """Staff: close an open round now."""
        round_ = self.get_object()
        round_close(round_=round_, actor=acting_user(request))
        return self._fresh(round_)

    @extend_schema(request=CommitteeSeatInputSerializer, responses=RoundOutputSerializer)
    @action(detail=True, methods=["post"])
    def committee(self, request: Request, pk: str) -> Response:
        """Staff: seat someone on the committee, or name them the chair."""
        round_ = self.get_object()
        data = CommitteeSeatInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        committee_add(
            round_=round_, user=data.validated_data["username"], actor=acting_user(request),
            chair=data.validated_data["chair"],
        )  # fmt: skip
        return self._fresh(round_)

    @extend_schema(request=None, responses={204: None})
    @action(
        detail=True,
        methods=["delete"],
        url_path=rf"committee/(?P<username>{USERNAME_PATTERN})",
        url_name="committee-seat",
    )
    def committee_seat(self, request: Request, pk: str, username: str) -> Response:
        """Staff: take someone off the committee (never the chair: name another first)."""
        round_ = self.get_object()
        seat = get_object_or_404(round_.committee.select_related("user"), user__username=username)
        committee_remove(round_=round_, user=seat.user, actor=acting_user(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=RoundOverviewOutputSerializer)
    @action(detail=True, methods=["get"])
    def overview(self, request: Request, pk: str) -> Response:
        """The chair's view (and staff's): requested against available SU per pool, and each
        submitted request with its average score."""
        round_ = self.get_object()
        overview = round_overview(round_=round_, actor=request.user)
        names = {item.pool.pk: item.pool.name for item in overview["pools"]}
        return Response(RoundOverviewOutputSerializer(overview, context={"pool_names": names}).data)

    # --- The chair's what-if (docs/allocations.md, "Fitting a round to capacity") -----------

    def _draft(self, request: Request, pk: str, draft: str) -> WhatIfDraft:
        """A draft of the round, for whoever may run it; 404 for anyone else."""
        found = what_if_draft_for(user=request.user, round_pk=int(pk), pk=int(draft))
        if found is None:
            raise NotFound()
        return found

    def _what_if(self, request: Request, draft: WhatIfDraft, **kwargs: Any) -> Response:
        view = what_if_view(draft=draft, actor=request.user)
        return Response(WhatIfOutputSerializer(view).data, **kwargs)

    @extend_schema(request=WhatIfInputSerializer, responses={201: WhatIfOutputSerializer})
    @action(
        detail=True, methods=["post"], url_path="what-if", url_name="what-if",
        permission_classes=[IsAuthenticated],
    )  # fmt: skip
    def what_if(self, request: Request, pk: str) -> Response:
        """The chair (and staff): propose grants for the round's requests under review by a
        method, saved as a draft to edit and apply; the proposals and the totals per pool
        against what the round has left."""
        round_ = self.get_object()
        require(can_decide_round(request.user, round_), RUN_ROUND)
        data = WhatIfInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        draft = what_if_draft_create(
            round_=round_, actor=acting_user(request), method=values["method"],
            threshold_su=values["threshold_su"], exponent=values["exponent"],
            floor_su=values["floor_su"],
        )  # fmt: skip
        return self._what_if(request, draft, status=status.HTTP_201_CREATED)

    @extend_schema(responses=WhatIfOutputSerializer)
    @action(
        detail=True, methods=["get"], url_path=rf"what-if/(?P<draft>{ID_PATTERN})",
        url_name="what-if-draft", permission_classes=[IsAuthenticated],
    )  # fmt: skip
    def what_if_draft(self, request: Request, pk: str, draft: str) -> Response:
        """The chair (and staff): a what-if draft as it stands."""
        return self._what_if(request, self._draft(request, pk, draft))

    @extend_schema(request=WhatIfProposalInputSerializer, responses=WhatIfProposalOutputSerializer)
    @action(
        detail=True, methods=["patch"],
        url_path=rf"what-if/(?P<draft>{ID_PATTERN})/proposals/(?P<proposal>{ID_PATTERN})",
        url_name="what-if-proposal", permission_classes=[IsAuthenticated],
    )  # fmt: skip
    def what_if_proposal(self, request: Request, pk: str, draft: str, proposal: str) -> Response:
        """The chair (and staff): change one proposal of a draft not yet applied, with the
        reason its decision will carry."""
        found = self._draft(request, pk, draft)
        item = get_object_or_404(
            what_if_proposals(draft=found, actor=request.user), pk=int(proposal)
        )
        data = WhatIfProposalInputSerializer(data=request.data, partial=False)
        data.is_valid(raise_exception=True)
        item = what_if_proposal_set(
            proposal=item, actor=acting_user(request),
            proposed_su=data.validated_data["proposed_su"],
            reason=data.validated_data["reason"],
        )  # fmt: skip
        (row,) = what_if_proposal_rows(draft=found, actor=request.user, pk=item.pk)
        return Response(WhatIfProposalOutputSerializer(row).data)

    @extend_schema(request=None, responses=WhatIfOutputSerializer)
    @action(
        detail=True, methods=["post"], url_path=rf"what-if/(?P<draft>{ID_PATTERN})/apply",
        url_name="what-if-apply", permission_classes=[IsAuthenticated],
    )  # fmt: skip
    def what_if_apply(self, request: Request, pk: str, draft: str) -> Response:
        """The chair (and staff): decide every request of the draft as it proposes, in one
        step; refused, with nothing changed, if a request changed since the draft, a pool's
        proposals exceed what the round has left, or the draft was applied already."""
        found = what_if_apply(draft=self._draft(request, pk, draft), actor=acting_user(request))
        return self._what_if(request, found)


# --- Requests and reviews -------------------------------------------------------------------


def _request_detail(pk: int) -> AllocationRequest:
    return (
        AllocationRequest.objects.select_related("round", "project", "created_by")
        .prefetch_related(
            "amounts__pool",
            "estimates__partition__cluster",
            "progress_report__outputs",
            "progress_report__updated_by",
            Prefetch("transitions", RequestTransition.objects.select_related("actor")),
        )
        .get(pk=pk)
    )


@extend_schema(tags=["requests"])
class RequestViewSet(ApiViewSet):
    """Applications, top-ups, extensions, renewals and appeals. PIs write their projects'
    requests; the round's committee sees the submitted ones in its round, the chair who decides
    a request (``deciding_round``'s) opens review and decides."""

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
                "progress_report__outputs",
                "progress_report__updated_by",
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
        """The PI (or a manager) starts a request (a draft) of a ``kind``: an application in a
        round, a top-up, an extension, a renewal or an appeal (docs/api.md says what each
        needs): SU per pool and a justification."""
        require(asks_for_changes(request.user), "only a project's PI or manager applies for it")
        data = RequestCreateInputSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        project = values["project"]
        require(
            can_ask_for_change(request.user, project), f"only the PI of {project} applies for it"
        )
        created = request_create(
            round_=values["round"], project=project, actor=acting_user(request),
            kind=values["kind"], justification=values["justification"],
            amounts=values.get("amounts", {}), new_end=values["new_end"],
            appeal_of=values["appeal_of"],
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

    @extend_schema(request=ProgressReportInputSerializer, responses=RequestOutputSerializer)
    @action(detail=True, methods=["put"], url_path="progress-report", url_name="progress-report")
    def progress_report(self, request: Request, pk: str) -> Response:
        """The PI (or a manager) writes a draft renewal's progress report: its text and the
        ids of the project's research outputs it points to; sent again, it replaces both. A
        round that requires reports refuses to submit a renewal without one."""
        request_ = self.get_object()
        project = request_.project
        require(can_manage_project(request.user, project), f"only the PI of {project} edits it")
        data = ProgressReportInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        progress_report_set(
            request=request_, actor=acting_user(request), text=data.validated_data["text"],
            output_ids=data.validated_data["outputs"],
        )  # fmt: skip
        return self._respond(request_)

    @extend_schema(
        responses={
            (200, "application/pdf"): OpenApiResponse(
                OpenApiTypes.BINARY, description="the decision letter, as an attachment"
            )
        }
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, BrowsableAPIRenderer, PdfRenderer],
    )
    def letter(self, request: Request, pk: str) -> HttpResponse:
        """The decision letter of a decided request (PDF): for the project's PI and managers,
        the chair who decided it and staff. An undecided request has no letter (404)."""
        request_ = self.get_object()
        letter = decision_letter_of(request_)
        if letter is None:
            raise NotFound(f"request {request_.pk} is not decided: it has no letter yet")
        require(
            can_read_letter(request.user, request_),
            "only the project's PI and managers, the chair who decides it and centre staff "
            "read a decision letter",
        )
        name = letter_filename(project_code=request_.project.code, request_id=request_.pk)
        response = HttpResponse(letter_pdf(letter), content_type="application/pdf")
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    @extend_schema(request=None, responses=RequestOutputSerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str) -> Response:
        """The PI submits a draft: in a round while it is open; a top-up, an extension or an
        appeal any time."""
        request_ = request_submit(request=self.get_object(), actor=acting_user(request))
        return self._respond(request_)

    @extend_schema(request=None, responses=RequestOutputSerializer)
    @action(detail=True, methods=["post"], url_path="review-start")
    def review_start(self, request: Request, pk: str) -> Response:
        """The round's chair opens a submitted application or renewal for review (a top-up,
        an extension or an appeal is decided without review)."""
        request_ = request_review_start(request=self.get_object(), actor=acting_user(request))
        return self._respond(request_)

    @extend_schema(request=RequestDecideInputSerializer, responses=RequestOutputSerializer)
    @action(detail=True, methods=["post"])
    def decide(self, request: Request, pk: str) -> Response:
        """The chair who decides the request (or staff) grants SU per pool (a reason when it
        differs from the request): an application or a renewal becomes allocations, a top-up
        adds to the current budget period, an extension moves its grant's end, an appeal
        raises the grant it appeals (docs/allocations.md)."""
        request_ = self.get_object()
        require(
            can_decide(request.user, request_),
            "only the round's chair grants SU, never to a project of their own",
        )
        data = RequestDecideInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        request_decide(
            request=request_, actor=acting_user(request),
            granted=data.validated_data["granted"], reason=data.validated_data["reason"],
        )  # fmt: skip
        return self._respond(request_)

    @extend_schema(responses=ApplicantRecordOutputSerializer)
    @action(detail=True, methods=["get"])
    def record(self, request: Request, pk: str) -> Response:
        """The applicant's record: the project's SU granted and used per pool and quarter, its
        jobs' efficiency, the last year's jobs re-priced at the round's rates, the request
        against last year's use, and its outputs (docs/allocations.md). For the request's
        assigned reviewers (all of the committee when none are assigned), the chair and
        staff; never anyone in the project."""
        request_ = self.get_object()
        require(
            can_read_record(request.user, request_),
            "only the request's reviewers, the chair and staff read the applicant's record, "
            "never anyone in the project",
        )
        return Response(ApplicantRecordOutputSerializer(applicant_record(request_)).data)

    def _assignments(self, request_: AllocationRequest) -> Response:
        assignments = request_assignments(request=request_)
        return Response(ReviewAssignmentOutputSerializer(assignments, many=True).data)

    @extend_schema(
        methods=["get"], request=None, responses=ReviewAssignmentOutputSerializer(many=True)
    )
    @extend_schema(
        methods=["post"],
        request=ReviewAssignInputSerializer,
        responses=ReviewAssignmentOutputSerializer(many=True),
    )
    @action(detail=True, methods=["get", "post"], pagination_class=None, filter_backends=[])
    def assignments(self, request: Request, pk: str) -> Response:
        """The committee members assigned to review the request (none: the whole committee
        reviews it). The chair (or staff) assigns one with ``POST`` (``username``): never a
        member with a conflict of interest."""
        request_ = self.get_object()
        require(
            can_assign_reviewers(request.user, request_),
            "only the round's chair assigns reviewers, never to a request of their own project",
        )
        if request.method == "POST":
            data = ReviewAssignInputSerializer(data=request.data)
            data.is_valid(raise_exception=True)
            review_assign(
                request=request_, reviewer=data.validated_data["username"],
                actor=acting_user(request),
            )  # fmt: skip
        return self._assignments(request_)

    @extend_schema(request=None, responses={204: None})
    @action(
        detail=True,
        methods=["delete"],
        url_path=rf"assignments/(?P<username>{USERNAME_PATTERN})",
        url_name="assignment",
    )
    def assignment(self, request: Request, pk: str, username: str) -> Response:
        """The chair (or staff) takes a reviewer off the request."""
        request_ = self.get_object()
        require(
            can_assign_reviewers(request.user, request_),
            "only the round's chair assigns reviewers, never to a request of their own project",
        )
        assigned = get_object_or_404(
            request_.assignments.select_related("reviewer"), reviewer__username=username
        )
        review_unassign(request=request_, reviewer=assigned.reviewer, actor=acting_user(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


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

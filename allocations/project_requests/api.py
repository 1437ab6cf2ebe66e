"""REST API of project requests (docs/api.md): anyone signed in asks for a new project; the
named PI confirms; staff and the centre's approvers approve, ask for changes or reject.

Views are thin: the queryset is what the caller may read (anything else is 404), the service
checks who acts (403) before the input (400), an output serializer renders."""

from __future__ import annotations

import django_filters  # type: ignore[import-untyped]
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from allocations.access import (
    approves_project_requests,
    can_confirm_project_request,
    can_edit_project_request,
    project_requests_visible,
)
from allocations.models import ProjectRequest
from allocations.project_requests.selectors import project_requests_detailed
from allocations.project_requests.serializers import (
    ProjectRequestApproveInputSerializer,
    ProjectRequestConfirmInputSerializer,
    ProjectRequestCreateInputSerializer,
    ProjectRequestEstimateInputSerializer,
    ProjectRequestEstimateOutputSerializer,
    ProjectRequestOutputSerializer,
    ProjectRequestReasonInputSerializer,
    ProjectRequestResubmitInputSerializer,
    estimate_line,
)
from allocations.project_requests.services import (
    DECIDERS,
    project_request_approve,
    project_request_changes_ask,
    project_request_create,
    project_request_estimate_add,
    project_request_pi_answer,
    project_request_reject,
    project_request_resubmit,
)
from kit.access import require
from kit.api import ID_PATTERN, ApiViewSet, EnumFilter, acting_user


class ProjectRequestFilter(django_filters.FilterSet):
    state = EnumFilter(choices=ProjectRequest.State.choices)

    class Meta:
        model = ProjectRequest
        fields: list[str] = []


@extend_schema(tags=["project requests"])
class ProjectRequestViewSet(ApiViewSet):
    """Requests for new projects: the requester's own and those naming the caller as PI;
    every one for staff and the centre's approvers."""

    serializer_class = ProjectRequestOutputSerializer
    lookup_value_regex = ID_PATTERN
    filterset_class = ProjectRequestFilter
    ordering_fields = ["created_at", "id"]
    ordering = ["-created_at", "-id"]

    def get_queryset(self) -> QuerySet[ProjectRequest]:
        return project_requests_detailed(project_requests_visible(user=self.request.user))

    def _respond(self, request_: ProjectRequest, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=request_.pk)
        return Response(ProjectRequestOutputSerializer(fresh).data, status=code)

    def list(self, request: Request) -> Response:
        """Project requests the caller may read, the newest first; ``?state=`` filters."""
        return self.paginated(
            self.filter_queryset(self.get_queryset()), ProjectRequestOutputSerializer
        )

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(ProjectRequestOutputSerializer(self.get_object()).data)

    @extend_schema(
        request=ProjectRequestCreateInputSerializer, responses={201: ProjectRequestOutputSerializer}
    )
    def create(self, request: Request) -> Response:
        """Anyone signed in asks for a new project: title, abstract, field of science, the PI
        (username or e-mail; blank: the caller), SU per pool and estimate lines."""
        data = ProjectRequestCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        created = project_request_create(
            requester=acting_user(request), title=values["title"], abstract=values["abstract"],
            field_of_science=values["field_of_science"], pi=values["pi"],
            amounts=values["amounts"],
            estimates=[estimate_line(item) for item in values["estimates"]],
        )  # fmt: skip
        return self._respond(created, status.HTTP_201_CREATED)

    @extend_schema(
        request=ProjectRequestEstimateInputSerializer,
        responses={201: ProjectRequestEstimateOutputSerializer},
    )
    @action(detail=True, methods=["post"])
    def estimates(self, request: Request, pk: str) -> Response:
        """The requester adds an estimate line, priced by the quote engine."""
        request_ = self.get_object()
        require(
            can_edit_project_request(request.user, request_), "only the person who asked edits it"
        )
        data = ProjectRequestEstimateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        line = project_request_estimate_add(
            request=request_, actor=acting_user(request), line=data.line()
        )
        return Response(
            ProjectRequestEstimateOutputSerializer(line).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        request=ProjectRequestConfirmInputSerializer, responses=ProjectRequestOutputSerializer
    )
    @action(detail=True, methods=["post"])
    def confirm(self, request: Request, pk: str) -> Response:
        """The person named PI confirms (``accept: true``) or declines."""
        request_ = self.get_object()
        require(
            can_confirm_project_request(request.user, request_),
            "only the person named PI confirms it",
        )
        data = ProjectRequestConfirmInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project_request_pi_answer(
            request=request_, actor=acting_user(request),
            accept=data.validated_data["accept"], reason=data.validated_data["reason"],
        )  # fmt: skip
        return self._respond(request_)

    @extend_schema(
        request=ProjectRequestResubmitInputSerializer, responses=ProjectRequestOutputSerializer
    )
    @action(detail=True, methods=["post"])
    def resubmit(self, request: Request, pk: str) -> Response:
        """The requester makes the changes asked for (any field given) and resubmits."""
        request_ = self.get_object()
        require(
            can_edit_project_request(request.user, request_),
            "only the person who asked resubmits it",
        )
        data = ProjectRequestResubmitInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        project_request_resubmit(
            request=request_, actor=acting_user(request), title=values.get("title"),
            abstract=values.get("abstract"), field_of_science=values.get("field_of_science"),
            amounts=values.get("amounts"),
        )  # fmt: skip
        return self._respond(request_)

    @extend_schema(
        request=ProjectRequestApproveInputSerializer, responses=ProjectRequestOutputSerializer
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        """Staff or an approver approve: the project, its members, its start-up grants and a
        Slurm plan for review."""
        request_ = self.get_object()
        require(approves_project_requests(request.user), DECIDERS)
        data = ProjectRequestApproveInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        project_request_approve(
            request=request_, actor=acting_user(request), code=values["code"],
            period_start=values.get("period_start"), period_end=values.get("period_end"),
            granted=values.get("granted"), reason=values["reason"],
        )  # fmt: skip
        return self._respond(request_)

    @extend_schema(
        request=ProjectRequestReasonInputSerializer, responses=ProjectRequestOutputSerializer
    )
    @action(detail=True, methods=["post"], url_path="request-changes")
    def request_changes(self, request: Request, pk: str) -> Response:
        """Staff or an approver send the request back to its requester (``reason``: what to
        change)."""
        request_ = self.get_object()
        require(approves_project_requests(request.user), DECIDERS)
        data = ProjectRequestReasonInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project_request_changes_ask(
            request=request_, actor=acting_user(request), reason=data.validated_data["reason"]
        )
        return self._respond(request_)

    @extend_schema(
        request=ProjectRequestReasonInputSerializer, responses=ProjectRequestOutputSerializer
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        """Staff or an approver reject the request, with a ``reason``."""
        request_ = self.get_object()
        require(approves_project_requests(request.user), DECIDERS)
        data = ProjectRequestReasonInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project_request_reject(
            request=request_, actor=acting_user(request), reason=data.validated_data["reason"]
        )
        return self._respond(request_)

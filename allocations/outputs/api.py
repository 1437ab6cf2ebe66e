"""REST API of research outputs (docs/api.md), a sub-resource of a project:

- ``/api/v1/projects/<code>/outputs/``: list (members, staff), create (PI, managers, staff);
- ``/api/v1/projects/<code>/outputs/<id>/``: read, change (PATCH), delete;
- ``/api/v1/projects/<code>/outputs/bibtex/``: GET the outputs as BibTeX, POST a .bib file;
- ``/api/v1/projects/<code>/outputs/csv/``: GET the outputs as CSV.

A project the caller may not see is 404; a write by a member who may not edit is 403 with the
rule, before the body is read."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from allocations.access import can_edit_outputs
from allocations.grants.api import project_visible
from allocations.models import ResearchOutput
from allocations.outputs.exports import outputs_bibtex, outputs_csv
from allocations.outputs.selectors import outputs_since
from allocations.outputs.serializers import (
    BibtexUploadInputSerializer,
    BibtexUploadOutputSerializer,
    OutputInputSerializer,
    OutputOutputSerializer,
)
from allocations.outputs.services import (
    output_add,
    output_delete,
    output_update,
    outputs_import_bibtex,
)
from kit.access import require
from kit.api import ApiViewSet, acting_user
from projects.models import Project


def _project(request: Request, code: str, *, edit: bool = False) -> Project:
    project = project_visible(user=request.user, code=code)
    if edit:
        require(
            can_edit_outputs(request.user, project),
            f"only the PI or a manager of {project} changes its research outputs",
        )
    return project


@extend_schema(tags=["projects"])
class ProjectOutputViewSet(ApiViewSet):
    """A project's research outputs: its members read them; its PI, managers and staff add,
    change and delete them."""

    serializer_class = OutputOutputSerializer
    filter_backends: list[Any] = []

    def list(self, request: Request, code: str) -> Response:
        """The outputs, by kind, newest year first."""
        project = _project(request, code)
        outputs = outputs_since(project, None).select_related("project", "added_by")
        return self.paginated(outputs, OutputOutputSerializer)

    def retrieve(self, request: Request, code: str, pk: str) -> Response:
        project = _project(request, code)
        output = get_object_or_404(
            ResearchOutput.objects.select_related("added_by"), project=project, pk=pk
        )
        return Response(OutputOutputSerializer(output).data)

    @extend_schema(request=OutputInputSerializer, responses={201: OutputOutputSerializer})
    def create(self, request: Request, code: str) -> Response:
        """Add an output; each kind's rules as the form's (a publication's DOI normalised to
        ``10.nnnn/suffix``, a grant's funder, a data set's URL)."""
        project = _project(request, code, edit=True)
        data = OutputInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        output = output_add(
            project=project, actor=acting_user(request), details=data.validated_data["details"]
        )
        return Response(OutputOutputSerializer(output).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=OutputInputSerializer, responses={200: OutputOutputSerializer})
    def partial_update(self, request: Request, code: str, pk: str) -> Response:
        """Change an output: the fields sent; the others keep their values."""
        project = _project(request, code, edit=True)
        output = get_object_or_404(ResearchOutput, project=project, pk=pk)
        data = OutputInputSerializer(data=request.data, partial=True, context={"output": output})
        data.is_valid(raise_exception=True)
        output = output_update(
            output=output, actor=acting_user(request), details=data.validated_data["details"]
        )
        return Response(OutputOutputSerializer(output).data)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, code: str, pk: str) -> Response:
        project = _project(request, code, edit=True)
        output = get_object_or_404(ResearchOutput, project=project, pk=pk)
        output_delete(output=output, actor=acting_user(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProjectOutputsBibtexView(APIView):
    """A project's outputs as BibTeX (GET), and publications added from a .bib file (POST)."""

    parser_classes = [MultiPartParser]

    @extend_schema(
        tags=["projects"],
        responses={(200, "application/x-bibtex"): OpenApiResponse(OpenApiTypes.STR)},
    )
    def get(self, request: Request, code: str) -> HttpResponse:
        """Every output: publications as @article, @inproceedings or @misc with their DOI,
        the other kinds as @misc with their URL and a note (docs/allocations.md)."""
        project = _project(request, code)
        text = outputs_bibtex(outputs_since(project, None), key_prefix=project.code)
        return HttpResponse(text, content_type="application/x-bibtex; charset=utf-8")

    @extend_schema(
        tags=["projects"],
        request={"multipart/form-data": BibtexUploadInputSerializer},
        responses={201: BibtexUploadOutputSerializer},
    )
    def post(self, request: Request, code: str) -> Response:
        """Upload a .bib file (``file``, at most 1 MiB): each entry becomes a publication; an
        entry with no title, a malformed DOI, a DOI the project already has, or that does not
        parse is listed in ``problems`` with its reason, and the others are added. A file that
        is not BibTeX is a 400 (``errors.file``) and adds nothing."""
        project = _project(request, code, edit=True)
        data = BibtexUploadInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = outputs_import_bibtex(
            project=project, actor=acting_user(request), content=data.validated_data["file"]
        )
        body = BibtexUploadOutputSerializer.body(result.added, result.problems)
        return Response(body, status=status.HTTP_201_CREATED)


class ProjectOutputsCsvView(APIView):
    """A project's outputs as CSV."""

    @extend_schema(
        tags=["projects"],
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR)},
    )
    def get(self, request: Request, code: str) -> HttpResponse:
        """Every output, one row each, with a header (the columns of the JSON)."""
        project = _project(request, code)
        rows = (
            (output, output.added_by.get_username(), output.added_at.isoformat())
            for output in outputs_since(project, None).select_related("added_by")
        )
        return HttpResponse(outputs_csv(rows), content_type="text/csv; charset=utf-8")

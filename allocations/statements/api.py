"""``GET /api/v1/projects/<code>/statements/<YYYY-MM>.<pdf|xlsx|csv>``: a project's monthly
statement (docs/costs.md, "Statements"), for its PI, its managers and staff.

A project the caller may not see is 404; a member who is neither PI nor manager gets 403 with
the rule, before the month is read; a month to come is 400 with the sentence."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from allocations.grants.api import project_visible
from allocations.statements.assembly import month_parse, statement_filename
from allocations.statements.formats import FORMATS, format_get
from allocations.statements.selectors import statement_get
from kit.access import require
from projects.access import can_manage_project


class ProjectStatementView(APIView):
    """A project's statement of one month as PDF, XLSX or CSV."""

    @extend_schema(
        tags=["projects"],
        parameters=[
            OpenApiParameter(
                "month",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                pattern=r"^[0-9]{4}-[0-9]{2}$",
                description="the month, YYYY-MM; one that has not begun is a 400",
            ),
            OpenApiParameter(
                "file_format",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                enum=sorted(FORMATS),
                description="pdf, xlsx or csv",
            ),
        ],
        responses={
            (200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY),
            (
                200,
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            ): OpenApiResponse(OpenApiTypes.BINARY),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
        },
    )
    def get(self, request: Request, code: str, month: str, file_format: str) -> HttpResponse:
        """The month's opening and closing balance per pool, every adjustment as its own line,
        the SU charged per partition, the money by cost model (jobs, node-hours, energy) and
        the totals; "provisional" while the month may still change."""
        project = project_visible(user=request.user, code=code)
        require(
            can_manage_project(request.user, project),
            f"only the PI or a manager of {project} reads its statements",
        )
        first_day = month_parse(month, today=timezone.localdate())
        renderer = format_get(file_format)
        content = renderer.render(statement_get(project=project, month=first_day))
        response = HttpResponse(content, content_type=renderer.content_type)
        name = statement_filename(code=project.code, month=first_day, extension=file_format)
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

"""REST API of energy and carbon (docs/api.md, docs/energy-and-carbon.md)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.carbon.selectors import project_footprint_monthly
from accounting.carbon.serializers import CarbonQuerySerializer, ProjectCarbonOutputSerializer
from projects.access import projects_visible


class ProjectCarbonView(APIView):
    """A project's energy and CO2e per month and cluster."""

    @extend_schema(
        tags=["projects"], parameters=[CarbonQuerySerializer],
        responses=ProjectCarbonOutputSerializer,
    )  # fmt: skip
    def get(self, request: Request, code: str) -> Response:
        """Energy (measured by Slurm where it measured, the engine's estimate elsewhere) and
        CO2e at each day's grid intensity, per month and cluster, over the days
        [start, end). Reads the daily roll-ups, never the jobs."""
        project = get_object_or_404(projects_visible(user=request.user), code=code)
        query = CarbonQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.validated_data["start"], query.validated_data["end"]
        months = project_footprint_monthly(project=project, start=start, end=end)
        return Response(
            ProjectCarbonOutputSerializer(
                {"project": project.code, "start": start, "end": end, "months": months}
            ).data
        )

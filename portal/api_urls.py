"""URLs of the REST API, version 1 (docs/api.md), included under /api/v1/ by portal/urls.py.

Resources are plural and kebab-case; every path ends with ``/`` as DRF's routers make them.
"""

from __future__ import annotations

from django.urls import include, path, re_path
from rest_framework.routers import SimpleRouter

from accounting import api as accounting_api
from allocations import api as allocations_api
from portal import api
from portal.api import CODE_PATTERN, USERNAME_PATTERN

router = SimpleRouter()
router.register("clusters", accounting_api.ClusterViewSet, basename="cluster")
router.register("partitions", accounting_api.PartitionViewSet, basename="partition")
router.register("jobs", accounting_api.JobViewSet, basename="job")
router.register("usage", accounting_api.UsageViewSet, basename="usage")
router.register("imports", accounting_api.ImportRunViewSet, basename="import")
router.register(
    "quarantined-lines", accounting_api.QuarantinedLineViewSet, basename="quarantined-line"
)
router.register("projects", allocations_api.ProjectViewSet, basename="project")
router.register("allocations", allocations_api.AllocationViewSet, basename="allocation")
router.register("rounds", allocations_api.RoundViewSet, basename="round")
router.register("requests", allocations_api.RequestViewSet, basename="request")
router.register("reviews", allocations_api.ReviewViewSet, basename="review")
router.register("adjustments", allocations_api.AdjustmentViewSet, basename="adjustment")

members = allocations_api.ProjectMemberViewSet

app_name = "api"

urlpatterns = [
    path("auth/token/", api.TokenObtainView.as_view(), name="token-obtain"),
    path("auth/token/regenerate/", api.TokenRegenerateView.as_view(), name="token-regenerate"),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/members/$",
        members.as_view({"get": "list", "post": "create"}),
        name="project-member-list",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/members/(?P<username>{USERNAME_PATTERN})/$",
        members.as_view({"get": "retrieve", "delete": "destroy"}),
        name="project-member-detail",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/balance/$",
        allocations_api.ProjectBalanceView.as_view(),
        name="project-balance",
    ),
    path("quote/", accounting_api.QuoteView.as_view(), name="quote"),
    path("cost-ratio/", accounting_api.CostRatioView.as_view(), name="cost-ratio"),
    # utilisation/: Q(T) and true overhead land here with the utilisation issue, as
    # path("utilisation/", accounting_api.UtilisationView.as_view(), name="utilisation").
    path("", include(router.urls)),
    # Anything else under /api/v1/ is a JSON 404, like every other API error.
    re_path(r"^.*$", api.not_found, name="not-found"),
]

"""URLs of the REST API, version 1 (docs/api.md), included under /api/v1/ by portal/urls.py.

Resources are plural and kebab-case; every path ends with ``/`` as DRF's routers make them.
"""

from __future__ import annotations

from django.urls import include, path, re_path
from rest_framework.routers import SimpleRouter

from accounting.carbon import api as carbon_api
from accounting.clusters import api as clusters_api
from accounting.costs import api as cost_api
from accounting.ledger import api as ledger_api
from accounting.utilisation import api as utilisation_api
from accounting.utilisation import overhead_api
from allocations.grants import api as grants_api
from allocations.outputs import api as outputs_api
from allocations.pools import api as pools_api
from allocations.priorities import api as priority_api
from allocations.project_requests import api as project_requests_api
from allocations.rounds import api as rounds_api
from allocations.statements import api as statements_api
from kit import api
from kit.api import CODE_PATTERN, ID_PATTERN, NAME_PATTERN, USERNAME_PATTERN
from people import api as people_api

router = SimpleRouter()
router.register("clusters", clusters_api.ClusterViewSet, basename="cluster")
router.register("partitions", clusters_api.PartitionViewSet, basename="partition")
router.register("jobs", ledger_api.JobViewSet, basename="job")
router.register("usage", ledger_api.UsageViewSet, basename="usage")
router.register("imports", ledger_api.ImportRunViewSet, basename="import")
router.register("quarantined-lines", ledger_api.QuarantinedLineViewSet, basename="quarantined-line")
router.register("projects", grants_api.ProjectViewSet, basename="project")
router.register("allocations", grants_api.AllocationViewSet, basename="allocation")
router.register("rounds", rounds_api.RoundViewSet, basename="round")
router.register("pools", pools_api.PoolViewSet, basename="pool")
router.register("requests", rounds_api.RequestViewSet, basename="request")
router.register("reviews", rounds_api.ReviewViewSet, basename="review")
router.register("adjustments", grants_api.AdjustmentViewSet, basename="adjustment")
router.register(
    "project-requests", project_requests_api.ProjectRequestViewSet, basename="project-request"
)
router.register(
    "profiling-coefficients",
    priority_api.ProfilingCoefficientViewSet,
    basename="profiling-coefficient",
)

members = grants_api.ProjectMemberViewSet
invitations = grants_api.ProjectInvitationViewSet
outputs = outputs_api.ProjectOutputViewSet

app_name = "api"

# The API root's links: every list of the router, and the calculators and reports.
ROOT_LINKS = (
    *((prefix, f"api:{basename}-list") for prefix, _, basename in router.registry),
    ("quote", "api:quote"),
    ("cost-ratio", "api:cost-ratio"),
    ("utilisation", "api:utilisation"),
    ("cost-distribution", "api:cost-distribution"),
    ("priorities", "api:priorities"),
    ("overhead", "api:overhead"),
    ("efficiency", "api:efficiency"),
)

urlpatterns = [
    path("", api.ApiRootView.as_view(resources=ROOT_LINKS), name="root"),
    path("auth/token/", people_api.TokenObtainView.as_view(), name="token-obtain"),
    path(
        "auth/token/regenerate/", people_api.TokenRegenerateView.as_view(), name="token-regenerate"
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/members/$",
        members.as_view({"get": "list", "post": "create"}),
        name="project-member-list",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/members/(?P<username>{USERNAME_PATTERN})/$",
        members.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="project-member-detail",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/invitations/$",
        invitations.as_view({"get": "list", "post": "create"}),
        name="project-invitation-list",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/invitations/(?P<pk>{ID_PATTERN})/$",
        invitations.as_view({"delete": "destroy"}),
        name="project-invitation-detail",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/balance/$",
        grants_api.ProjectBalanceView.as_view(),
        name="project-balance",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/carbon/$",
        carbon_api.ProjectCarbonView.as_view(),
        name="project-carbon",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/outputs/$",
        outputs.as_view({"get": "list", "post": "create"}),
        name="project-output-list",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/outputs/bibtex/$",
        outputs_api.ProjectOutputsBibtexView.as_view(),
        name="project-output-bibtex",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/outputs/csv/$",
        outputs_api.ProjectOutputsCsvView.as_view(),
        name="project-output-csv",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/outputs/(?P<pk>{ID_PATTERN})/$",
        outputs.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="project-output-detail",
    ),
    re_path(
        rf"^projects/(?P<code>{CODE_PATTERN})/statements/"
        r"(?P<month>[0-9]{4}-[0-9]{2})\.(?P<file_format>pdf|xlsx|csv)$",
        statements_api.ProjectStatementView.as_view(),
        name="project-statement",
    ),
    path("quote/", clusters_api.QuoteView.as_view(), name="quote"),
    path("cost-ratio/", clusters_api.CostRatioView.as_view(), name="cost-ratio"),
    path("utilisation/", utilisation_api.UtilisationView.as_view(), name="utilisation"),
    path("cost-distribution/", cost_api.CostDistributionView.as_view(), name="cost-distribution"),
    path("priorities/", priority_api.PrioritiesView.as_view(), name="priorities"),
    re_path(
        rf"^priority-policies/(?P<cluster>{NAME_PATTERN})/$",
        priority_api.PriorityPolicyView.as_view(),
        name="priority-policy",
    ),
    path("overhead/", overhead_api.OverheadView.as_view(), name="overhead"),
    path("rates-impact/", grants_api.RatesImpactView.as_view(), name="rates-impact"),
    re_path(
        rf"^rate-drafts/(?P<pk>{ID_PATTERN})/$",
        grants_api.RateDraftView.as_view(),
        name="rate-draft",
    ),
    path("efficiency/", ledger_api.EfficiencyView.as_view(), name="efficiency"),
    path("", include(router.urls)),
    # Anything else under /api/v1/ is a JSON 404, like every other API error.
    re_path(r"^.*$", api.not_found, name="not-found"),
]

from django.urls import path

from accounting.carbon import pages as carbon_pages
from accounting.clusters import pages as cluster_pages
from accounting.costs import pages as cost_pages
from accounting.ledger import efficiency_pages
from accounting.ledger import pages as ledger_pages
from accounting.utilisation import overhead_pages
from accounting.utilisation import pages as utilisation_pages

app_name = "accounting"

urlpatterns = [
    path("partitions/", cluster_pages.partition_list, name="partition-list"),
    path("imports/", ledger_pages.import_list, name="import-list"),
    path("imports/<int:pk>/", ledger_pages.import_detail, name="import-detail"),
    path("quarantine/", ledger_pages.quarantine_list, name="quarantine-list"),
    path("quarantine/retry/", ledger_pages.quarantine_retry, name="quarantine-retry"),
    path("utilisation/", utilisation_pages.utilisation, name="utilisation"),
    path("overhead/", overhead_pages.overhead_page, name="overhead"),
    path("efficiency/", efficiency_pages.efficiency_top, name="efficiency-top"),
    # Researchers' pages
    path("projects/<str:code>/jobs/", ledger_pages.project_jobs, name="project-jobs"),
    path("projects/<str:code>/energy/", carbon_pages.project_energy, name="project-energy"),
    path(
        "projects/<str:code>/efficiency/",
        efficiency_pages.project_efficiency,
        name="project-efficiency",
    ),
    path("jobs/<int:pk>/", ledger_pages.job_detail, name="job-detail"),
    path("quote/", cluster_pages.quote, name="quote"),
    path("cost-ratio/", cluster_pages.cost_ratio_explorer, name="cost-ratio"),
    path("cost-ratio/live/", cluster_pages.cost_ratio_live, name="cost-ratio-live"),
    path("clusters/<slug:name>/cost-models/", cost_pages.cost_models, name="cost-models"),
    path("costs/", cost_pages.cost_distribution, name="cost-distribution"),
    path(
        "clusters/<slug:name>/grid-intensity/",
        carbon_pages.grid_intensity,
        name="grid-intensity",
    ),
]

from django.urls import path

from accounting import cost_pages, overhead_pages, pages, utilisation_pages, views

app_name = "accounting"

urlpatterns = [
    path("partitions/", views.partition_list, name="partition-list"),
    path("imports/", views.import_list, name="import-list"),
    path("imports/<int:pk>/", views.import_detail, name="import-detail"),
    path("quarantine/", views.quarantine_list, name="quarantine-list"),
    path("quarantine/retry/", views.quarantine_retry, name="quarantine-retry"),
    path("utilisation/", utilisation_pages.utilisation, name="utilisation"),
    path("overhead/", overhead_pages.overhead_page, name="overhead"),
    # Researchers' pages
    path("projects/<str:code>/jobs/", pages.project_jobs, name="project-jobs"),
    path("jobs/<int:pk>/", pages.job_detail, name="job-detail"),
    path("quote/", pages.quote, name="quote"),
    path("cost-ratio/", pages.cost_ratio_explorer, name="cost-ratio"),
    path("cost-ratio/live/", pages.cost_ratio_live, name="cost-ratio-live"),
    path("clusters/<slug:name>/cost-models/", cost_pages.cost_models, name="cost-models"),
    path("costs/", cost_pages.cost_distribution, name="cost-distribution"),
]

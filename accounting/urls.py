from django.urls import path

from accounting import pages, views

app_name = "accounting"

urlpatterns = [
    path("partitions/", views.partition_list, name="partition-list"),
    path("imports/", views.import_list, name="import-list"),
    path("imports/<int:pk>/", views.import_detail, name="import-detail"),
    path("quarantine/", views.quarantine_list, name="quarantine-list"),
    path("quarantine/retry/", views.quarantine_retry, name="quarantine-retry"),
    # Researchers' pages
    path("projects/<str:code>/jobs/", pages.project_jobs, name="project-jobs"),
    path("jobs/<int:pk>/", pages.job_detail, name="job-detail"),
    path("quote/", pages.quote, name="quote"),
    path("cost-ratio/", pages.cost_ratio_explorer, name="cost-ratio"),
    path("cost-ratio/live/", pages.cost_ratio_live, name="cost-ratio-live"),
]

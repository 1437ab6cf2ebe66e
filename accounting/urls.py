from django.urls import path

from accounting import views

app_name = "accounting"

urlpatterns = [
    path("partitions/", views.partition_list, name="partition-list"),
    path("imports/", views.import_list, name="import-list"),
    path("imports/<int:pk>/", views.import_detail, name="import-detail"),
    path("quarantine/", views.quarantine_list, name="quarantine-list"),
    path("quarantine/retry/", views.quarantine_retry, name="quarantine-retry"),
]

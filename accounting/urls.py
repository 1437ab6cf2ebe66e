from django.urls import path

from accounting import views

app_name = "accounting"

urlpatterns = [
    path("partitions/", views.partition_list, name="partition-list"),
]

from django.urls import path

from allocations import views

app_name = "allocations"

urlpatterns = [
    path("enforcement/", views.enforcement_list, name="enforcement-list"),
    path("enforcement/<int:pk>/", views.enforcement_decide, name="enforcement-decide"),
]

"""Root URL configuration."""

from django.contrib import admin
from django.urls import include, path

from portal import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz/", views.healthz, name="healthz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("accounting/", include("accounting.urls")),
    path("allocations/", include("allocations.urls")),
    path("admin/", admin.site.urls),
]

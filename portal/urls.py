"""Root URL configuration."""

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from kit import api
from people import pages as people_pages
from portal import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz/", views.healthz, name="healthz"),
    path("readyz/", views.readyz, name="readyz"),
    path("audit/", views.audit_log, name="audit"),
    path("accounts/login/", people_pages.SignInView.as_view(), name="login"),
    path(
        "accounts/password_reset/",
        people_pages.PasswordResetThrottled.as_view(),
        name="password_reset",
    ),  # throttled (docs/sign-in.md); Django's other password pages as they are:
    path("accounts/", include("django.contrib.auth.urls")),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("account/", include("people.urls")),
    path("accounting/", include("accounting.urls")),
    path("allocations/", include("allocations.urls")),
    path("admin/", admin.site.urls),
    # REST API (docs/api.md): v1, its OpenAPI schema and the offline Swagger UI / Redoc.
    path("api/v1/", include("portal.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/docs/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    re_path(r"^api/", api.not_found),
]

# Errors raised outside the API's views (a bad Host header, a body over the size limit, an
# uncaught exception): JSON under /api/, Django's pages elsewhere.
handler400 = api.bad_request
handler403 = api.permission_denied
handler404 = api.page_not_found
handler500 = api.server_error

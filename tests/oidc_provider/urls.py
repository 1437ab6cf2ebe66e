from django.contrib.auth.views import LoginView
from django.urls import include, path

urlpatterns = [
    path("login/", LoginView.as_view(template_name="idp/login.html"), name="login"),
    path("openid/", include("oidc_provider.urls", namespace="oidc_provider")),
]

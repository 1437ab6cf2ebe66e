from django.apps import AppConfig


class PortalConfig(AppConfig):
    """Site pages (home, dashboards), demo data and operational tasks."""

    name = "portal"
    default_auto_field = "django.db.models.BigAutoField"

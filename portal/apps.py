from django.apps import AppConfig


class PortalConfig(AppConfig):
    """Site pages (home, dashboards), demo data, operational tasks and the audit log."""

    name = "portal"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from portal.audit import audit_register

        audit_register()

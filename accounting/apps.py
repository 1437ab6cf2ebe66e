from django.apps import AppConfig


class AccountingConfig(AppConfig):
    """Clusters, partitions and their rate versions, charging, sacct import, usage."""

    name = "accounting"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounting.quarantine import projects_created_received
        from projects.signals import projects_created

        projects_created.connect(projects_created_received, dispatch_uid="accounting-quarantine")

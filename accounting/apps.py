from django.apps import AppConfig


class AccountingConfig(AppConfig):
    """Clusters, partitions and their rate versions, charging, sacct import, usage."""

    name = "accounting"
    default_auto_field = "django.db.models.BigAutoField"

from django.apps import AppConfig


class AllocationsConfig(AppConfig):
    """Projects, memberships, allocation rounds, reviews, grants, balances and adjustments."""

    name = "allocations"
    default_auto_field = "django.db.models.BigAutoField"

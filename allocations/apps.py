from django.apps import AppConfig


class AllocationsConfig(AppConfig):
    """Allocation rounds, reviews, grants, balances, adjustments, enforcement, priorities and
    Slurm provisioning."""

    name = "allocations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounting.signals import charges_booked
        from allocations.grants.services import charges_booked_received

        charges_booked.connect(charges_booked_received, dispatch_uid="allocations-slurm-limits")

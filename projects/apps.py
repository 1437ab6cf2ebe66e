from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    """Projects, memberships, invitations and resource pools: what accounting and allocations
    both stand on, with the project access rules and the Slurm account naming."""

    name = "projects"
    default_auto_field = "django.db.models.BigAutoField"

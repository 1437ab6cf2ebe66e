"""Projects and memberships (a project's code is its Slurm account).

Rounds, requests, reviews, grants, balances and adjustments arrive with the allocations issue.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Project(models.Model):
    """A research project; ``code`` is the Slurm account its jobs run under."""

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        EXPIRED = "expired", "expired"
        SUSPENDED = "suspended", "suspended"

    code = models.CharField(max_length=64, unique=True, help_text="Slurm account name")
    title = models.CharField(max_length=300, blank=True)
    pi = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="led_projects",
        verbose_name="PI",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    field_of_science = models.CharField(max_length=120, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["code"]

    def __str__(self) -> str:
        return self.code


class Membership(models.Model):
    """A user's role in a project."""

    class Role(models.TextChoices):
        PI = "pi", "PI"
        MEMBER = "member", "member"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    notify = models.BooleanField(default=False, help_text="e-mail me when the balance runs low")
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"

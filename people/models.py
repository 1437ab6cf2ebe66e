"""A person's API tokens, stored as digests only."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class ApiToken(models.Model):
    """A named token a person made at /account/tokens/ (or with a password at
    POST /api/v1/auth/token/). The database holds the SHA-256 digest of the token, never the
    token: whoever reads the table cannot call the API with what they read."""

    class Scope(models.TextChoices):
        READ = "read", "read-only"
        WRITE = "write", "read and write"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The first characters of the token, shown so its owner can tell their tokens apart.
    prefix = models.CharField(max_length=12)
    digest = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=5, choices=Scope.choices, default=Scope.READ)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "name"],
                condition=Q(revoked_at__isnull=True),
                name="api_token_name_unique_while_active",
            ),
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")),
                name="api_token_expires_after_creation",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user}"


class MailSettings(models.Model):
    """Which e-mail a person wants from the portal (/account/notifications/); everything is on
    until they turn it off. Invitations always go: they are addressed to someone not yet in."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mail_settings"
    )
    allocation_events = models.BooleanField(
        default=True,
        help_text="requests submitted to my round, reviews assigned to me, decisions on my "
        "projects' requests",
    )
    budget_alerts = models.BooleanField(
        default=True, help_text="my projects crossing their budget thresholds (75, 90, 100 %)"
    )
    efficiency_summary = models.BooleanField(
        default=True,
        help_text="on the 1st of each month, the projects I lead: SU charged, SU left on the "
        "table, CPU and memory efficiency, the users and jobs to look at",
    )
    grant_endings = models.BooleanField(
        default=True,
        help_text="a grant of a project I lead or manage ends in 30, 14 and 7 days; the final "
        "usage summary of a project I lead when its last grant has ended",
    )

    def __str__(self) -> str:
        return f"mail settings of {self.user}"


class PasswordResetRequest(models.Model):
    """One password-reset mail asked for: the rows people/passwords.py counts per e-mail address
    and per client address. In the database, so every web process sees the same count."""

    email = models.CharField(max_length=254, help_text="as typed, in lower case")
    address = models.GenericIPAddressField(null=True, blank=True)
    requested_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["email", "requested_at"]),
            models.Index(fields=["address", "requested_at"]),
        ]

    def __str__(self) -> str:
        return f"password reset for {self.email} from {self.address} at {self.requested_at}"

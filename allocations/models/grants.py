"""Grants, their budget periods, adjustments, and the notices sent about balances.

SU are Decimal with 6 places everywhere, like the ledger of charges."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from allocations.models.rounds import AllocationRequest
from kit import numbers
from kit.calendar import last_day
from projects.models import AuditedInProject, Project, ResourcePool


class Allocation(AuditedInProject, models.Model):
    """A grant of SU on a pool for a period, split into budget periods."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="allocations")
    pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, related_name="allocations")
    request = models.ForeignKey(
        AllocationRequest,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="allocations",
    )
    period_start = models.DateField()
    period_end = models.DateField(help_text="day after the last day")
    granted_su = models.DecimalField(max_digits=24, decimal_places=6)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    granted_at = models.DateTimeField(auto_now_add=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["project", "pool", "period_start"]
        constraints = [
            models.CheckConstraint(condition=Q(granted_su__gte=0), name="allocation_not_negative"),
            models.CheckConstraint(
                condition=Q(period_start__lt=F("period_end")), name="allocation_period_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.project} {self.pool} {self.period_start}..{self.period_end}: {self.granted_su}"
        )


class BudgetPeriod(AuditedInProject, models.Model):
    """The part of a grant usable in one period (a quarter by default)."""

    allocation = models.ForeignKey(
        Allocation, on_delete=models.CASCADE, related_name="budget_periods"
    )
    start = models.DateField()
    end = models.DateField(help_text="day after the last day")
    budget_su = models.DecimalField(max_digits=24, decimal_places=6)

    class Meta:
        ordering = ["allocation", "start"]
        constraints = [
            models.UniqueConstraint(fields=["allocation", "start"], name="budget_period_unique"),
            models.CheckConstraint(condition=Q(budget_su__gte=0), name="budget_not_negative"),
            models.CheckConstraint(condition=Q(start__lt=F("end")), name="budget_period_not_empty"),
        ]

    def __str__(self) -> str:
        return (
            f"{self.allocation.project} {self.allocation.pool} {self.start} to {last_day(self.end)}"
        )


class Adjustment(AuditedInProject, models.Model):
    """An append-only change to a project's balance on a pool in a budget period.

    Positive amounts add SU (refund, top-up, transfer in), negative ones remove them
    (transfer out, correction). The two sides of a transfer share ``transfer_id``.
    """

    class Kind(models.TextChoices):
        REFUND = "refund", "refund"
        TOP_UP = "top_up", "top-up"
        TRANSFER_IN = "transfer_in", "transfer in"
        TRANSFER_OUT = "transfer_out", "transfer out"
        CORRECTION = "correction", "correction"

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="adjustments")
    budget_period = models.ForeignKey(
        BudgetPeriod, on_delete=models.PROTECT, related_name="adjustments"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    amount_su = models.DecimalField(max_digits=24, decimal_places=6)
    # Enforced by PostgreSQL against the ledger's key table (accounting/ledger_storage.py):
    # a partitioned table cannot be the target of a foreign key on its id alone.
    job = models.ForeignKey(
        "accounting.Job",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_constraint=False,
    )
    transfer_id = models.UUIDField(null=True, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.CheckConstraint(condition=~Q(amount_su=0), name="adjustment_not_zero"),
            models.CheckConstraint(condition=~Q(reason=""), name="adjustment_has_reason"),
            models.CheckConstraint(
                condition=(Q(kind__in=["refund", "top_up", "transfer_in"]) & Q(amount_su__gt=0))
                | (Q(kind="transfer_out") & Q(amount_su__lt=0))
                | Q(kind="correction"),
                name="adjustment_sign_matches_kind",
            ),
            models.UniqueConstraint(
                fields=["job"],
                condition=Q(kind="refund", job__isnull=False),
                name="one_refund_per_job",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {numbers.su(self.amount_su)} SU for {self.project}"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None:
            raise ValueError("adjustments are append-only: add a correction instead")
        super().save(*args, **kwargs)


class ThresholdNotice(models.Model):
    """A project crossed a threshold of a budget period; recorded once, notified once."""

    budget_period = models.ForeignKey(
        BudgetPeriod, on_delete=models.CASCADE, related_name="notices"
    )
    threshold = models.PositiveSmallIntegerField()
    percent_used = models.DecimalField(max_digits=9, decimal_places=2)
    notified_at = models.DateTimeField(auto_now_add=True)
    recipients = models.TextField(blank=True)

    class Meta:
        ordering = ["notified_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget_period", "threshold"], name="notice_once_per_threshold"
            )
        ]

    def __str__(self) -> str:
        return f"{self.threshold}% of {self.budget_period}"


class EfficiencySummaryNotice(models.Model):
    """A PI was sent the monthly efficiency summary of their projects for ``month``: recorded
    once, so a second run of the month's task mails no one twice."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="efficiency_summaries"
    )
    month = models.DateField(help_text="first day of the month summarised")
    projects = models.TextField(blank=True, help_text="the project codes summarised")
    notified_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-month", "user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "month"], name="efficiency_summary_once_per_month"
            )
        ]

    def __str__(self) -> str:
        return f"efficiency summary of {self.month:%Y-%m} for {self.user}"


class GrantExpiryNotice(models.Model):
    """The PI and managers were told that a grant ends in ``days_before`` days (one of
    PORTAL_GRANT_EXPIRY_NOTICE_DAYS): recorded once per end, so a second run mails no one
    twice, and an extended grant is announced again before its new end."""

    allocation = models.ForeignKey(
        Allocation, on_delete=models.CASCADE, related_name="expiry_notices"
    )
    grant_end = models.DateField(help_text="the grant's period_end the notice was about")
    days_before = models.PositiveSmallIntegerField()
    notified_at = models.DateTimeField(auto_now_add=True)
    recipients = models.TextField(blank=True)

    class Meta:
        ordering = ["notified_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["allocation", "grant_end", "days_before"],
                name="expiry_notice_once_per_end_and_days",
            )
        ]

    def __str__(self) -> str:
        return f"{self.allocation} ends in {self.days_before} days"

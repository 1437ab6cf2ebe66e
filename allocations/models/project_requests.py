"""Project requests: anyone signed in asks for a new project (title, abstract, field of
science, its PI, SU per pool with an estimate); staff or the centre's approvers decide. The
state machine and its rules are in ``allocations/project_requests/services.py``.

SU are Decimal with 6 places everywhere, like the ledger of charges."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from projects.models import Project, ResourcePool


class ProjectRequest(models.Model):
    """A request for a new project, from whoever asked (the requester) to the approvers."""

    class State(models.TextChoices):
        AWAITING_PI = "awaiting_pi", "waiting for the PI to confirm"
        SUBMITTED = "submitted", "waiting for a decision"
        CHANGES_REQUESTED = "changes_requested", "changes requested"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        PI_DECLINED = "pi_declined", "declined by the PI"

    title = models.CharField(max_length=300)
    abstract = models.TextField()
    field_of_science = models.CharField(max_length=120)
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="project_requests"
    )
    pi = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="project_requests_as_pi",
        verbose_name="PI",
    )
    pi_confirmed_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=20, choices=State.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True, help_text="why, when rejected or changed")
    project = models.OneToOneField(
        Project,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="project_request",
        help_text="the project its approval created",
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(state="approved") | Q(project__isnull=False),
                name="project_request_approved_has_project",
            )
        ]

    def __str__(self) -> str:
        return f"project request {self.pk}: {self.title} ({self.state})"


class ProjectRequestAmount(models.Model):
    """SU asked for, and once approved granted, on one pool."""

    request = models.ForeignKey(ProjectRequest, on_delete=models.CASCADE, related_name="amounts")
    pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, related_name="+")
    requested_su = models.DecimalField(max_digits=24, decimal_places=6)
    granted_su = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)

    class Meta:
        ordering = ["pool__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "pool"], name="project_request_amount_unique"
            ),
            models.CheckConstraint(
                condition=Q(requested_su__gte=0)
                & (Q(granted_su__isnull=True) | Q(granted_su__gte=0)),
                name="project_request_amount_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.requested_su} SU on {self.pool}"


class ProjectRequestEstimate(models.Model):
    """One estimate line priced by the quote engine, as an application's
    (``RequestEstimate``): jobs x nodes x hours on a partition."""

    request = models.ForeignKey(ProjectRequest, on_delete=models.CASCADE, related_name="estimates")
    partition = models.ForeignKey(
        "accounting.Partition", on_delete=models.PROTECT, related_name="+"
    )
    description = models.CharField(max_length=200, blank=True)
    jobs = models.PositiveIntegerField()
    nodes = models.PositiveIntegerField(default=1)
    hours = models.DecimalField(max_digits=12, decimal_places=4)
    cores_per_node = models.DecimalField(max_digits=10, decimal_places=3, null=True, blank=True)
    gpus_per_node = models.PositiveIntegerField(null=True, blank=True)
    memory_per_node_mb = models.DecimalField(max_digits=16, decimal_places=3, null=True, blank=True)
    service_units = models.DecimalField(
        help_text="jobs x the quote of one job", max_digits=24, decimal_places=6
    )

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.jobs} x {self.nodes} node(s) x {self.hours} h on {self.partition}"


class ProjectRequestTransition(models.Model):
    """The history: every state change of a project request, who made it, when, and why."""

    request = models.ForeignKey(
        ProjectRequest, on_delete=models.CASCADE, related_name="transitions"
    )
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.from_state or 'new'} -> {self.to_state} by {self.actor}"

    @property
    def to_state_label(self) -> str:
        try:
            return str(ProjectRequest.State(self.to_state).label)
        except ValueError:
            return self.to_state

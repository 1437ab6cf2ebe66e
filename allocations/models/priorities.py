"""Dynamic priorities: a cluster's policy, posted profiling coefficients, proposed QOS actions."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from projects.models import Project


class PriorityPolicy(models.Model):
    """Dynamic priority (eq 14, corrected in DESIGN.md section 4) of one cluster: thresholds
    ``K1 < K2`` on the profiling coefficient and the slopes ``C0, C1, C2``."""

    cluster = models.OneToOneField(
        "accounting.Cluster", on_delete=models.PROTECT, related_name="priority_policy"
    )
    base_priority = models.DecimalField(
        max_digits=20, decimal_places=6, help_text="Pr_base, the priority at K = K1"
    )
    k1 = models.DecimalField(max_digits=20, decimal_places=6)
    k2 = models.DecimalField(max_digits=20, decimal_places=6)
    c0 = models.DecimalField(max_digits=20, decimal_places=6, help_text="slope below K1")
    c1 = models.DecimalField(max_digits=20, decimal_places=6, help_text="slope from K1 to K2")
    c2 = models.DecimalField(max_digits=20, decimal_places=6, help_text="slope from K2")
    command_template = models.CharField(
        max_length=500,
        default="sacctmgr --immediate modify qos {qos} set priority={priority}",
        help_text="The Slurm command applying a priority; {qos}, {account}, {cluster}, "
        "{priority} are filled in",
    )
    execution_enabled = models.BooleanField(
        default=False, help_text="Run approved priority commands (else they are only listed)"
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name_plural = "priority policies"
        constraints = [
            models.CheckConstraint(condition=Q(k1__lt=F("k2")), name="priority_k1_below_k2"),
            models.CheckConstraint(
                condition=Q(base_priority__gte=0), name="priority_base_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"priority policy of {self.cluster}"


class ProfilingCoefficient(models.Model):
    """A profiler's coefficient ``K_prof`` for a project, or for one of its jobs, posted by
    staff (form, API or CSV upload). Append-only: the newest value counts."""

    class Source(models.TextChoices):
        FORM = "form", "form"
        API = "api", "API"
        CSV = "csv", "CSV upload"

    cluster = models.ForeignKey("accounting.Cluster", on_delete=models.PROTECT, related_name="+")
    project = models.ForeignKey(
        Project, on_delete=models.PROTECT, related_name="profiling_coefficients"
    )
    job = models.ForeignKey(
        "accounting.Job",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="profiling_coefficients",
        db_constraint=False,  # enforced against the ledger key, as Adjustment.job
    )
    k_prof = models.DecimalField(max_digits=20, decimal_places=6)
    source = models.CharField(max_length=8, choices=Source.choices)
    note = models.TextField(blank=True)
    posted_at = models.DateTimeField(auto_now_add=True)
    posted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-posted_at", "-pk"]
        indexes = [models.Index(fields=["project", "cluster", "posted_at"], name="kprof_project")]
        constraints = [
            models.CheckConstraint(condition=Q(k_prof__gte=0), name="kprof_not_negative")
        ]

    def __str__(self) -> str:
        target = f"job {self.job_id}" if self.job_id else str(self.project)
        return f"K_prof {self.k_prof} for {target}"


class PriorityAction(models.Model):
    """A Slurm command that would apply a project's dynamic priority: reviewable, and run
    only when the cluster's policy enables execution (like ``EnforcementAction``)."""

    class Status(models.TextChoices):
        PROPOSED = "proposed", "proposed"
        EXECUTED = "executed", "executed"
        FAILED = "failed", "failed"
        DISMISSED = "dismissed", "dismissed"
        SUPERSEDED = "superseded", "superseded"

    cluster = models.ForeignKey("accounting.Cluster", on_delete=models.PROTECT, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="priority_actions")
    k_prof = models.DecimalField(max_digits=20, decimal_places=6)
    priority = models.DecimalField(
        max_digits=20,
        decimal_places=6,
        help_text="The Slurm priority the command sets: Pr_dyn rounded, within 0 .. 2**32 - 2",
    )
    command = models.CharField(max_length=1000)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PROPOSED)
    created_at = models.DateTimeField(auto_now_add=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    executed_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    output = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"priority {self.priority} for {self.project} ({self.status})"

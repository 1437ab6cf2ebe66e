"""Enforcement actions and Slurm provisioning: sync plans, their actions, drift checks."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from allocations.models.grants import BudgetPeriod
from projects.models import AuditedInProject, Project, ResourcePool


class EnforcementAction(AuditedInProject, models.Model):
    """A Slurm command the portal proposes (and, when the cluster allows it, runs)."""

    class Kind(models.TextChoices):
        LIMIT = "limit", "limit (budget period used up)"
        RESTORE = "restore", "restore (new budget period)"

    class Status(models.TextChoices):
        PROPOSED = "proposed", "proposed"
        EXECUTED = "executed", "executed"
        FAILED = "failed", "failed"
        DISMISSED = "dismissed", "dismissed"

    project = models.ForeignKey(
        Project, on_delete=models.PROTECT, related_name="enforcement_actions"
    )
    pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, related_name="+")
    budget_period = models.ForeignKey(BudgetPeriod, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    command = models.CharField(max_length=1000)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PROPOSED)
    created_at = models.DateTimeField(auto_now_add=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    output = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget_period", "kind"], name="one_action_of_a_kind_per_budget_period"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.project} ({self.status}): {self.command}"


class SlurmSyncPlan(models.Model):
    """What ``slurm_sync`` would change on a cluster's Slurm, kept for review: staff approve it,
    a task applies it in one ``sacctmgr -i`` run, and what was done is recorded per action."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending review"
        APPROVED = "approved", "approved, waiting to be applied"
        APPLIED = "applied", "applied"
        FAILED = "failed", "failed"
        SUPERSEDED = "superseded", "superseded by a newer plan"

    cluster = models.ForeignKey("accounting.Cluster", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    delete_unmanaged = models.BooleanField(
        default=False, help_text="also delete accounts and users the portal did not create"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    applied_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    output = models.TextField(blank=True, help_text="what sacctmgr printed")
    error = models.TextField(blank=True, help_text="why the last attempt did not apply it")

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"Slurm plan {self.pk} of {self.cluster} ({self.status})"


class SlurmSyncAction(models.Model):
    """One action of a plan: an account or a user association created, modified or deleted,
    with the values before and after, the sacctmgr lines, and whether Slurm shows it done."""

    plan = models.ForeignKey(SlurmSyncPlan, on_delete=models.CASCADE, related_name="actions")
    position = models.PositiveIntegerField()
    verb = models.CharField(max_length=8)
    account = models.CharField(max_length=64)
    user = models.CharField(max_length=64, blank=True)
    partition = models.CharField(max_length=64, blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    commands = models.TextField(blank=True)
    done = models.BooleanField(null=True, blank=True, help_text="None until the plan is applied")

    class Meta:
        ordering = ["plan", "position"]
        constraints = [
            models.UniqueConstraint(fields=["plan", "position"], name="slurm_action_position"),
        ]

    def __str__(self) -> str:
        if not self.user:
            return f"{self.verb} account {self.account}"
        where = f" (partition {self.partition})" if self.partition else ""
        return f"{self.verb} user {self.user} in {self.account}{where}"

    def get_additional_data(self) -> dict[str, str]:
        """Audit entries name the account: a project's PI reads those of their project."""
        return {"project": self.account}


class SlurmDriftCheck(models.Model):
    """The last comparisons of the portal with a cluster's Slurm (``slurm_sync --check``)."""

    cluster = models.ForeignKey("accounting.Cluster", on_delete=models.PROTECT, related_name="+")
    checked_at = models.DateTimeField(auto_now_add=True)
    drift = models.JSONField(default=list, blank=True, help_text="actions that would fix it")
    error = models.TextField(blank=True, help_text="why Slurm could not be read")

    class Meta:
        ordering = ["-checked_at", "-pk"]

    def __str__(self) -> str:
        return f"drift check of {self.cluster} at {self.checked_at}"


class SlurmSyncRequest(models.Model):
    """A staff request from the Slurm page ("Plan now", "Check for drift") and how it ended.
    The page shows each cluster's last one, so a request never ends in silence: Slurm that
    cannot be read, nothing to change, a worker busy with another plan."""

    class Kind(models.TextChoices):
        PLAN = "plan", "plan"
        CHECK = "check", "drift check"
        # Not asked for by staff: Slurm's limits set again after a balance moved (a grant, an
        # import), recorded only when the work could not be handed to a worker.
        LIMITS = "limits", "limits update"

    class Outcome(models.TextChoices):
        QUEUED = "queued", "waiting for a worker"
        PLANNED = "planned", "a plan is waiting for review"
        NOTHING = "nothing", "nothing to change: Slurm matches the portal"
        CHECKED = "checked", "checked"
        BUSY = "busy", "not run: another plan or apply of the cluster was running; ask again"
        FAILED = "failed", "failed"

    cluster = models.ForeignKey("accounting.Cluster", on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=8, choices=Outcome.choices, default=Outcome.QUEUED)
    error = models.TextField(blank=True, help_text="why it failed, in a sentence")
    plan = models.ForeignKey(
        SlurmSyncPlan, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-requested_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} of {self.cluster} asked at {self.requested_at}"

    @classmethod
    def record_unsent(cls, *, cluster_id: int, kind: str, error: str) -> SlurmSyncRequest:
        """Work for Slurm the portal asked for itself (a balance that moved, a decision) and
        the task queue did not take: kept as a failed request, so the Slurm page says so. On
        the model, the one place both the grants and the request decisions may reach."""
        return cls.objects.create(
            cluster_id=cluster_id, kind=kind, outcome=cls.Outcome.FAILED,
            finished_at=timezone.now(), error=error,
        )  # fmt: skip

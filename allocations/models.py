"""Merit allocations: rounds, requests, reviews, grants, budget periods, adjustments,
enforcement, priorities and Slurm provisioning, of the projects and pools of ``projects``.

SU are Decimal with 6 places everywhere, like the ledger of charges.
"""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from kit.calendar import last_day
from projects.models import AuditedInProject, Project, ResourcePool


class AllocationRound(models.Model):
    """A call for applications: open and close dates, the period grants cover, SU available
    per pool and a committee with a chair."""

    name = models.CharField(max_length=200, unique=True)
    opens_at = models.DateTimeField()
    closes_at = models.DateTimeField()
    period_start = models.DateField(help_text="first day the grants cover")
    period_end = models.DateField(help_text="day after the last day the grants cover")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-opens_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(opens_at__lt=F("closes_at")), name="round_opens_before_close"
            ),
            models.CheckConstraint(
                condition=Q(period_start__lt=F("period_end")), name="round_period_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def period_last_day(self) -> date:
        return last_day(self.period_end)


class RoundPool(models.Model):
    round = models.ForeignKey(AllocationRound, on_delete=models.CASCADE, related_name="pools")
    pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, related_name="+")
    available_su = models.DecimalField(max_digits=24, decimal_places=6)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["round", "pool"], name="round_pool_unique"),
            models.CheckConstraint(
                condition=Q(available_su__gte=0), name="round_pool_available_su_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.available_su} SU on {self.pool} in {self.round}"


class CommitteeMember(models.Model):
    round = models.ForeignKey(AllocationRound, on_delete=models.CASCADE, related_name="committee")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    is_chair = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["round", "user"], name="committee_member_unique"),
            models.UniqueConstraint(
                fields=["round"], condition=Q(is_chair=True), name="committee_one_chair"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({'chair' if self.is_chair else 'member'}) of {self.round}"


class AllocationRequest(models.Model):
    """A PI's application in a round (or a mid-period top-up), with its review trail."""

    class State(models.TextChoices):
        DRAFT = "draft", "draft"
        SUBMITTED = "submitted", "submitted"
        UNDER_REVIEW = "under_review", "under review"
        GRANTED = "granted", "granted"
        PARTIALLY_GRANTED = "partially_granted", "partially granted"
        REJECTED = "rejected", "rejected"

    class Kind(models.TextChoices):
        NEW = "new", "application"
        TOP_UP = "top_up", "top-up (change request)"

    round = models.ForeignKey(AllocationRound, on_delete=models.PROTECT, related_name="requests")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="requests")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.NEW)
    state = models.CharField(max_length=20, choices=State.choices, default=State.DRAFT)
    justification = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["round", "project"]
        constraints = [
            models.UniqueConstraint(
                fields=["round", "project"],
                condition=Q(kind="new"),
                name="one_application_per_project_and_round",
            )
        ]

    def __str__(self) -> str:
        return f"{self.project} in {self.round} ({self.state})"


class RequestAmount(models.Model):
    """SU requested, and once decided granted, on one pool."""

    request = models.ForeignKey(AllocationRequest, on_delete=models.CASCADE, related_name="amounts")
    pool = models.ForeignKey(ResourcePool, on_delete=models.PROTECT, related_name="+")
    requested_su = models.DecimalField(max_digits=24, decimal_places=6)
    granted_su = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["request", "pool"], name="request_amount_unique"),
            models.CheckConstraint(
                condition=Q(requested_su__gte=0)
                & (Q(granted_su__isnull=True) | Q(granted_su__gte=0)),
                name="request_amount_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.requested_su} SU on {self.pool}"


class RequestEstimate(models.Model):
    """One line of the estimate built with the quote engine: jobs x nodes x hours on a partition."""

    request = models.ForeignKey(
        AllocationRequest, on_delete=models.CASCADE, related_name="estimates"
    )
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

    def __str__(self) -> str:
        return f"{self.jobs} x {self.nodes} node(s) x {self.hours} h on {self.partition}"


class RequestTransition(models.Model):
    """Every state change of a request: who, when, from what to what."""

    request = models.ForeignKey(
        AllocationRequest, on_delete=models.CASCADE, related_name="transitions"
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
        """The state in words ("under review"), as the request's own state is shown."""
        try:
            return str(AllocationRequest.State(self.to_state).label)
        except ValueError:
            return self.to_state


class Review(models.Model):
    request = models.ForeignKey(AllocationRequest, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    score = models.PositiveSmallIntegerField()
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["request", "reviewer"], name="one_review_per_reviewer"),
            models.CheckConstraint(
                condition=Q(score__gte=1) & Q(score__lte=5), name="review_score_1_to_5"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.score}/5 by {self.reviewer}"


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
        return f"{self.allocation.project} {self.allocation.pool} {self.start}..{self.end}"


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
    # Enforced by PostgreSQL against the ledger's key table (accounting/partitions.py):
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
        return f"{self.kind} {self.amount_su} SU for {self.project}"

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

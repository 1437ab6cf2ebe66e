"""Rounds, pools offered in them, committees, requests (amounts, estimates, transitions) and
reviews.

SU are Decimal with 6 places everywhere, like the ledger of charges."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from kit import numbers
from kit.calendar import last_day
from projects.models import Project, ResourcePool


class AllocationRound(models.Model):
    """A call for applications: open and close dates, the period grants cover, SU available
    per pool and a committee with a chair."""

    name = models.CharField(max_length=200, unique=True)
    opens_at = models.DateTimeField()
    closes_at = models.DateTimeField()
    period_start = models.DateField(help_text="first day the grants cover")
    period_end = models.DateField(help_text="day after the last day the grants cover")
    requires_progress_report = models.BooleanField(
        default=False, help_text="every renewal in the round must carry a progress report"
    )
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
        return f"{numbers.su(self.available_su)} SU on {self.pool} in {self.round}"


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
    """A change to a project's allocation, asked by its PI, with its review trail. One model
    for every ``kind``: an application in a round (``new``), and outside rounds more SU now
    (``top_up``), a later end for the grant in force (``extension``), the next period
    (``renewal``, in the next round) or a second look at a decision (``appeal``). Each kind's
    states and transitions are in ``allocations/request_states.py``."""

    class State(models.TextChoices):
        DRAFT = "draft", "draft"
        SUBMITTED = "submitted", "submitted"
        UNDER_REVIEW = "under_review", "under review"
        GRANTED = "granted", "granted"
        PARTIALLY_GRANTED = "partially_granted", "partially granted"
        REJECTED = "rejected", "rejected"

    class Kind(models.TextChoices):
        NEW = "new", "application"
        TOP_UP = "top_up", "top-up"
        EXTENSION = "extension", "extension"
        RENEWAL = "renewal", "renewal"
        APPEAL = "appeal", "appeal"

    # Applications and renewals are in a round; top-ups, extensions and appeals are not
    # (a top-up of the release before kinds may still name one).
    round = models.ForeignKey(
        AllocationRound, null=True, blank=True, on_delete=models.PROTECT, related_name="requests"
    )
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="requests")
    kind = models.CharField(max_length=9, choices=Kind.choices, default=Kind.NEW)
    state = models.CharField(max_length=20, choices=State.choices, default=State.DRAFT)
    # The grant in force a top-up, an extension or a renewal starts from.
    grant = models.ForeignKey(
        "allocations.Allocation", null=True, blank=True, on_delete=models.PROTECT,
        related_name="change_requests",
    )  # fmt: skip
    new_end = models.DateField(
        null=True, blank=True, help_text="an extension: the grant's new end (the day after)"
    )
    appeal_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="appeals"
    )
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
                condition=Q(kind__in=["new", "renewal"]),
                name="one_application_per_project_and_round",
            ),
            models.UniqueConstraint(fields=["appeal_of"], name="one_appeal_per_decision"),
            models.CheckConstraint(
                condition=(Q(kind__in=["new", "renewal"]) & Q(round__isnull=False))
                | Q(kind__in=["top_up", "extension", "appeal"]),
                name="request_in_a_round_names_it",
            ),
            models.CheckConstraint(
                condition=Q(kind="appeal", appeal_of__isnull=False)
                | (~Q(kind="appeal") & Q(appeal_of__isnull=True)),
                name="request_appeal_names_its_decision",
            ),
            models.CheckConstraint(
                condition=Q(kind="extension", new_end__isnull=False, grant__isnull=False)
                | (~Q(kind="extension") & Q(new_end__isnull=True)),
                name="request_extension_names_grant_and_end",
            ),
        ]

    def __str__(self) -> str:
        where = f"in {self.round}" if self.round_id else f"({self.get_kind_display()})"
        return f"{self.project} {where} ({self.state})"

    @property
    def in_round(self) -> bool:
        """An application or a renewal: reviewed by the round's committee."""
        return self.kind in (self.Kind.NEW, self.Kind.RENEWAL)


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


class ReviewAssignment(models.Model):
    """A committee member the chair asked to review a request. A request with assignments is
    reviewed (and its applicant's record read) by the members assigned; one without, by the
    whole committee, as before assignments existed. ``allocations/access.py`` holds the rule."""

    request = models.ForeignKey(
        AllocationRequest, on_delete=models.CASCADE, related_name="assignments"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    assigned_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["request", "reviewer"]
        constraints = [
            models.UniqueConstraint(fields=["request", "reviewer"], name="review_assignment_unique")
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} reviews {self.request}"

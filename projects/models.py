"""Projects and what they run on: a project (its code is its Slurm account), its members and
their roles, invitations to join, and the resource pools SU are granted and charged on.

Both apps stand on these: ``accounting`` books each job to a project and pool, ``allocations``
grants SU to a project on a pool. This app imports neither of them. The tables kept the names
they had when these models lived in ``allocations`` (migration projects 0001).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone


class AuditedInProject:
    """Audit log entries of this model name its project, so that its PI can read them
    (the audit log)."""

    def get_additional_data(self) -> dict[str, str]:
        project: Any = getattr(self, "project", None)
        if project is None:  # a budget period: through its grant
            project = getattr(self, "allocation").project  # noqa: B009
        return {"project": project.code}


class Project(models.Model):
    """A research project; ``code`` is the Slurm account its jobs run under."""

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        EXPIRED = "expired", "expired"
        SUSPENDED = "suspended", "suspended"
        # Read-only: its last grant ended PORTAL_ARCHIVE_AFTER_DAYS ago (docs/allocations.md).
        ARCHIVED = "archived", "archived"

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
    status_since = models.DateField(
        null=True, blank=True, help_text="the day the status took effect (expired: the grant's end)"
    )
    field_of_science = models.CharField(max_length=120, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "allocations_project"  # the table it had in allocations
        ordering = ["code"]

    def __str__(self) -> str:
        return self.code

    def get_additional_data(self) -> dict[str, str]:
        """Audit log entries of a project name it (the audit log)."""
        return {"project": self.code}


class Membership(AuditedInProject, models.Model):
    """A user's role in a project."""

    class Role(models.TextChoices):
        PI = "pi", "PI"
        # NERSC's "PI proxy": runs the project (members, invitations, requests) for the PI, but
        # neither appoints managers nor moves SU out of the project.
        MANAGER = "manager", "manager"
        MEMBER = "member", "member"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    notify = models.BooleanField(default=False, help_text="e-mail me when the balance runs low")
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "allocations_membership"  # the table it had in allocations
        ordering = ["project", "user"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


# The roles an invitation offers and a PI gives or takes (the PI role is the project's own).
INVITABLE_ROLES = [
    (Membership.Role.MEMBER.value, "member"),
    (Membership.Role.MANAGER.value, "manager"),
]


class Invitation(AuditedInProject, models.Model):
    """A PI's or manager's invitation to a project, sent by e-mail as a signed link. Whoever
    accepts it signed in (through the centre's SSO, LDAP or a password) becomes the member:
    the invitation links that identity to the membership."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(
        max_length=8,
        choices=INVITABLE_ROLES,
        default=Membership.Role.MEMBER,
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    nonce = models.CharField(max_length=32, unique=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "allocations_invitation"  # the table it had in allocations
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("created_at")), name="invitation_expires_after_sent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.email} to {self.project} as {self.role}"

    @property
    def state(self) -> str:
        if self.accepted_at is not None:
            return "accepted"
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= timezone.now():
            return "expired"
        return "pending"


class ResourcePool(models.Model):
    """What SU are granted on, e.g. "setonix CPU" (partitions work, highmem) or "setonix GPU".

    A job is charged against the pool that contains its partition; a partition belongs to at
    most one pool. The pool also carries the budget and enforcement policy.
    """

    class Split(models.TextChoices):
        EVEN = "even", "even split over the budget periods"
        CUSTOM = "custom", "amounts set per budget period"

    name = models.CharField(max_length=100, unique=True)
    cluster = models.ForeignKey(
        "accounting.Cluster", on_delete=models.PROTECT, related_name="resource_pools"
    )
    partitions = models.ManyToManyField(
        "accounting.Partition", through="PoolPartition", related_name="resource_pools"
    )
    description = models.TextField(blank=True)
    budget_months = models.PositiveSmallIntegerField(
        default=3, help_text="length of a budget period in months (3 = quarterly)"
    )
    split = models.CharField(max_length=8, choices=Split.choices, default=Split.EVEN)
    carry_over = models.BooleanField(
        default=False, help_text="unused SU of a budget period move to the next one"
    )
    notify_thresholds = models.CharField(
        max_length=40, default="75,90,100", help_text="percent of a budget period used"
    )
    limit_command = models.CharField(
        max_length=500,
        blank=True,
        default="sacctmgr -i modify account name={account} set qos=lowpriority",
        help_text="Slurm action when a project has used its budget period ({account}, {cluster})",
    )
    restore_command = models.CharField(
        max_length=500,
        blank=True,
        default="sacctmgr -i modify account name={account} set qos=normal",
        help_text="Slurm action when a limited project gets a new budget period",
    )
    # Provisioning (allocations/slurm/sync.py): where the pool's projects sit in Slurm's tree
    # and the QOS they get; blank leaves it to Slurm (root, the parent's QOS).
    slurm_parent_account = models.CharField(
        max_length=64, blank=True,
        help_text="Slurm account the pool's project accounts are created under (blank: root)",
    )  # fmt: skip
    slurm_qos = models.CharField(
        max_length=200,
        blank=True,
        help_text="QOS list of the pool's project accounts, e.g. normal,debug",
    )
    slurm_default_qos = models.CharField(
        max_length=64, blank=True, help_text="default QOS of the pool's project accounts"
    )
    slurm_account_suffix = models.CharField(
        max_length=16, blank=True,
        help_text="the pool's projects get a Slurm account of their own, the project code and "
        "this suffix (e.g. -gpu), limited to the pool's SU alone (blank: the project's account, "
        "limited to what all its pools on the cluster have left)",
    )  # fmt: skip
    slurm_partition_associations = models.BooleanField(
        default=False,
        help_text="members' associations name the pool's partitions, so the account runs jobs "
        "in those partitions only",
    )
    slurm_limits_auto = models.BooleanField(
        default=False,
        help_text="after each import, grant and adjustment, and in each new budget period, set "
        "the GrpTRESMins limits of the pool's cluster without review (other changes wait)",
    )

    class Meta:
        db_table = "allocations_resourcepool"  # the table it had in allocations
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def thresholds(self) -> list[int]:
        return sorted({int(item) for item in self.notify_thresholds.split(",") if item.strip()})


class PoolPartition(models.Model):
    pool = models.ForeignKey(ResourcePool, on_delete=models.CASCADE)
    partition = models.OneToOneField(
        "accounting.Partition", on_delete=models.PROTECT, related_name="pool_membership"
    )

    class Meta:
        db_table = "allocations_poolpartition"  # the table it had in allocations

    def __str__(self) -> str:
        return f"{self.partition} in {self.pool}"

"""Projects and what they run on: a project (its code is its Slurm account), its members and
their roles, invitations to join, and the resource pools SU are granted and charged on.

Both apps stand on these: ``accounting`` books each job to a project and pool, ``allocations``
grants SU to a project on a pool. This app imports neither of them. The tables kept the names
they had when these models lived in ``allocations`` (migration projects 0001).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import RegexValidator
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
    # The finance office's cost centre or grant code the project is billed to: monthly
    # statements are made per project and per finance code (docs/costs.md, "Statements").
    # Empty by default in the database too: rows written in SQL (fills, scripts) need none.
    finance_code = models.CharField(
        max_length=64,
        blank=True,
        db_default="",
        db_index=True,
        help_text="the finance office's code to bill",
    )
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


POOL_SUFFIX_TAKEN = (
    "Another pool of this cluster already has this account suffix: each pool needs a Slurm "
    "account of its own, so that its GrpTRESMins holds its SU alone (e.g. blank for the CPU "
    "pool, -gpu for the GPU pool)."
)
POOL_SUFFIX_CODE = "pool_suffix_taken"


class ResourcePool(models.Model):
    """What SU are granted on, e.g. "setonix CPU" (partitions work, highmem) or "setonix GPU".

    A job is charged against the pool that contains its partition; a partition belongs to at
    most one pool. The pool also carries the budget and enforcement policy, and is a Slurm
    account of each project granted on it (the code and ``slurm_account_suffix``, one suffix
    per pool of a cluster), limited to the pool's SU (docs/slurm.md, "One Slurm limit per pool").
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
        validators=[
            RegexValidator(
                r"^[a-z0-9_.-]*$",
                "Only lower-case letters, digits, '-', '_' and '.' (Slurm stores accounts in "
                "lower case).",
            )
        ],
        help_text="the pool's Slurm account is the project code and this suffix (e.g. -gpu; "
        "blank: the code itself), limited to the pool's SU alone; each pool of a cluster has "
        "its own suffix",
    )  # fmt: skip
    slurm_limits_auto = models.BooleanField(
        default=False,
        help_text="after each import, grant and adjustment, and in each new budget period, set "
        "the GrpTRESMins limits of the pool's cluster without review (other changes wait)",
    )

    class Meta:
        db_table = "allocations_resourcepool"  # the table it had in allocations
        ordering = ["name"]
        constraints = [
            # One Slurm account, and so one GrpTRESMins limit, per pool (docs/slurm.md).
            models.UniqueConstraint(
                fields=["cluster", "slurm_account_suffix"],
                name="pool_account_suffix_unique",
                violation_error_message=POOL_SUFFIX_TAKEN,
                violation_error_code=POOL_SUFFIX_CODE,
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def thresholds(self) -> list[int]:
        return sorted({int(item) for item in self.notify_thresholds.split(",") if item.strip()})

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        """As Django's, but a second pool of the cluster with this suffix is said on the
        suffix field (where the admin's and the staff pages' forms show it)."""
        try:
            super().validate_constraints(exclude=exclude)
        except ValidationError as error:
            errors = error.update_error_dict({})
            general = errors.pop(NON_FIELD_ERRORS, [])
            taken = [item for item in general if getattr(item, "code", "") == POOL_SUFFIX_CODE]
            if taken:
                errors.setdefault("slurm_account_suffix", []).extend(taken)
            if general := [item for item in general if item not in taken]:
                errors[NON_FIELD_ERRORS] = general
            raise ValidationError(errors) from error


class PoolPartition(models.Model):
    pool = models.ForeignKey(ResourcePool, on_delete=models.CASCADE)
    partition = models.OneToOneField(
        "accounting.Partition", on_delete=models.PROTECT, related_name="pool_membership"
    )

    class Meta:
        db_table = "allocations_poolpartition"  # the table it had in allocations

    def __str__(self) -> str:
        return f"{self.partition} in {self.pool}"

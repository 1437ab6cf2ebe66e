"""Invitations to a project and the roles of its members (the PI's proxy, "manager").

A PI or manager invites an e-mail address; the invitation goes as a signed link that expires
after PORTAL_INVITATION_DAYS. Whoever opens it signed in, by whatever way the centre signs
people in, and accepts, becomes a member with the invited role: the invitation ties that
identity (their SSO or LDAP login) to the membership. Only the PI or staff give or take the
manager role (allocations/access.py, ``can_delegate``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from kit.access import require
from kit.errors import ApplicationError
from people.mail import mail_send, portal_link
from projects.access import can_delegate, can_manage_project, project_writable_check
from projects.models import Invitation, Membership, Project

SALT = "allocations.invitation"


class InvitationError(ApplicationError):
    """An invitation that cannot be made or accepted, in words for the person."""


@dataclass(frozen=True)
class SentInvitation:
    invitation: Invitation
    link: str


def invitation_link(invitation: Invitation) -> str:
    token = signing.dumps({"id": invitation.pk, "nonce": invitation.nonce}, salt=SALT)
    return portal_link(reverse("allocations:invitation", args=[token]))


@transaction.atomic
def invitation_send(*, project: Project, email: str, role: str, actor: User) -> SentInvitation:
    """Invite ``email`` to ``project`` as ``role`` and mail the link (after the commit)."""
    require(can_manage_project(actor, project), f"only the PI or a manager of {project} invites")
    project_writable_check(project)
    if role == Membership.Role.MANAGER:
        require(can_delegate(actor, project), f"only the PI of {project} appoints managers")
    elif role != Membership.Role.MEMBER:
        raise InvitationError(f"an invitation is for a member or a manager, not {role!r}")
    email = email.strip().lower()
    if Membership.objects.filter(project=project, user__email__iexact=email).exists():
        raise InvitationError(f"{email} is already in {project}")
    now = timezone.now()
    invitation = Invitation.objects.create(
        project=project, email=email, role=role, invited_by=actor, nonce=secrets.token_hex(16),
        created_at=now, expires_at=now + timedelta(days=settings.PORTAL_INVITATION_DAYS),
    )  # fmt: skip
    link = invitation_link(invitation)
    inviter = actor.get_full_name() or actor.get_username()
    mail_send(
        recipients=[email],
        subject=f"{inviter} invites you to {project.code} on the SU portal",
        body=(
            f"{inviter} invites you to join project {project.code}"
            f"{f' ({project.title})' if project.title else ''} as {invitation.get_role_display()}."
            f"\nOpen the link, sign in with your centre account and accept. It expires on "
            f"{invitation.expires_at:%Y-%m-%d}."
        ),
        link=link,
    )
    return SentInvitation(invitation=invitation, link=link)


def invitation_from_token(token: str) -> Invitation:
    """The invitation a link stands for, whatever its state; InvitationError if forged."""
    try:
        data = signing.loads(token, salt=SALT)
        invitation = Invitation.objects.select_related("project", "invited_by").get(
            pk=data["id"], nonce=data["nonce"]
        )
    except (signing.BadSignature, KeyError, TypeError, Invitation.DoesNotExist) as error:
        raise InvitationError("this invitation link is not valid") from error
    return invitation


@transaction.atomic
def invitation_accept(*, token: str, user: User) -> Membership:
    """``user`` (signed in) accepts: they become a member with the invited role."""
    invitation = invitation_from_token(token)
    invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
    project_writable_check(invitation.project)
    state = invitation.state
    if state != "pending":
        raise InvitationError(f"this invitation is {state}: ask for a new one")
    membership, created = Membership.objects.get_or_create(
        project=invitation.project, user=user, defaults={"role": invitation.role}
    )
    if not created and membership.role == Membership.Role.MEMBER != invitation.role:
        membership.role = invitation.role
        membership.save(update_fields=["role"])
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    return membership


def invitation_revoke(*, invitation: Invitation, actor: User) -> None:
    require(
        can_manage_project(actor, invitation.project),
        f"only the PI or a manager of {invitation.project} revokes invitations",
    )
    project_writable_check(invitation.project)
    if invitation.state != "pending":
        raise InvitationError(f"this invitation is {invitation.state} already")
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])


@transaction.atomic
def membership_role_set(*, project: Project, user: User, role: str, actor: User) -> Membership:
    """The PI (or staff) makes a member a manager, or a manager a member again."""
    require(can_delegate(actor, project), f"only the PI of {project} changes roles")
    project_writable_check(project)
    if role not in Membership.Role.values:
        raise InvitationError(f"unknown role {role!r}")
    if project.pi_id == user.pk:
        raise InvitationError(f"{user} is the PI of {project}; appoint another PI first")
    membership = Membership.objects.select_for_update().get(project=project, user=user)
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


def invitations_of(*, project: Project) -> QuerySet[Invitation]:
    return Invitation.objects.filter(project=project).select_related("invited_by", "accepted_by")

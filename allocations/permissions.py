"""Who may do what. Every service asks these before it changes anything."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied

from allocations.models import AllocationRound, CommitteeMember, Membership, Project

Actor = User | AnonymousUser


def is_staff(user: Actor) -> bool:
    return isinstance(user, User) and user.is_active and user.is_staff


def is_member(user: Actor, project: Project) -> bool:
    if not isinstance(user, User):
        return False
    return Membership.objects.filter(project=project, user=user).exists()


def is_pi(user: Actor, project: Project) -> bool:
    if not isinstance(user, User):
        return False
    return (
        project.pi_id == user.pk
        or Membership.objects.filter(project=project, user=user, role=Membership.Role.PI).exists()
    )


def is_committee(user: Actor, round_: AllocationRound) -> bool:
    if not isinstance(user, User):
        return False
    return CommitteeMember.objects.filter(round=round_, user=user).exists()


def is_chair(user: Actor, round_: AllocationRound) -> bool:
    if not isinstance(user, User):
        return False
    return CommitteeMember.objects.filter(round=round_, user=user, is_chair=True).exists()


def require(allowed: bool, message: str) -> None:
    """Refuse with a clear message (HTTP 403 in views) when ``allowed`` is false."""
    if not allowed:
        raise PermissionDenied(message)

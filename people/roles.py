"""The roles a centre's identity provider gives a person: one rule for OIDC and LDAP alike.

The identity provider (an OpenID Connect group or entitlement claim, or LDAP group
membership) says which groups a person is in; the settings name which of those groups make
someone centre staff and which make them an allocation-committee member. Each sign-in applies
the provider's answer afresh, so a person removed from the staff group loses the staff flag at
their next sign-in, and a person never named by the provider keeps what staff set by hand.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.models import Group, User

COMMITTEE_GROUP = "allocation-committee"


def roles_apply(*, user: User, groups: Iterable[str]) -> None:
    """Set the staff flag and the committee group of ``user`` from the provider's ``groups``."""
    held = {group.strip() for group in groups if group and group.strip()}
    staff = bool(held & set(settings.PORTAL_SSO_STAFF_GROUPS))
    committee = bool(held & set(settings.PORTAL_SSO_COMMITTEE_GROUPS))
    if user.is_staff != staff:
        user.is_staff = staff
        user.save(update_fields=["is_staff"])
    group, _ = Group.objects.get_or_create(name=COMMITTEE_GROUP)
    if committee:
        user.groups.add(group)
    else:
        user.groups.remove(group)

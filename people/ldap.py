"""LDAP sign-in (django-auth-ldap): the person's LDAP groups give their roles at each sign-in.

django-auth-ldap sends ``populate_user`` at every sign-in (``AUTH_LDAP_ALWAYS_UPDATE_USER``),
after copying names and e-mail from the directory and before saving the user. The roles
themselves are people/roles.py's one rule, shared with OIDC; this module only hands it the
group names the directory reports.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django_auth_ldap.backend import populate_user

from people.roles import roles_apply


def ldap_roles_apply(sender: Any, *, user: User, ldap_user: Any, **kwargs: Any) -> None:
    """Give ``user`` the roles of their LDAP groups (a ``populate_user`` receiver)."""
    if ldap_user.settings.GROUP_SEARCH is None:
        return  # no group base configured: the directory names no roles, staff keep theirs
    if user.pk is None:
        # A first sign-in: the user is not saved yet, and roles are stored by its key.
        user.save()
    roles_apply(user=user, groups=ldap_user.group_names)


def ldap_signals_connect() -> None:
    """Connect the receiver (from ``PeopleConfig.ready``)."""
    populate_user.connect(ldap_roles_apply, dispatch_uid="people.ldap_roles_apply")

"""LDAP sign-in (django-auth-ldap): the person's LDAP groups give their roles at each sign-in.

django-auth-ldap sends ``populate_user`` at every sign-in (``AUTH_LDAP_ALWAYS_UPDATE_USER``),
after copying names and e-mail from the directory and before saving the user. The roles
themselves are people/roles.py's one rule, shared with OIDC; this module only hands it the
group names the directory reports.

django-auth-ldap and python-ldap are optional (requirements-ldap.txt): this module imports
neither at load time, so the portal starts without them. portal/settings.py refuses to start
when PORTAL_LDAP_URI is set and they are missing.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from people.roles import roles_apply


def ldap_roles_apply(sender: Any, *, user: User, ldap_user: Any, **kwargs: Any) -> None:
    """Give ``user`` the roles of their LDAP groups (a ``populate_user`` receiver)."""
    if ldap_user.settings.GROUP_SEARCH is None:
        return  # no group base configured: the directory names no roles, staff keep theirs
    if user.pk is None:
        # A first sign-in: the user is not saved yet, and roles are stored by its key.
        user.save()
    roles_apply(user=user, groups=ldap_user.group_names)


def ldap_signals_connect() -> bool:
    """Connect the receiver (from ``PeopleConfig.ready``) when django-auth-ldap is installed;
    whether it was.

    Installed is enough, configured is not needed: a receiver of a signal nobody sends costs
    nothing, and the tests turn LDAP on after start-up (tests/people/conftest.py).
    """
    try:
        from django_auth_ldap.backend import populate_user
    except ImportError:  # not installed (or python-ldap is not): LDAP sign-in is off
        return False
    populate_user.connect(ldap_roles_apply, dispatch_uid="people.ldap_roles_apply")
    return True

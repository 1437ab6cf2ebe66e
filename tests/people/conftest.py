"""Sign-in tests against a real directory: one private ``slapd`` for the session.

``ldap_directory`` installs Debian's slapd and ldap-utils when they are missing and we are root
(tests/ldap_server.py); it skips with the reason only when that is impossible and CI is not set
(in CI the tests must run, so they fail instead). ``ldap_sign_in`` then configures the portal
exactly as a deployment would: the PORTAL_LDAP_* environment, read by portal/settings.py.
"""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI
from tests.ldap_server import LdapServer, ldap_missing_reason, ldap_server

SETTINGS_FILE = Path(__file__).resolve().parents[2] / "portal" / "settings.py"


@pytest.fixture(scope="session")
def ldap_directory() -> Iterator[LdapServer]:
    reason = ldap_missing_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"the LDAP sign-in tests need slapd in CI: {reason}")
        pytest.skip(reason)
    with ldap_server() as server:
        yield server


def settings_from_environment(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> dict:
    """The names portal/settings.py defines when the environment also holds ``env``."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS_FILE))


@pytest.fixture
def ldap_sign_in(
    settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ldap_directory: LdapServer
) -> LdapServer:
    """The portal signs people in against the test directory, then with stored passwords."""
    password_file = tmp_path / "ldap_bind_password"
    password_file.write_text(ldap_directory.bind_password + "\n")
    monkeypatch.delenv("PORTAL_PASSWORD_LOGIN", raising=False)
    configured = settings_from_environment(
        monkeypatch,
        {
            "PORTAL_LDAP_URI": ldap_directory.uri,
            "PORTAL_LDAP_BIND_DN": ldap_directory.bind_dn,
            "PORTAL_LDAP_BIND_PASSWORD_FILE": str(password_file),
            "PORTAL_LDAP_USER_BASE": ldap_directory.people_base,
            "PORTAL_LDAP_GROUP_BASE": ldap_directory.groups_base,
        },
    )
    for name, value in configured.items():
        if name.startswith("AUTH_LDAP_"):
            setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = configured["AUTHENTICATION_BACKENDS"]
    return ldap_directory

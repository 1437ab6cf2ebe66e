"""LDAP sign-in is optional (requirements-ldap.txt): without python-ldap and django-auth-ldap
the portal starts, and asking for LDAP without them stops start-up with the fix in the message.

Each test runs a fresh interpreter whose ``sitecustomize`` (on PYTHONPATH, in a temporary
folder) puts a finder first on ``sys.meta_path`` that refuses both packages, as if they had
never been installed, so the tests do not depend on what this machine happens to have.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = "pip install -r requirements-ldap.txt"

WITHOUT_LDAP = '''
import sys


class WithoutLdap:
    """python-ldap's and django-auth-ldap's modules are not installed."""

    blocked = {"ldap", "_ldap", "ldapurl", "ldif", "slapdtest", "django_auth_ldap"}

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, WithoutLdap())
'''

# django.setup() as the web, the worker and the shell do it; then the hook is shown to work
# (LDAP really is unimportable, so passing means the portal did without it).
SETUP = """
import django, importlib, sys
django.setup()
from django.conf import settings
from people.ldap import ldap_signals_connect
for name in ("ldap", "django_auth_ldap.backend"):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit(f"the test's hook let {name} import")
assert not {"ldap", "django_auth_ldap"} & {m.partition(".")[0] for m in sys.modules}
assert ldap_signals_connect() is False
backends = settings.AUTHENTICATION_BACKENDS
assert not any("ldap" in backend for backend in backends), backends
print("set up without LDAP")
"""


def _run(args: list[str], tmp_path: Path, ldap_env: dict[str, str]):
    hook_dir = tmp_path / "without_ldap"
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(WITHOUT_LDAP)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "PORTAL_PRODUCTION"}
        and not k.startswith("PORTAL_LDAP_")
    }
    env.update(
        {
            "PORTAL_VAR_DIR": str(tmp_path / "var"),
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")])),
            **ldap_env,
        }
    )
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


LDAP_ON = {
    "PORTAL_LDAP_URI": "ldap://127.0.0.1:1",
    "PORTAL_LDAP_USER_BASE": "ou=people,dc=hpc,dc=example",
}


def test_without_ldap_installed_the_portal_sets_up_checks_and_migrates(tmp_path):
    set_up = _run(["-c", SETUP], tmp_path, {})
    assert set_up.returncode == 0, set_up.stderr[-3000:]
    assert "set up without LDAP" in set_up.stdout
    checked = _run(["manage.py", "check"], tmp_path, {})
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "no issues" in checked.stdout
    migrated = _run(["manage.py", "migrate", "--noinput", "-v0"], tmp_path, {})
    assert migrated.returncode == 0, migrated.stderr[-3000:]


@pytest.mark.parametrize("args", [["-c", SETUP], ["manage.py", "check"]], ids=["setup", "check"])
def test_ldap_configured_but_not_installed_stops_start_up_saying_how_to_install(tmp_path, args):
    result = _run(args, tmp_path, LDAP_ON)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "PORTAL_LDAP_URI is set but LDAP sign-in is not installed" in result.stderr
    assert INSTALL_HINT in result.stderr
    assert "set up without LDAP" not in result.stdout

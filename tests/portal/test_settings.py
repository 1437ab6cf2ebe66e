"""The settings module in its embedded and production modes, each in a fresh interpreter."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(args, env_overrides, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update({"PORTAL_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "portal.settings"})
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


SHOW = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'], "
    "'eager': s.CELERY_TASK_ALWAYS_EAGER, 'broker': s.CELERY_BROKER_URL, 'debug': s.DEBUG}))"
)


def test_without_service_urls_it_runs_embedded_on_sqlite_with_eager_celery(tmp_path):
    result = _run(["-c", SHOW], {}, tmp_path)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["engine"] == "django.db.backends.sqlite3"
    assert shown["eager"] is True


def test_service_urls_select_postgresql_and_a_real_broker(tmp_path):
    overrides = {
        "DATABASE_URL": "postgres://portal@db.example:5432/portal",
        "CELERY_BROKER_URL": "redis://broker.example:6379/0",
    }
    shown = json.loads(_run(["-c", SHOW], overrides, tmp_path).stdout)
    assert shown["engine"] == "django.db.backends.postgresql"
    assert shown["eager"] is False
    assert shown["broker"] == "redis://broker.example:6379/0"


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    result = _run(
        ["-c", SHOW], {"PORTAL_PRODUCTION": "1", "DJANGO_ALLOWED_HOSTS": "su.example"}, tmp_path
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_production_passes_check_deploy_with_no_warnings(tmp_path):
    key_file = tmp_path / "secret_key"
    key_file.write_text("k" * 20 + "-8f3Jq0vZ2mXo9bLw4Rt7Yc1Nd6Hs5Ue-" + "p" * 20)
    overrides = {
        "PORTAL_PRODUCTION": "1",
        "DJANGO_SECRET_KEY_FILE": str(key_file),
        "DJANGO_ALLOWED_HOSTS": "su.example.org",
    }
    result = _run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], overrides, tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_a_malformed_boolean_in_the_environment_stops_start_up(tmp_path):
    result = _run(["-c", SHOW], {"DJANGO_DEBUG": "maybe"}, tmp_path)
    assert result.returncode != 0
    assert "DJANGO_DEBUG='maybe' is not a boolean" in result.stderr


SIGN_IN = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps(s.AUTHENTICATION_BACKENDS))"
)


def test_in_production_with_single_sign_on_the_portal_password_is_off_unless_asked_for(tmp_path):
    key_file = tmp_path / "secret_key"
    key_file.write_text("k" * 50)
    secret_file = tmp_path / "oidc_secret"
    secret_file.write_text("client-secret\n")
    production = {
        "PORTAL_PRODUCTION": "1", "DJANGO_SECRET_KEY_FILE": str(key_file),
        "DJANGO_ALLOWED_HOSTS": "su.example.org",
        "PORTAL_OIDC_ISSUER": "https://id.example.org/realms/hpc",
        "PORTAL_OIDC_CLIENT_SECRET_FILE": str(secret_file),
    }  # fmt: skip
    result = _run(["-c", SIGN_IN], production, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        "axes.backends.AxesStandaloneBackend", "people.oidc.CentreOIDCBackend",
    ]  # fmt: skip
    with_passwords = _run(["-c", SIGN_IN], {**production, "PORTAL_PASSWORD_LOGIN": "1"}, tmp_path)
    assert json.loads(with_passwords.stdout)[-1] == "django.contrib.auth.backends.ModelBackend"


def test_single_sign_on_needs_a_secret_and_in_production_an_https_issuer(tmp_path):
    no_secret = _run(["-c", SIGN_IN], {"PORTAL_OIDC_ISSUER": "http://127.0.0.1/openid"}, tmp_path)
    assert "PORTAL_OIDC_CLIENT_SECRET" in no_secret.stderr
    plain_http = _run(
        ["-c", SIGN_IN],
        {
            "PORTAL_PRODUCTION": "1", "DJANGO_SECRET_KEY": "k" * 50,
            "DJANGO_ALLOWED_HOSTS": "su.example.org",
            "PORTAL_OIDC_ISSUER": "http://id.example.org", "PORTAL_OIDC_CLIENT_SECRET": "s",
        },
        tmp_path,
    )  # fmt: skip
    assert "must be an https:// URL" in plain_http.stderr

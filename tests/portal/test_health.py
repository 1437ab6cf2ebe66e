"""/healthz/ names the database, the cache and the broker; its status code follows the
database alone. /readyz/ is what a load balancer probes: the database answers and every
migration is applied (portal/health.py, docs/configuration.md)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from portal import health

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nobody listens once the socket closes


def test_healthz_says_ok_for_each_part_by_name(client):
    response = client.get("/healthz/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "cache": "ok", "broker": "ok"}


def test_a_stopped_cache_is_named_by_healthz_which_still_answers_200(client, redis_cache):
    assert client.get("/healthz/").json()["cache"] == "ok"
    redis_cache.stop()

    response = client.get("/healthz/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["database"] == "ok"
    assert body["cache"].startswith("ConnectionError: Error 111 connecting to 127.0.0.1:")
    assert body["broker"] == "ok"
    assert client.get("/readyz/").status_code == 200  # the portal serves without its cache


def test_an_unreachable_broker_is_named_by_healthz_which_still_answers_200(client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    response = client.get("/healthz/")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["database"], body["cache"]) == ("degraded", "ok", "ok")
    assert body["broker"].startswith("ConnectionError: ")


def test_a_redis_that_never_answers_holds_the_check_no_longer_than_its_timeout(settings):
    with socket.socket() as silent:  # accepts connections (the backlog), never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        settings.CACHE_URL = f"redis://127.0.0.1:{silent.getsockname()[1]}/1"
        started = time.monotonic()
        answer = health.cache_status()
        elapsed = time.monotonic() - started
    assert answer.startswith("TimeoutError: ")
    assert (
        settings.PORTAL_HEALTH_TIMEOUT_SECONDS
        <= elapsed
        < 3 * settings.PORTAL_HEALTH_TIMEOUT_SECONDS
    )


def test_readyz_is_ready_when_the_database_answers_and_every_migration_is_applied(
    client, monkeypatch
):
    monkeypatch.setattr(health, "_migrations_applied", False)
    response = client.get("/readyz/")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "database": "ok", "migrations": "ok"}


def test_readyz_is_not_ready_while_a_migration_is_not_applied(client, monkeypatch):
    monkeypatch.setattr(health, "_migrations_applied", False)
    with connection.cursor() as cursor:  # undone with the test's transaction
        cursor.execute(
            "DELETE FROM django_migrations WHERE app = 'accounting' AND name = "
            "(SELECT MAX(name) FROM django_migrations WHERE app = 'accounting')"
        )
    response = client.get("/readyz/")
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["database"]) == ("not ready", "ok")
    assert body["migrations"].startswith("1 not applied, the first accounting.")
    assert client.get("/healthz/").status_code == 200  # alive, just not to be sent requests


def test_both_answer_503_when_the_database_refuses_and_name_what_is_down():
    """A separate process, whose database is a closed port: the test database is untouched."""
    environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "DATABASE_URL": f"postgres://portal@127.0.0.1:{_closed_port()}/portal",
        "PORTAL_CACHE_URL": f"redis://127.0.0.1:{_closed_port()}/1",
    }
    script = (
        "import json, django\n"
        "django.setup()\n"
        "from django.test import Client\n"
        "from django.test.utils import setup_test_environment\n"
        "setup_test_environment()\n"
        "client = Client()\n"
        "for url in ('/healthz/', '/readyz/'):\n"
        "    response = client.get(url)\n"
        "    print(json.dumps([response.status_code, response.json()]))\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=environ, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    (healthz_status, healthz), (readyz_status, readyz) = map(json.loads, done.stdout.splitlines())
    assert healthz_status == 503
    assert healthz["status"] == "down"
    assert healthz["database"].startswith("OperationalError: ")
    assert healthz["cache"].startswith("ConnectionError: ")
    assert healthz["broker"] == "ok"
    assert readyz_status == 503
    assert readyz == {
        "status": "not ready", "database": healthz["database"], "migrations": "not checked"
    }  # fmt: skip

"""deploy/gunicorn.conf.py: workers from the cores unless PORTAL_WEB_WORKERS says otherwise, a
timeout for buffered requests, and a bad value stops gunicorn naming the variable."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest

from deploy.nginx import WEB_TIMEOUT_SECONDS

CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


def _settings(monkeypatch, **env: str) -> dict:
    for name in ("PORTAL_WEB_WORKERS", "PORTAL_WEB_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(CONF))


def test_workers_are_two_per_core_plus_one_by_default(monkeypatch):
    assert _settings(monkeypatch)["workers"] == 2 * len(os.sched_getaffinity(0)) + 1


def test_the_environment_sets_workers_and_timeout(monkeypatch):
    settings = _settings(monkeypatch, PORTAL_WEB_WORKERS="3", PORTAL_WEB_TIMEOUT="300")
    assert (settings["workers"], settings["timeout"]) == (3, 300)


def test_the_default_timeout_is_the_one_nginx_waits_for(monkeypatch):
    assert _settings(monkeypatch)["timeout"] == WEB_TIMEOUT_SECONDS


@pytest.mark.parametrize("value", ["two", "0", "-1"])
def test_a_bad_worker_count_stops_gunicorn_naming_the_variable(monkeypatch, value):
    with pytest.raises(SystemExit, match="PORTAL_WEB_WORKERS"):
        _settings(monkeypatch, PORTAL_WEB_WORKERS=value)

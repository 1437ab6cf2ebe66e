"""``make demo HOST= PORT=`` and the run-* targets give every process they start
``PORTAL_URL=http://HOST:PORT`` (the address mails link to) unless PORTAL_URL is given, and say
it (docs/configuration.md, "Links in mails"). Make is run for real, with ``-n`` for the demo so
nothing is installed or served."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A target of our own, run by the real Makefile: what a recipe's process sees.
SHOW = '--eval=show-portal-url: ; @echo "$$PORTAL_URL"'

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(*arguments: str, **environ: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PORTAL_URL"} | environ
    return subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(ROOT), *arguments],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip


def test_the_recipes_get_portal_url_from_host_and_port_unless_it_is_given():
    assert _make(SHOW, "show-portal-url").strip() == "http://127.0.0.1:8000"
    shown = _make(SHOW, "show-portal-url", "HOST=portal.example.org", "PORT=8123")
    assert shown.strip() == "http://portal.example.org:8123"
    given = _make(SHOW, "show-portal-url", "HOST=h", PORTAL_URL="https://su.example.org")
    assert given.strip() == "https://su.example.org"
    # Serving on every address: the links name the machine.
    machine = subprocess.run(["hostname", "-f"], capture_output=True, text=True).stdout.strip()
    everywhere = _make(SHOW, "show-portal-url", "HOST=0.0.0.0", "PORT=9000").strip()
    assert everywhere == f"http://{machine or socket.gethostname()}:9000"


def test_the_demo_says_where_its_mails_link_and_serves_there():
    plan = _make("-n", "demo", "HOST=portal.example.org", "PORT=8123")
    assert "mails link to http://portal.example.org:8123" in plan
    assert "runserver portal.example.org:8123" in plan
    for target in ("run", "run-web", "run-worker", "run-beat"):
        shown = _make("-n", target, "HOST=portal.example.org", "PORT=8123")
        assert "mails link to http://portal.example.org:8123" in shown, target

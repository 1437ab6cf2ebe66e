"""With CI=true the suite fails (never skips) when PostgreSQL or Redis is unreachable."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collect(env_overrides):
    env = {**os.environ, "CI": "true", **env_overrides}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/portal/test_env.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_ci_mode_stops_when_postgresql_is_unreachable():
    result = _collect({
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/portal",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
    })  # fmt: skip
    assert result.returncode != 0
    assert "PostgreSQL is unreachable" in result.stdout + result.stderr


def test_ci_mode_stops_when_redis_is_missing():
    env = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/portal", "CELERY_BROKER_URL": ""}
    result = _collect(env)
    assert result.returncode != 0
    assert "CELERY_BROKER_URL must point at Redis" in result.stdout + result.stderr

"""Print shell exports that point the test suite at the real services when they are reachable.

``make test`` evaluates the output. Variables already set are kept as they are (CI sets them);
an unreachable service falls back to SQLite / eager Celery, and says so on stderr. The suite
itself (tests/conftest.py) refuses to fall back when CI=true.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys

DEFAULTS = {
    "DATABASE_URL": (
        "postgres://postgres@127.0.0.1:5432/portal",
        ("127.0.0.1", 5432),
        "PostgreSQL",
    ),
    "CELERY_BROKER_URL": ("redis://127.0.0.1:6379/15", ("127.0.0.1", 6379), "Redis"),
}


def reachable(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=1.0):
            return True
    except OSError:
        return False


def main() -> None:
    for name, (url, address, label) in DEFAULTS.items():
        if os.environ.get(name):
            print(f"tests: {name} is set; using it", file=sys.stderr)
        elif reachable(address):
            print(f"export {name}={shlex.quote(url)}")
            print(
                f"tests: {label} reachable at {address[0]}:{address[1]}; using it", file=sys.stderr
            )
        else:
            fallback = "SQLite" if name == "DATABASE_URL" else "eager Celery"
            print(f"tests: {label} not reachable; falling back to {fallback}", file=sys.stderr)


if __name__ == "__main__":
    main()

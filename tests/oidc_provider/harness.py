"""Start the test identity provider (``python -m tests.oidc_provider``) in its own process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.oidc_provider.__main__ import CLIENT_ID, DIRECTORY, PASSWORD

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 60

__all__ = ["CLIENT_ID", "DIRECTORY", "PASSWORD", "Provider", "provider_running"]


@dataclass(frozen=True)
class Provider:
    url: str  # http://127.0.0.1:PORT
    client_id: str
    client_secret: str
    state_dir: Path  # its database (idp.sqlite3): tests change the directory there

    @property
    def issuer(self) -> str:
        return f"{self.url}/openid"


@contextmanager
def provider_running(state_dir: Path, *, redirect_uris: list[str]) -> Iterator[Provider]:
    """The provider, serving until the block ends; its client accepts ``redirect_uris``."""
    secret = "client-secret-for-tests"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.oidc_provider", str(state_dir), secret, *redirect_uris],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until it serves, or ends if it died
        if not line.startswith("LISTENING "):
            process.kill()
            _, errors = process.communicate(timeout=STARTUP_SECONDS)
            raise RuntimeError(f"the test identity provider did not start: {errors[-2000:]}")
        yield Provider(
            url=line.split()[1], client_id=CLIENT_ID, client_secret=secret, state_dir=state_dir
        )
    finally:
        process.terminate()
        try:
            process.wait(timeout=STARTUP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()

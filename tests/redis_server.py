"""A private Redis for the tests that stop it: Debian's ``redis-server`` on a free port.

The shared Redis of the test services (the Celery broker) must never be stopped; tests of
what happens when Redis goes away start their own with :func:`redis_server`, on 127.0.0.1 at a
free port, with its own directory and no persistence, and stop it when they choose
(:meth:`RedisServer.stop`: the process is terminated and waited for, never a sleep).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REDIS_SERVER = Path("/usr/bin/redis-server")


def redis_missing_reason() -> str | None:
    """Why a private Redis cannot be started here, or ``None``: Debian's ``redis-server`` is
    installed when missing (as root), as the other test servers are."""
    from tests.system_packages import apt_missing_reason

    return apt_missing_reason(REDIS_SERVER, "redis-server")


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        """Stop the server now; when this returns, nothing listens on its port."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 1) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_server(
    *, port: int | None = None, start_timeout_seconds: float = 20
) -> Iterator[RedisServer]:
    """Run a private redis-server (on ``port``, or a free one); stop it (if the test has not)
    and delete its directory."""
    workdir = Path(tempfile.mkdtemp(prefix="portal-redis-"))
    port = port or _free_port()
    log = (workdir / "redis.log").open("wb")
    process = subprocess.Popen(
        [
            str(REDIS_SERVER), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(workdir),
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    server = RedisServer(port=port, process=process)
    try:
        deadline = time.monotonic() + start_timeout_seconds
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(
                    f"redis-server did not start on port {port}: "
                    + (workdir / "redis.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.05)
        yield server
    finally:
        server.stop()
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)

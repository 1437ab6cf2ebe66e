"""A private PostgreSQL for the tests that restart it: Debian's binaries on a free port.

The shared PostgreSQL of the test services must never be restarted (other checkouts run their
tests on it); a test of what an import does when the database restarts starts its own with
:func:`postgres_server`: a cluster made by ``initdb`` in a directory under /tmp, listening on
127.0.0.1 at a free port, with its socket in that directory, and a copy of the test database
(``pg_dump`` of pytest-django's database: the same schema, migrations and rows).
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def postgres_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` with ``initdb`` and ``pg_ctl``, or None."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda path: int(path.parent.name)
    )
    found = [path for path in found if (path / "initdb").exists() and (path / "pg_ctl").exists()]
    return found[-1] if found else None


def postgres_missing_reason() -> str | None:
    """Why a private PostgreSQL cannot be started here, or ``None``."""
    if postgres_bin() is None:
        return "no /usr/lib/postgresql/*/bin/initdb (Debian: postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root and no runuser to run PostgreSQL as the postgres user"
    return None


def _as_owner() -> list[str]:
    # initdb and postgres refuse to run as root: as root, they run as Debian's postgres user.
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@dataclass
class PostgresServer:
    port: int
    data_dir: Path
    bin_dir: Path

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def restart_command(self) -> str:
        """The shell command that restarts the server and returns once it accepts connections
        again (every open connection is broken, as by a real restart)."""
        return shlex.join(
            [*_as_owner(), str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-w",
             "-m", "fast", "restart"]
        )  # fmt: skip

    def stop(self) -> None:
        subprocess.run(
            [*_as_owner(), str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-w",
             "-m", "immediate", "stop"],
            capture_output=True, check=False,
        )  # fmt: skip


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def postgres_server(*, copy_of: str, name: str) -> Iterator[PostgresServer]:
    """Run a private PostgreSQL holding database ``name``, a copy of the database at the URL
    ``copy_of``; stop it and delete its directory at the end."""
    bin_dir = postgres_bin()
    assert bin_dir is not None, postgres_missing_reason()
    workdir = Path(tempfile.mkdtemp(prefix="portal-pg-", dir="/tmp"))
    data_dir = workdir / "data"
    if os.geteuid() == 0:
        shutil.chown(workdir, user="postgres")
    port = _free_port()
    server = PostgresServer(port=port, data_dir=data_dir, bin_dir=bin_dir)
    owner = _as_owner()

    def run(command: list[str], **kwargs: object) -> None:
        done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(command)} failed: {done.stderr[-2000:]}")

    try:
        run([*owner, str(bin_dir / "initdb"), "-D", str(data_dir), "-U", "postgres",
             "--auth=trust", "-E", "UTF8", "--no-sync"])  # fmt: skip
        options = (
            f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c full_page_writes=off -c synchronous_commit=off"
        )
        run([*owner, str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-w", "-o", options,
             "-l", str(workdir / "postgres.log"), "start"])  # fmt: skip
        run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
             name])  # fmt: skip
        dump = subprocess.Popen(
            [str(bin_dir / "pg_dump"), "--no-owner", "--no-privileges", "-d", copy_of],
            stdout=subprocess.PIPE,
        )
        run(
            [str(bin_dir / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-d", server.url(name)],
            stdin=dump.stdout,
        )
        if dump.wait() != 0:
            raise RuntimeError(f"pg_dump of {copy_of} failed")
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

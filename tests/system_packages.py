"""Debian packages the tests need (Chromium, docker-compose, Slurm): installed with apt when
missing and allowed, else the reason why not. Under CI=true the tests that need them then fail,
not skip (tests/conftest.py IN_CI)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

# One install at a time across the test processes of ``make test`` (pytest-xdist): two `npm ci`
# in one directory, or two apt runs, would trip over each other.
_INSTALL_LOCK = Path(tempfile.gettempdir()) / "portal-tests-install.lock"


@contextmanager
def _one_install_at_a_time() -> Iterator[None]:
    with _INSTALL_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def apt_missing_reason(binary: Path, package: str) -> str | None:
    """Install ``package`` when ``binary`` is missing; None once it is there, else why not."""
    return apt_install_missing({binary: package})


def apt_install_missing(packages: Mapping[Path, str]) -> str | None:
    """Install, in one apt run, the package of each file in ``packages`` that is missing;
    None once every file is there, else why not."""
    if all(path.exists() for path in packages):
        return None
    with _one_install_at_a_time():
        return _apt_install(packages)


def _apt_install(packages: Mapping[Path, str]) -> str | None:
    absent = sorted(str(path) for path in packages if not path.exists())
    if not absent:
        return None  # another test process installed them meanwhile
    missing = sorted({package for path, package in packages.items() if not path.exists()})
    what = f"{', '.join(absent)} missing (Debian: {' '.join(missing)})"
    if os.geteuid() != 0:
        return f"{what} and installing with apt needs root"
    if shutil.which("apt-get") is None:
        return f"{what} and this system has no apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return f"{' '.join(command)} failed: {done.stderr.strip()[-300:]}"
    still = sorted(str(path) for path in packages if not path.exists())
    return f"apt installed {' '.join(missing)} but {', '.join(still)} is missing" if still else None


def npm_missing_reason(wanted: Path, root: Path) -> str | None:
    """Install the npm packages pinned by ``root``'s package-lock.json (``npm ci``) when
    ``wanted`` is missing, with Debian's npm when that is missing too; None once ``wanted`` is
    there, else why not."""
    if wanted.exists():
        return None
    with _one_install_at_a_time():
        return _npm_ci(wanted, root)


def _npm_ci(wanted: Path, root: Path) -> str | None:
    if wanted.exists():
        return None  # another test process installed them meanwhile
    npm = shutil.which("npm")
    if npm is None:
        reason = _apt_install({Path("/usr/bin/npm"): "npm"})  # under the lock already
        if reason is not None:
            return reason
        npm = "/usr/bin/npm"
    command = [npm, "ci", "--no-audit", "--no-fund"]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        errors = [
            line.removeprefix("npm error").strip()
            for line in done.stderr.splitlines()
            if not line.startswith("npm warn")
        ]
        return f"npm ci in {root} failed: {' '.join(filter(None, errors))[:300]}"
    return None if wanted.exists() else f"npm ci ran but {wanted} is missing"

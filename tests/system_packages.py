"""Debian packages the tests need (Chromium, docker-compose): installed with apt when missing
and allowed, else the reason why not. Under CI=true the tests that need them then fail, not skip
(tests/conftest.py IN_CI)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def apt_missing_reason(binary: Path, package: str) -> str | None:
    """Install ``package`` when ``binary`` is missing; None once it is there, else why not."""
    if binary.exists():
        return None
    if os.geteuid() != 0:
        return f"{binary} is missing and installing {package} with apt needs root"
    if shutil.which("apt-get") is None:
        return f"{binary} is missing and this system has no apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", package]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return f"{' '.join(command)} failed: {done.stderr.strip()[-300:]}"
    return None if binary.exists() else f"apt installed {package} but {binary} is missing"


def npm_missing_reason(wanted: Path, root: Path) -> str | None:
    """Install the npm packages pinned by ``root``'s package-lock.json (``npm ci``) when
    ``wanted`` is missing, with Debian's npm when that is missing too; None once ``wanted`` is
    there, else why not."""
    if wanted.exists():
        return None
    npm = shutil.which("npm")
    if npm is None:
        reason = apt_missing_reason(Path("/usr/bin/npm"), "npm")
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

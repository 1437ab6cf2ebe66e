"""docker-compose.yml stays valid and describes the services the Makefile starts natively."""

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import IN_CI
from tests.system_packages import apt_missing_reason

ROOT = Path(__file__).resolve().parents[2]
DOCKER_COMPOSE = Path("/usr/bin/docker-compose")  # Debian's package


def _compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_file_is_valid_for_docker_compose():
    reason = apt_missing_reason(DOCKER_COMPOSE, "docker-compose")
    if reason is not None:
        if IN_CI:
            pytest.fail(f"docker-compose must check the file in CI: {reason}")
        pytest.skip(reason)
    binary = str(DOCKER_COMPOSE)
    result = subprocess.run(
        [binary, "config", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_compose_services_match_the_makefiles_native_services():
    listed = subprocess.run(
        ["make", "-s", "services"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(_compose()["services"]) == set(listed)


def test_every_application_service_is_built_from_the_one_image_and_has_a_make_target():
    services = _compose()["services"]
    app_services = [name for name, spec in services.items() if "build" in spec]
    assert sorted(app_services) == ["beat", "web", "worker"]
    assert {services[name]["image"] for name in app_services} == {"su-portal:latest"}
    for name in app_services:
        dry_run = subprocess.run(
            ["make", "-n", f"run-{name}"], cwd=ROOT, capture_output=True, text=True
        )
        assert dry_run.returncode == 0, dry_run.stderr


def test_worker_listens_on_the_same_queues_as_the_native_worker():
    worker_command = " ".join(_compose()["services"]["worker"]["command"])
    makefile = (ROOT / "Makefile").read_text()
    assert "--queues portal,imports" in worker_command
    assert "--queues portal,imports" in makefile

"""docker-compose.yml stays valid and describes the services the Makefile starts natively."""

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.nginx import TEMPLATE, WEB_TIMEOUT_SECONDS, native_values, render
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


# docker-compose's ${NAME:-default}: the value the file gives when the shell sets nothing.
_DEFAULTED = re.compile(r"\$\{[A-Z_]+:-([^}]*)\}")


def _without_shell(value: object) -> str:
    return _DEFAULTED.sub(lambda match: match.group(1), str(value))


def _image_var_dir() -> str:
    dockerfile = (ROOT / "Dockerfile").read_text()
    found = re.search(r"PORTAL_VAR_DIR=(\S+)", dockerfile)
    assert found is not None
    return found.group(1)


def test_nginx_renders_the_one_template_with_the_values_a_native_run_also_gives():
    nginx = _compose()["services"]["nginx"]
    assert nginx["image"].startswith("nginx:1.")  # the official image, a stable release
    assert (
        "./deploy/nginx.conf.template:/etc/nginx/templates/nginx.conf.template:ro"
        in (nginx["volumes"])
    )
    environment = {name: _without_shell(value) for name, value in nginx["environment"].items()}
    assert environment.pop("NGINX_ENVSUBST_OUTPUT_DIR") == "/etc/nginx"  # -> nginx.conf
    placeholders = set(re.findall(r"\$\{([A-Z_]+)\}", TEMPLATE.read_text()))
    native = native_values(listen="127.0.0.1:8000", var_dir=Path("/srv/portal"))
    assert set(environment) == placeholders == set(native)
    rendered = render(TEMPLATE.read_text(), environment)
    assert "server web:8000;" in rendered
    assert f"alias {_image_var_dir()}/static/;" in rendered
    assert environment["PORTAL_WEB_TIMEOUT"] == native["PORTAL_WEB_TIMEOUT"]


def test_only_nginx_faces_clients_and_gunicorn_runs_on_the_shared_settings():
    services = _compose()["services"]
    published = sorted(name for name, spec in services.items() if spec.get("ports"))
    assert published == ["nginx"]
    web_command = services["web"]["command"]
    assert "gunicorn -c deploy/gunicorn.conf.py --bind 0.0.0.0:8000" in web_command
    assert "collectstatic" in web_command
    assert "gunicorn -c deploy/gunicorn.conf.py --bind unix:" in (ROOT / "Makefile").read_text()
    app_env = services["web"]["environment"]
    assert _without_shell(app_env["PORTAL_WEB_TIMEOUT"]) == str(WEB_TIMEOUT_SECONDS)
    assert _without_shell(app_env["PORTAL_TRUSTED_PROXY_COUNT"]) == "1"  # nginx is a hop


def test_web_and_worker_share_the_uploads_volume_at_the_same_path():
    services = _compose()["services"]
    uploads = f"uploads:{_image_var_dir()}/uploads"
    assert uploads in services["web"]["volumes"]
    assert uploads in services["worker"]["volumes"]
    assert "uploads" in _compose()["volumes"]
    # The image makes the directory, owned by the portal user, so the volume starts writable.
    assert f"mkdir -p {_image_var_dir()}/uploads" in (ROOT / "Dockerfile").read_text()


def test_redis_keeps_the_queue_in_an_append_only_file_on_a_volume():
    redis = _compose()["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert "redisdata:/data" in redis["volumes"]
    assert "redisdata" in _compose()["volumes"]

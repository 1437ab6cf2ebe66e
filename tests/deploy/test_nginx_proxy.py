"""The web tier on real servers (issue 32): nginx from deploy/nginx.conf.template in front of
gunicorn with deploy/gunicorn.conf.py, both on loopback. Two slow clients trickling a POST
body must not keep ``/healthz/`` from answering: nginx holds them, gunicorn never sees them.

Every loop here is bounded in time; the slow clients trickle for the 60 s the issue asks for.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from accounting.ledger.forms import MAX_UPLOAD_BYTES
from deploy.nginx import TEMPLATE, gunicorn_socket, native_values, nginx_command, write_config
from tests import workers
from tests.conftest import IN_CI, needs_real_services
from tests.system_packages import apt_missing_reason

ROOT = Path(__file__).resolve().parents[2]
NGINX = Path("/usr/sbin/nginx")  # Debian's nginx-light (or nginx)
HOST = "127.0.0.1"
# The shipped gunicorn had 2 sync workers: two slow clients took both (the review's finding).
WORKERS = 2
SLOW_CLIENT_SECONDS = 60
HEALTH_TIMEOUT_SECONDS = 1.0
HEALTH_INTERVAL_SECONDS = 0.25
# A check that had to wait for a worker held by a slow client would wait for the rest of its
# trickle (up to SLOW_CLIENT_SECONDS). A check that takes less than this was not held, however
# busy the machine is: a first request on a cold worker, or a test process beside it, can take
# a second or two on two cores without anything being wrong with the proxy.
NOT_HELD_SECONDS = 10.0

Address = tuple[str, int] | str  # loopback TCP, or a unix socket's path


def _nginx_or_reason() -> None:
    reason = apt_missing_reason(NGINX, "nginx-light")
    if reason is not None:
        if IN_CI:
            pytest.fail(f"nginx must front gunicorn in CI: {reason}")
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _connect(address: Address, timeout: float) -> socket.socket:
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    connection = socket.socket(family, socket.SOCK_STREAM)
    connection.settimeout(timeout)
    connection.connect(address)
    return connection


def _request(address: Address, head: str, timeout: float, body: bytes = b"") -> tuple[int, bytes]:
    """Send one request and read the whole answer within ``timeout`` seconds: status, body."""
    with _connect(address, timeout) as connection:
        connection.sendall(head.encode() + body)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def _get(address: Address, path: str, timeout: float) -> tuple[int, bytes]:
    return _request(
        address, f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n", timeout
    )


@dataclass
class WebTier:
    nginx: tuple[str, int]
    gunicorn: str
    static_root: Path


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_until(ready: Callable[[], bool], process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{log.stem} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


def _answers(address: Address) -> bool:
    try:
        return _get(address, "/healthz/", 2)[0] == 200
    except OSError:
        return False


@pytest.fixture
def web_tier(db) -> Iterator[WebTier]:
    """gunicorn (deploy/gunicorn.conf.py, WORKERS sync workers, the test database) on a unix
    socket and nginx (the template rendered as ``make run-nginx`` renders it) on a free
    loopback port, in a directory nginx's unprivileged workers may enter."""
    needs_real_services("gunicorn reading the test database")
    _nginx_or_reason()
    var_dir = Path(tempfile.mkdtemp(prefix="portal-web-tier-"))
    var_dir.chmod(0o755)  # nginx's workers (www-data when the test runs as root) come in
    static_root = var_dir / "static"
    static_root.mkdir()
    (static_root / "probe.txt").write_text("served by nginx\n")
    (var_dir / "run").mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": workers.test_database_url(),
        "PORTAL_VAR_DIR": str(var_dir),
        "PORTAL_WEB_WORKERS": str(WORKERS),
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": HOST,
        "PORTAL_LOG_LEVEL": "WARNING",
    }
    socket_path = str(gunicorn_socket(var_dir))
    gunicorn_log = (var_dir / "gunicorn.log").open("wb")
    gunicorn = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "-c", "deploy/gunicorn.conf.py",
         "--bind", f"unix:{socket_path}", "portal.wsgi"],
        cwd=ROOT, env=env, stdout=gunicorn_log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    port = _free_port()
    values = native_values(listen=f"{HOST}:{port}", var_dir=var_dir, static_root=static_root)
    config = write_config(values, var_dir / "nginx" / "nginx.conf")
    nginx_log = (var_dir / "nginx.log").open("wb")
    nginx = subprocess.Popen(
        nginx_command(config), stdout=nginx_log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        _wait_until(lambda: _answers(socket_path), gunicorn, var_dir / "gunicorn.log")
        _wait_until(lambda: _answers((HOST, port)), nginx, var_dir / "nginx.log")
        yield WebTier(nginx=(HOST, port), gunicorn=socket_path, static_root=static_root)
    finally:
        _stop(nginx)
        _stop(gunicorn)
        gunicorn_log.close()
        nginx_log.close()
        shutil.rmtree(var_dir, ignore_errors=True)


class SlowClient(threading.Thread):
    """A POST whose body trickles in a few bytes at a time for ``seconds``, then gives up.
    The form content type makes Django read the body (CSRF), so a worker that got the request
    would be held for all of it."""

    def __init__(self, address: Address, seconds: float) -> None:
        super().__init__(daemon=True)
        self.address, self.seconds = address, seconds
        self.bytes_sent = 0
        self.answered = b""
        self.error: BaseException | None = None

    def run(self) -> None:
        head = (
            f"POST /accounts/login/ HTTP/1.1\r\nHost: {HOST}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            "Content-Length: 1000000\r\n\r\n"
        )
        try:
            with _connect(self.address, 5) as connection:
                connection.sendall(head.encode())
                connection.setblocking(False)
                stop = time.monotonic() + self.seconds
                while time.monotonic() < stop:
                    connection.sendall(b"aaaa")
                    self.bytes_sent += 4
                    with contextlib.suppress(BlockingIOError):  # nothing, until the body ends
                        self.answered += connection.recv(4096)
                    time.sleep(0.5)
        except BaseException as error:  # reported by the test
            self.error = error


def _health_checks(address: Address, seconds: float, timeout: float) -> list[float]:
    """GET /healthz/ every HEALTH_INTERVAL_SECONDS for ``seconds``, each within ``timeout``;
    each answer's latency."""
    latencies = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        began = time.monotonic()
        status, body = _get(address, "/healthz/", timeout)
        latencies.append(time.monotonic() - began)
        assert status == 200, body
        assert json.loads(body)["database"] == "ok"
        time.sleep(HEALTH_INTERVAL_SECONDS)
    return latencies


def test_two_slow_clients_on_gunicorn_alone_keep_healthz_from_answering(web_tier):
    """The review's finding, in a few seconds: without nginx both sync workers wait on a body."""
    clients = [SlowClient(web_tier.gunicorn, seconds=5) for _ in range(WORKERS)]
    for client in clients:
        client.start()
    time.sleep(1)  # both requests are with a worker, reading
    with pytest.raises(TimeoutError):
        _get(web_tier.gunicorn, "/healthz/", HEALTH_TIMEOUT_SECONDS)
    for client in clients:
        client.join(timeout=15)


def test_behind_nginx_healthz_answers_within_a_second_while_two_clients_trickle_for_60_s(
    web_tier,
):
    """Every check answers without waiting on the slow clients (well under the minute a held
    worker would take), and the typical one within a second. The bound on each check is not a
    second: on two cores shared with the rest of the suite a single check has taken longer
    (CI, stop 40) with nginx holding both bodies as it should."""
    clients = [SlowClient(web_tier.nginx, seconds=SLOW_CLIENT_SECONDS) for _ in range(WORKERS)]
    for client in clients:
        client.start()
    time.sleep(1)
    latencies = _health_checks(
        web_tier.nginx, seconds=SLOW_CLIENT_SECONDS - 2, timeout=NOT_HELD_SECONDS
    )
    for client in clients:
        client.join(timeout=SLOW_CLIENT_SECONDS + 10)
    print(
        f"\n{len(latencies)} health checks during {SLOW_CLIENT_SECONDS} s of {WORKERS} slow"
        f" clients: median {statistics.median(latencies) * 1000:.1f} ms,"
        f" max {max(latencies) * 1000:.1f} ms"
    )
    assert len(latencies) >= 20  # checks all through the trickle, none of them held
    assert max(latencies) < NOT_HELD_SECONDS
    assert statistics.median(latencies) < HEALTH_TIMEOUT_SECONDS
    for client in clients:
        assert client.is_alive() is False
        assert client.error is None, client.error
        assert client.answered == b""  # held by nginx the whole time, never passed on
        assert client.bytes_sent >= SLOW_CLIENT_SECONDS * 2 * 4 * 0.9


def test_nginx_serves_static_files_itself_and_refuses_a_body_over_the_upload_limit(web_tier):
    # nginx answers /static/ from the folder itself: the request never reaches gunicorn.
    assert _get(web_tier.nginx, "/static/probe.txt", 5) == (200, b"served by nginx\n")
    too_large = MAX_UPLOAD_BYTES + 2 * 1024**2
    with _connect(web_tier.nginx, 5) as connection:
        connection.sendall(
            f"POST /api/v1/imports/ HTTP/1.1\r\nHost: {HOST}\r\n"
            f"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: {too_large}"
            "\r\n\r\n".encode()
        )
        status = int(connection.recv(4096).split(b"\r\n")[0].split()[1])
    assert status == 413  # refused on the declared length, before reading a byte of it


def _fetch(address: Address, path: str, accept_encoding: str) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` with the given Accept-Encoding: status, headers (lower-case names), body."""
    with _connect(address, 5) as connection:
        connection.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nAccept-Encoding: {accept_encoding}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    return int(status_line.split()[1]), headers, body


def test_nginx_sends_the_collected_gzip_and_caches_a_hashed_name_for_a_year(web_tier):
    """collectstatic writes a .gz beside each file and a copy under a hashed name (pages link
    that one: docs/configuration.md, "Static files")."""
    text = b"body { color: #1d2733; }\n" * 200
    (web_tier.static_root / "css").mkdir()
    for name in ("site.0123456789ab.css", "site.css"):
        (web_tier.static_root / "css" / name).write_bytes(text)
        (web_tier.static_root / "css" / f"{name}.gz").write_bytes(gzip.compress(text))
    status, headers, body = _fetch(web_tier.nginx, "/static/css/site.0123456789ab.css", "gzip")
    assert status == 200
    assert headers["content-encoding"] == "gzip"
    assert gzip.decompress(body) == text
    assert headers["cache-control"] == "public, max-age=31536000, immutable"
    status, headers, body = _fetch(web_tier.nginx, "/static/css/site.css", "identity")
    assert status == 200
    assert "content-encoding" not in headers
    assert body == text
    assert headers["cache-control"] == "public, max-age=3600"


def test_the_body_limit_is_the_documented_upload_limit_and_bodies_go_to_disk():
    template = TEMPLATE.read_text()
    limit_mib = int(re.search(r"client_max_body_size (\d+)m;", template).group(1))
    # The 2 GiB file plus one MiB for the form's other fields and the multipart framing.
    assert limit_mib * 1024**2 == MAX_UPLOAD_BYTES + 1024**2
    documented = (ROOT / "docs" / "configuration.md").read_text()
    assert "`client_max_body_size 2049m`: the upload limit of 2 GiB" in documented
    assert re.search(r"client_body_buffer_size 16k;", template)
    assert "proxy_request_buffering on;" in template
    for timeout in ("client_header_timeout", "client_body_timeout", "send_timeout"):
        assert re.search(rf"{timeout} \d+s;", template), timeout

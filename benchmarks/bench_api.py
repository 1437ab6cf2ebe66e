"""Benchmark of the REST API under load: gunicorn with 2 workers on PostgreSQL with millions of
jobs, a loopback load generator, p95 latency and requests per second (API issue).

A throwaway database gets ``--jobs`` ledger rows (default 10,000,000) for 200 projects over a
year and their daily roll-ups (the fill of bench_balance.py), grants on every project, and a
researcher who is a member of one project and holds an API token. gunicorn serves the portal
with 2 workers on 127.0.0.1 (a free port); ``wrk`` (Debian's, when installed) or a small
threaded Python client loads it for ``--seconds`` per endpoint, as that researcher:

- ``GET /api/v1/projects/{code}/balance/``: target p95 <= 50 ms and >= 200 requests/s;
- ``GET /api/v1/jobs/?project={code}`` (the first page): target p95 <= 100 ms;
- the pages a researcher opens, signed in with a session cookie: the dashboard ``/`` and the
  project page ``/allocations/projects/{code}/``: target p95 <= 100 ms and >= 100 pages/s;
- signed out: the sign-in page ``/accounts/login/`` (the first page of everyone's day) and the
  API root ``GET /api/v1/`` (links only): target p95 <= 100 ms;
- ``GET /healthz/`` as the baseline in the same run (since 2026-11-27 it asks the database
  ``SELECT 1``, and the cache and the broker ``PING`` when they are Redis; the runs here have
  neither, so it is Django plus one trivial query).

Zero errors (non-2xx, connection errors, time-outs) are required. Everything is stopped and
the database dropped at the end. Loopback only; every run is bounded in time and count.

    python benchmarks/bench_api.py [--jobs 10000000] [--seconds 10] [--connections 4]
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.bench_balance import FILL, PROJECTS  # noqa: E402 (the same ledger)
from benchmarks.pg import database_create, database_drop, psql  # noqa: E402

DB = "portal_bench_api"
HOST = "127.0.0.1"
PROJECT = "bench0042"
MAX_REQUESTS = 200_000  # per endpoint, whatever the duration: the load always stops

SETUP = """
from datetime import date
from decimal import Decimal
from django.contrib.auth.models import User
from people.tokens import token_create
from accounting.models import Cluster, Partition
from projects.models import Membership, PoolPartition, Project, ResourcePool
from allocations.grants.services import allocation_grant
staff = User.objects.create(username="bench-staff", is_staff=True)
cluster = Cluster.objects.get(name="slurm-testbed")
pool = ResourcePool.objects.create(name="bench CPU", cluster=cluster)
work = Partition.objects.get(cluster=cluster, name="work")
PoolPartition.objects.create(pool=pool, partition=work)
for project in Project.objects.filter(code__startswith="bench"):
    allocation_grant(project=project, pool=pool, amount=Decimal(1_000_000),
                     period_start=date(2026, 1, 1), period_end=date(2027, 1, 1), actor=staff)
researcher = User.objects.create(username="bench-researcher")
Membership.objects.create(project=Project.objects.get(code="{project}"), user=researcher)
issued = token_create(user=researcher, name="bench", scope="read", expires_in_days=1)
print("TOKEN", issued.plaintext)
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
session = SessionStore()
session[SESSION_KEY] = str(researcher.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = researcher.get_session_auth_hash()
session.create()
print("SESSION", session.session_key)
"""

WRK_SCRIPT = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %.3f %.3f %.3f %d %d\\n", summary.requests,
    summary.duration, latency:percentile(50) / 1000, latency:percentile(95) / 1000,
    latency:percentile(99) / 1000, e.connect + e.read + e.write + e.timeout, e.status))
end
"""


@dataclass
class Load:
    requests: int
    seconds: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    errors: int  # connection, read, write, time-out
    bad_status: int  # answers other than 2xx/3xx

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def line(self) -> str:
        return (
            f"p50 {self.p50_ms:.1f} ms, p95 {self.p95_ms:.1f} ms, p99 {self.p99_ms:.1f} ms, "
            f"{self.per_second:.0f} req/s ({self.requests:,} requests, "
            f"{self.errors + self.bad_status} errors)"
        )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _wait_until_up(url: str, deadline_seconds: float = 60) -> None:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback)
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"gunicorn did not answer {url} within {deadline_seconds:.0f} s")


@contextmanager
def gunicorn_serving(env: dict[str, str], *, workers: int = 2) -> Iterator[str]:
    """The portal under gunicorn with ``workers`` sync workers on a free loopback port, for a
    load benchmark: its base URL once ``/healthz/`` answers; stopped (its whole process group)
    on leaving."""
    port = _free_port()
    base = f"http://{HOST}:{port}"
    server_env = {
        **env,
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": HOST,
        "PORTAL_LOG_LEVEL": "WARNING",
        # The load is one researcher: the per-user throttle would answer 429s.
        "PORTAL_API_USER_RATE": "10000000/minute",
        # ...and the load generator is one address: the anonymous throttle likewise.
        "PORTAL_API_ANON_RATE": "10000000/minute",
    }
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "portal.wsgi", "--bind",
         f"{HOST}:{port}", "--workers", str(workers), "--log-level", "warning"],
        cwd=ROOT, env=server_env, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_until_up(f"{base}/healthz/")
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


ANONYMOUS = ""  # no credential: the sign-in page and the API root


def _header(credential: str) -> tuple[str, str]:
    """An API token, or ``sessionid=...`` for the pages (nothing for ANONYMOUS)."""
    if credential == ANONYMOUS:
        return "Accept", "*/*"
    if credential.startswith("sessionid="):
        return "Cookie", credential
    return "Authorization", f"Token {credential}"


def _check(url: str, token: str, expect: bytes) -> None:
    name, value = _header(token)
    request = urllib.request.Request(url, headers={name: value})  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
        body = response.read()
    if expect not in body:
        raise RuntimeError(f"{url} answered without {expect!r}: {body[:300]!r}")


def _wrk(url: str, token: str, *, seconds: int, connections: int) -> Load:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT)
    try:
        done = subprocess.run(
            ["wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds}s", "--timeout", "5s",
             "-s", script.name, "-H", ": ".join(_header(token)), url],
            capture_output=True, text=True, check=True, timeout=seconds + 60,
        )  # fmt: skip
    finally:
        Path(script.name).unlink()
    line = next(row for row in done.stdout.splitlines() if row.startswith("RESULT"))
    _, requests, micros, p50, p95, p99, errors, bad = line.split()
    return Load(
        requests=int(requests), seconds=int(micros) / 1e6, p50_ms=float(p50),
        p95_ms=float(p95), p99_ms=float(p99), errors=int(errors), bad_status=int(bad),
    )  # fmt: skip


def _python_load(url: str, token: str, *, seconds: int, connections: int) -> Load:
    """A small threaded client: ``connections`` threads, each one request at a time."""
    target = url.split("//", 1)[1]
    hostport, _, path = target.partition("/")
    host, port = hostport.split(":")
    latencies: list[float] = []
    failures = [0, 0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                if len(latencies) + sum(failures) >= MAX_REQUESTS:
                    return
            started = time.perf_counter()
            try:
                connection = http.client.HTTPConnection(host, int(port), timeout=5)
                name, value = _header(token)
                connection.request("GET", "/" + path, headers={name: value})
                response = connection.getresponse()
                response.read()
                connection.close()
            except OSError:
                with lock:
                    failures[0] += 1
                continue
            with lock:
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status >= 400:
                    failures[1] += 1

    began = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return Load(
        requests=len(latencies), seconds=elapsed, p50_ms=cuts[49], p95_ms=cuts[94],
        p99_ms=cuts[98], errors=failures[0], bad_status=failures[1],
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description="REST API load benchmark")
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument("--seconds", type=int, default=10, help="load per endpoint")
    parser.add_argument("--connections", type=int, default=4, help="concurrent clients")
    parser.add_argument("--python-client", action="store_true", help="even if wrk is there")
    args = parser.parse_args()
    load = _python_load if args.python_client or not shutil.which("wrk") else _wrk
    generator = "python threads" if load is _python_load else "wrk"

    var_dir = tempfile.mkdtemp(prefix="bench-api-")
    env = database_create(DB, months=("2026-01", "2027-01"), PORTAL_VAR_DIR=var_dir)
    manage = [sys.executable, "manage.py"]
    stack = ExitStack()
    failed = False
    try:
        subprocess.run(
            [*manage, "cluster_apply", "examples/clusters/slurm-testbed.json"], cwd=ROOT, env=env,
            check=True, capture_output=True,
        )  # fmt: skip
        started = time.perf_counter()
        psql(DB, FILL.format(jobs=args.jobs, projects=PROJECTS))
        psql(DB, "VACUUM ANALYZE accounting_job;")  # what autovacuum does to a filled table
        print(
            f"filled {args.jobs:,} jobs and their roll-ups in {time.perf_counter() - started:.0f} s"
        )
        done = subprocess.run(
            [*manage, "shell", "-c", SETUP.replace("{project}", PROJECT)], cwd=ROOT, env=env,
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        token = next(row.split()[1] for row in done.stdout.splitlines() if row.startswith("TOKEN"))
        cookie = "sessionid=" + next(
            row.split()[1] for row in done.stdout.splitlines() if row.startswith("SESSION")
        )

        base = stack.enter_context(gunicorn_serving(env))
        balance = f"{base}/api/v1/projects/{PROJECT}/balance/"
        jobs = f"{base}/api/v1/jobs/?project={PROJECT}"
        _check(balance, token, b'"used_su"')
        _check(jobs, token, f'"project":"{PROJECT}"'.encode())
        dashboard, project_page = f"{base}/", f"{base}/allocations/projects/{PROJECT}/"
        _check(dashboard, cookie, PROJECT.encode())
        _check(project_page, cookie, b"burn")
        login_page, api_root = f"{base}/accounts/login/", f"{base}/api/v1/"
        _check(login_page, ANONYMOUS, b'name="password"')
        _check(api_root, ANONYMOUS, b'"resources"')

        def measure(url: str, credential: str = token) -> Load:
            load(url, credential, seconds=2, connections=args.connections)  # warm up
            return load(url, credential, seconds=args.seconds, connections=args.connections)

        baseline = measure(f"{base}/healthz/")
        results = {
            "balance": measure(balance),
            "jobs": measure(jobs),
            "dashboard": measure(dashboard, cookie),
            "project page": measure(project_page, cookie),
            "login page": measure(login_page, ANONYMOUS),
            "api root": measure(api_root, ANONYMOUS),
        }
        print(
            f"load: {generator}, {args.connections} connections, {args.seconds} s per endpoint, "
            f"gunicorn 2 workers, {args.jobs:,} jobs"
        )
        print(f"GET /healthz/ (baseline, SELECT 1): {baseline.line()}")
        targets = {
            "balance": (50.0, 200.0, f"GET /api/v1/projects/{PROJECT}/balance/"),
            "jobs": (100.0, 0.0, f"GET /api/v1/jobs/?project={PROJECT} (first page)"),
            "dashboard": (100.0, 100.0, "GET / (the dashboard, signed in)"),
            "project page": (100.0, 100.0, f"GET /allocations/projects/{PROJECT}/ (signed in)"),
            "login page": (100.0, 0.0, "GET /accounts/login/ (signed out)"),
            "api root": (100.0, 0.0, "GET /api/v1/ (the API root, signed out)"),
        }
        for name, result in results.items():
            p95_target, rate_target, label = targets[name]
            met = (
                result.p95_ms <= p95_target
                and result.per_second >= rate_target
                and result.errors + result.bad_status == 0
            )
            failed = failed or not met
            wanted = f"p95 <= {p95_target:.0f} ms" + (
                f", >= {rate_target:.0f} req/s" if rate_target else ""
            )
            ratio = result.per_second / baseline.per_second if baseline.per_second else 0
            print(
                f"{label}: {result.line()}; {ratio:.2f} x the baseline's req/s "
                f"(target {wanted}, zero errors): {'met' if met else 'MISSED'}"
            )
    finally:
        stack.close()
        shutil.rmtree(var_dir, ignore_errors=True)
        database_drop(DB)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

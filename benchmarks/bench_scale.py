"""Every page and API of issue 33 at scale: a realistic ledger, load at 4 and 20 connections,
queries per view and the first view after an import.

A throwaway database (``portal_bench_scale``) gets ``--months`` monthly ledger partitions
(default 74: six years and two months up to this month) and ``--jobs`` jobs (default
10,000,000) spread evenly over them, for ``--projects`` projects (200) with ``--users`` users
each (5) on the testbed's two partitions (two jobs in three on ``work``, one on ``gpu``), their
daily roll-ups as the import keeps them (per project, partition, user and day), one hourly
utilisation row per partition and hour, the import runs a centre importing every
``--import-minutes`` (5) has left over those months (about 640,000), two pools (CPU, carrying
unused SU over, and GPU) with a grant on each for every project, a researcher (member of
``bench0042``), a staff member and their API tokens and sessions.

Then, in one ``manage.py shell`` through Django's request handler: each view's queries (what
``CaptureQueriesContext`` counts), its median server time warm, its size raw and gzipped (what
a client that sends ``Accept-Encoding: gzip`` receives), and the first view of each after an
import (the sample sacct file booked to ``bench0042`` under new job ids, ending this month: the
ledger's stamp and the project's roll-ups move, caches keyed on them are cold), the median of
``--repeat`` imports, against the cached median. (One sample of it, as before stop 41, read
1.63 x for the project page where the median of seven read 1.41 x on the same database.)

Then gunicorn with 2 workers on a loopback port and a threaded Python client: p50, p95, p99 and
requests per second of each at 4 and 20 connections (``--connections``), ``/healthz/`` in the
same run as the baseline, ``uptime`` before and after. Zero errors required. ``--workers 2,5``
measures each level again with each number of sync workers (2, the issue's; 5, what
``deploy/gunicorn.conf.py`` starts on two cores: two per core plus one), and every line says
how much of a core the load's own client took (its threads share the machine's two cores with
gunicorn and PostgreSQL).

    python benchmarks/bench_scale.py [--jobs 10000000] [--months 74] [--seconds 5]
    python benchmarks/bench_scale.py --jobs 200000 --seconds 2     # a small run, minutes

Targets (issue 33, at 4 connections): p95 <= 50 ms for every page and API, balance p95 <=
10 ms, staff dashboard <= 20 queries, Q(T) a year by the hour <= 100 ms of server time, first
view after an import within 1.5 x a cached view. Figures in docs/pages.md, "Performance".
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.bench_api import gunicorn_serving  # noqa: E402 (the same web tier)
from benchmarks.pg import USAGE_DAILY_FROM_JOBS, database_create, database_drop, psql  # noqa: E402

DB = "portal_bench_scale"  # --database: another name
PROJECT = "bench0042"
MAX_REQUESTS = 200_000  # per endpoint and load, whatever the duration

PROJECTS_SQL = """
INSERT INTO allocations_project (code, title, status, field_of_science, created_at)
SELECT 'bench' || lpad(g::text, 4, '0'), 'bench project ' || g, 'active', '', now()
FROM generate_series(1, {projects}) g;
"""

# Jobs ending evenly from {first} to {last}; job g belongs to project 1 + g % projects and to
# one of its {users} users; one in three runs on gpu (1 to 8 GPUs), the others on work.
JOBS_SQL = """
INSERT INTO accounting_job (
  cluster_id, job_id_raw, run, job_id, job_name, array_job_id, array_task_id, het_job_id,
  project_id, username, partition_id, partition_version_id, qos, state, state_raw, exit_code,
  submit, start, "end", elapsed_seconds, nnodes, cpus, memory_mb, gpus, nodelist,
  charge_state, service_units, pending_service_units, weight, dominant_resource,
  energy_wh, source_hash, updated_at)
SELECT c.id, (9000000 + g)::text, '', (9000000 + g)::text, 'bench', '', '', '',
  p.id, 'u' || t.pn || '_' || ((g / {projects}) % {users}), pv.partition_id, pv.id, 'normal',
  CASE WHEN g % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
  CASE WHEN g % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END, '0:0',
  t.e - t.s * interval '1 second', t.e - t.s * interval '1 second', t.e, t.s, 1,
  CASE WHEN t.gpu THEN 8 * (1 + g % 8) ELSE 4 * (1 + g % 8) END,
  7656 * (1 + g % 8), CASE WHEN t.gpu THEN 1 + g % 8 ELSE 0 END, 'nid1001', 'charged',
  round(t.s / 3600.0 * (CASE WHEN t.gpu THEN 64 ELSE 4 END) * (1 + g % 8), 6), 0,
  pv.derived_weight, CASE WHEN t.gpu THEN 'gpus' ELSE 'cores' END,
  t.s / 3600.0 * 17.5 * (1 + g % 8), '', now()
FROM generate_series(1::bigint, {jobs}) g
CROSS JOIN LATERAL (
  SELECT timestamptz '{first}' + (g - 1) * (interval '1 second' * {span_seconds} / {jobs}) AS e,
         600 + ((g * 7919) % 36000)::int AS s, 1 + g % {projects} AS pn, g % 3 = 0 AS gpu
) t
JOIN allocations_project p ON p.code = 'bench' || lpad(t.pn::text, 4, '0')
JOIN accounting_cluster c ON c.name = 'slurm-testbed'
JOIN accounting_partition part ON part.cluster_id = c.id
  AND part.name = CASE WHEN t.gpu THEN 'gpu' ELSE 'work' END
JOIN accounting_partitionversion pv ON pv.partition_id = part.id AND pv.number = 1;
"""

# One row per partition and hour, busy between 35 % and 95 % of the partition's capacity:
# what the import keeps whatever the number of jobs (docs/utilisation.md).
HOURLY_SQL = """
INSERT INTO accounting_utilisationhourly (partition_id, hour_start, core_seconds, gpu_seconds)
SELECT v.partition_id, h,
  (v.node_count * v.sockets * v.cores_per_socket * 3600
    * (0.35 + 0.6 * ((extract(hour FROM h) * 7 + extract(doy FROM h) * 13)::int % 100) / 100.0)
  )::bigint,
  (v.node_count * v.gpus * 3600
    * (0.35 + 0.6 * ((extract(hour FROM h) * 11 + extract(doy FROM h) * 5)::int % 100) / 100.0)
  )::bigint
FROM accounting_partitionversion v
JOIN accounting_partition p ON p.id = v.partition_id
JOIN accounting_cluster c ON c.id = p.cluster_id AND c.name = 'slurm-testbed'
CROSS JOIN generate_series(timestamptz '{first}', timestamptz '{last}', interval '1 hour') AS h
WHERE v.number = 1;
-- The stamps the import keeps of each UTC month of the hourly rows (the Q(T) cache's keys).
INSERT INTO accounting_utilisationmonth (partition_id, month, core_seconds, gpu_seconds, changes)
SELECT partition_id, date_trunc('month', hour_start AT TIME ZONE 'UTC')::date,
  sum(core_seconds), sum(gpu_seconds), 1
FROM accounting_utilisationhourly GROUP BY 1, 2;
ANALYZE;
"""

# The import runs a centre that imports every {minutes} minutes has left since {first}: one a
# run, finished, of a few hundred lines (the ledger's jobs are filled above; these only make
# the runs' table as long as the years make it).
RUNS_SQL = """
INSERT INTO accounting_importrun (
  source, status, started_at, finished_at, task_id, header, lines, steps_skipped, imported,
  updated, charged, pending, quarantined, error, cluster_id, blank, checksum, other_clusters,
  attempts, task_options, task_unsent, interruptions)
SELECT 'scheduled sacct', 'succeeded', t, t + interval '20 seconds', '', '', 300, 0, 280, 10,
  280, 10, 0, '', c.id, 0, '', 0, 1, '{{}}', false, ''
FROM accounting_cluster c
CROSS JOIN generate_series(timestamptz '{first}', now() - interval '1 hour',
  interval '{minutes} minutes') AS t
WHERE c.name = 'slurm-testbed';
"""

SETUP = """
from datetime import date
from decimal import Decimal
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from accounting.models import Cluster, Job, Partition
from allocations.grants.services import allocation_grant
from people.tokens import token_create
from projects.models import Membership, PoolPartition, Project, ResourcePool
staff = User.objects.create(username="bench-staff", is_staff=True)
cluster = Cluster.objects.get(name="slurm-testbed")
pools = []
for name, partition, suffix, carry in (("bench CPU", "work", "", True),
                                       ("bench GPU", "gpu", "-gpu", False)):
    pool = ResourcePool.objects.create(name=name, cluster=cluster, slurm_account_suffix=suffix,
                                       carry_over=carry)
    PoolPartition.objects.create(pool=pool, partition=Partition.objects.get(
        cluster=cluster, name=partition))
    pools.append(pool)
for project in Project.objects.filter(code__startswith="bench"):
    for pool in pools:
        allocation_grant(project=project, pool=pool, amount=Decimal(1_000_000),
                         period_start=date({year}, 1, 1), period_end=date({year} + 1, 1, 1),
                         actor=staff)
researcher = User.objects.create(username="bench-researcher")
Membership.objects.create(project=Project.objects.get(code="{project}"), user=researcher)
for person in (researcher, staff):
    token = token_create(user=person, name="bench", scope="read", expires_in_days=1)
    session = SessionStore()
    session[SESSION_KEY] = str(person.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = person.get_session_auth_hash()
    session.create()
    print("CREDENTIALS", person.username, token.plaintext, session.session_key)
job = Job.objects.filter(project__code="{project}").order_by("-end").values_list("pk", flat=True)[0]
print("JOB", job)
"""

# Per view: queries, median server time warm, size raw and gzipped; then an import and the
# first view of each after it.
VIEWS = """
import gzip, json, re, statistics, time
from pathlib import Path
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster
views = json.loads('''{views}''')
repeat = {repeat}
def client_for(credential):
    if credential.startswith("sessionid="):
        client = Client(HTTP_HOST="127.0.0.1")
        client.cookies["sessionid"] = credential.split("=", 1)[1]
        return client, {}
    return Client(HTTP_HOST="127.0.0.1"), {"HTTP_AUTHORIZATION": "Token " + credential}
def timed(name):
    client, headers = client_for(views[name]["credential"])
    started = time.perf_counter()
    # Accepting gzip, as the load's client does: a large data answer's gzip is part of its cost.
    response = client.get(views[name]["path"], HTTP_ACCEPT_ENCODING="gzip", **headers)
    took = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, (name, response.status_code, response.content[:300])
    return took, client, headers
figures = {}
for name, view in views.items():
    timed(name)  # warm: caches filled, connections open
    client, headers = client_for(view["credential"])
    with CaptureQueriesContext(connection) as queries:
        response = client.get(view["path"], **headers)
    count = len(queries)  # now: the next request empties the connection's query log
    raw = len(response.content)
    wire = len(client.get(view["path"], HTTP_ACCEPT_ENCODING="gzip", **headers).content)
    took = statistics.median(timed(name)[0] for _ in range(repeat))
    figures[name] = {"queries": count, "server_ms": took, "bytes": raw, "wire": wire}
lines = Path("examples/sacct/sacct_allocations.psv").read_text().splitlines()
header = lines[0].split("|")
account, partition = header.index("Account"), header.index("Partition")
def booked(number):
    # The sample file's jobs booked to {project}, under job ids of their own for each round:
    # every import brings new jobs that ended this month, as a centre's scheduled import does.
    offset = (number + 1) * 10**7
    shifted = [lines[0]]
    for line in lines[1:]:
        cells = line.split("|")
        cells[account] = "{project}" + ("-gpu" if cells[partition] == "gpu" else "")
        for at in (0, 1):  # JobID, JobIDRaw
            cells[at] = re.sub(
                r"^[0-9]+", lambda found: str(int(found.group()) + offset), cells[at]
            )
        shifted.append("|".join(cells))
    return shifted
after = {name: [] for name in views}
for number in range(repeat):  # the median of as many imports as warm samples
    jobs_import(cluster=Cluster.objects.get(name="slurm-testbed"), lines=booked(number),
                source=f"bench {number}")
    for name in views:
        after[name].append(timed(name)[0])
for name in views:
    figures[name]["after_import_ms"] = statistics.median(after[name])
print("VIEWS " + json.dumps(figures))
"""


@dataclass
class Load:
    requests: int
    seconds: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    errors: int
    client_cpu_s: float = 0.0  # CPU time the load's own threads took

    @property
    def client_share(self) -> float:
        """How much of one core the client took, on average over the load."""
        return self.client_cpu_s / self.seconds if self.seconds else 0.0

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def _headers(credential: str) -> dict[str, str]:
    headers = {"Accept-Encoding": "gzip"}
    if credential.startswith("sessionid="):
        headers["Cookie"] = credential
    elif credential:
        headers["Authorization"] = f"Token {credential}"
    return headers


def load(url: str, credential: str, *, seconds: float, connections: int) -> Load:
    """``connections`` threads, each one request at a time on its own keep-alive-free
    connection, for ``seconds``; latencies of the 2xx answers, everything else an error."""
    hostport, _, path = url.split("//", 1)[1].partition("/")
    host, port = hostport.split(":")
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    headers = _headers(credential)

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                if len(latencies) + errors[0] >= MAX_REQUESTS:
                    return
            started = time.perf_counter()
            try:
                connection = http.client.HTTPConnection(host, int(port), timeout=30)
                connection.request("GET", "/" + path, headers=headers)
                response = connection.getresponse()
                response.read()
                connection.close()
                ok = response.status < 300
            except OSError:
                ok = False
            with lock:
                if ok:
                    latencies.append((time.perf_counter() - started) * 1000)
                else:
                    errors[0] += 1

    began, cpu = time.monotonic(), time.process_time()  # this process: the client alone
    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed, client_cpu = time.monotonic() - began, time.process_time() - cpu
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return Load(
        requests=len(latencies), seconds=elapsed, p50_ms=cuts[49], p95_ms=cuts[94],
        p99_ms=cuts[98], errors=errors[0], client_cpu_s=client_cpu,
    )  # fmt: skip


def _loaded(
    args: argparse.Namespace,
    views: dict[str, dict],
    base: str,
    workers: int,
    connections: int,
    loads: dict[str, dict[str, dict[str, float]]],
) -> bool:
    """Load every view at one level, ``/healthz/`` first; its figures into ``loads`` (keyed
    ``"<connections>"`` with the issue's 2 workers, ``"<connections>@<workers>w"`` with
    others). True when an answer was an error."""
    print(f"load: gunicorn {workers} workers, {connections} connections, {args.seconds:g} s "
          "per endpoint, python threads", flush=True)  # fmt: skip
    level = str(connections) if workers == 2 else f"{connections}@{workers}w"
    failed = False
    for name, view in {"/healthz/": {"path": "/healthz/", "credential": ""}, **views}.items():
        url = base + view["path"]
        load(url, view["credential"], seconds=1, connections=connections)  # warm
        result = load(url, view["credential"], seconds=args.seconds, connections=connections)
        loads.setdefault(name, {})[level] = {
            "p50_ms": result.p50_ms, "p95_ms": result.p95_ms, "p99_ms": result.p99_ms,
            "per_second": result.per_second, "requests": result.requests,
            "errors": result.errors, "client_core_share": result.client_share,
        }  # fmt: skip
        failed = failed or result.errors > 0
        print(
            f"  {name:<26} p50 {result.p50_ms:7.1f}  p95 {result.p95_ms:7.1f}  "
            f"p99 {result.p99_ms:7.1f} ms  {result.per_second:6.0f} req/s  "
            f"({result.requests:,} requests, {result.errors} errors; client "
            f"{result.client_share:.0%} of a core)",
            flush=True,
        )
    return failed


def months_back(today: date, months: int) -> date:
    """The first day of the month ``months - 1`` months before ``today``'s."""
    index = today.year * 12 + today.month - 1 - (months - 1)
    return date(index // 12, index % 12 + 1, 1)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _views(credentials: dict[str, tuple[str, str]], job: int, year: int) -> dict[str, dict]:
    """The issue's table: name -> path and credential (an API token or a session cookie)."""
    token, session = credentials["bench-researcher"]
    staff_token, staff_session = credentials["bench-staff"]
    window = f"cluster=slurm-testbed&start={year - 1}-11-01&end={year}-11-01"
    return {
        "balance API": {"path": f"/api/v1/projects/{PROJECT}/balance/", "credential": token},
        "dashboard, researcher": {"path": "/", "credential": f"sessionid={session}"},
        "jobs API, first page": {"path": f"/api/v1/jobs/?project={PROJECT}", "credential": token},
        "job detail": {"path": f"/accounting/jobs/{job}/", "credential": f"sessionid={session}"},
        "project page": {
            "path": f"/allocations/projects/{PROJECT}/", "credential": f"sessionid={session}",
        },
        "Q(T) API, a year by day": {
            "path": f"/api/v1/utilisation/?{window}&step=day", "credential": staff_token,
        },
        "Q(T) API, a year by hour": {
            "path": f"/api/v1/utilisation/?{window}&step=hour", "credential": staff_token,
        },
        "dashboard, staff": {"path": "/", "credential": f"sessionid={staff_session}"},
    }  # fmt: skip


def fill(args: argparse.Namespace, env: dict[str, str], first: date, now: datetime) -> None:
    manage = [sys.executable, "manage.py"]
    subprocess.run(
        [*manage, "cluster_apply", "examples/clusters/slurm-testbed.json"], cwd=ROOT, env=env,
        check=True, capture_output=True,
    )  # fmt: skip
    started = time.perf_counter()
    span = int((now - datetime(first.year, first.month, 1, tzinfo=UTC)).total_seconds()) - 86400
    psql(args.database, PROJECTS_SQL.format(projects=args.projects))
    psql(
        args.database,
        JOBS_SQL.format(
            jobs=args.jobs, projects=args.projects, users=args.users,
            first=f"{first.isoformat()} 00:00+00", span_seconds=span,
        ),
    )  # fmt: skip
    psql(args.database, USAGE_DAILY_FROM_JOBS)
    last = now.replace(minute=0, second=0, microsecond=0).isoformat()
    psql(args.database, HOURLY_SQL.format(first=f"{first.isoformat()} 00:00+00", last=last))
    if args.import_minutes:
        psql(
            args.database,
            RUNS_SQL.format(first=f"{first.isoformat()} 00:00+00", minutes=args.import_minutes),
        )
    psql(args.database, "VACUUM ANALYZE;")  # what autovacuum does to a filled table
    print(
        f"filled {args.jobs:,} jobs over {args.months} monthly partitions "
        f"({first:%Y-%m} to {now:%Y-%m}), {args.projects} projects x {args.users} users, "
        f"their roll-ups, an import run every {args.import_minutes} minutes, "
        f"in {time.perf_counter() - started:.0f} s",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument("--months", type=int, default=74, help="monthly ledger partitions")
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--users", type=int, default=5, help="users per project")
    parser.add_argument(
        "--import-minutes", type=int, default=5,
        help="the import runs' history: one run per this many minutes over the months (0: none)",
    )  # fmt: skip
    parser.add_argument("--seconds", type=float, default=5, help="load per endpoint and level")
    parser.add_argument("--connections", default="4,20", help="load levels, comma-separated")
    parser.add_argument(
        "--workers", default="2", help="gunicorn sync workers, comma-separated: a run per number"
    )
    parser.add_argument("--repeat", type=int, default=7, help="server-time samples per view")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--database", default=DB, help="the throwaway database's name")
    parser.add_argument(
        "--keep", action="store_true", help="leave the database (to profile a view on it)"
    )
    args = parser.parse_args()
    levels = [int(level) for level in args.connections.split(",")]
    worker_counts = [int(count) for count in args.workers.split(",")]
    now = datetime.now(UTC)
    first = months_back(now.date(), args.months)
    var_dir = tempfile.mkdtemp(prefix="bench-scale-")
    env = database_create(
        args.database,
        months=(f"{first:%Y-%m}", f"{now:%Y-%m}"),
        PORTAL_VAR_DIR=var_dir,
        DJANGO_DEBUG="0",
    )
    manage = [sys.executable, "manage.py"]
    report: dict[str, object] = {"jobs": args.jobs, "months": args.months, "load_before": uptime()}
    failed = False
    try:
        fill(args, env, first, now)
        done = subprocess.run(
            [*manage, "shell", "-c",
             SETUP.replace("{project}", PROJECT).replace("{year}", str(now.year))],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        credentials = {
            row.split()[1]: (row.split()[2], row.split()[3])
            for row in done.stdout.splitlines()
            if row.startswith("CREDENTIALS")
        }
        job = int(next(row.split()[1] for row in done.stdout.splitlines() if row.startswith("JOB")))
        views = _views(credentials, job, now.year)
        script = (
            VIEWS.replace("{repeat}", str(args.repeat))
            .replace("{project}", PROJECT)
            .replace("{views}", json.dumps(views))
        )
        done = subprocess.run(
            [*manage, "shell", "-c", script], cwd=ROOT, env=env, check=False,
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"the per-view script failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        line = next(row for row in done.stdout.splitlines() if row.startswith("VIEWS "))
        per_view = json.loads(line.removeprefix("VIEWS "))
        report["views"] = per_view
        print("per view (Django's request handler, one process; warm median of "
              f"{args.repeat}; the first view after an import):")  # fmt: skip
        for name, figures in per_view.items():
            ratio = figures["after_import_ms"] / figures["server_ms"]
            print(
                f"  {name:<26} {figures['queries']:>3} queries  {figures['server_ms']:7.1f} ms  "
                f"{figures['bytes']:>9,} B ({figures['wire']:>8,} B gzipped)  after an import "
                f"{figures['after_import_ms']:7.1f} ms ({ratio:.2f} x)",
                flush=True,
            )
        failed = per_view["dashboard, staff"]["queries"] > 20
        failed = failed or per_view["Q(T) API, a year by hour"]["server_ms"] > 100

        loads: dict[str, dict[str, dict[str, float]]] = {}
        for workers in worker_counts:
            with gunicorn_serving(env, workers=workers) as base:
                for connections in levels:
                    failed = _loaded(args, views, base, workers, connections, loads) or failed
        report["loads"] = loads
        report["load_after"] = uptime()
        print(f"machine load before: {report['load_before']}")
        print(f"machine load after:  {report['load_after']}")
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
    finally:
        if not args.keep:
            database_drop(args.database)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

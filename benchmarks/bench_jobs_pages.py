"""The job pages on a ledger of six years (issue 33): planning and execution of each query, and
server time, of the project page's costliest jobs, the HTML jobs page (newest first and by
SU), the jobs API's first and a later page, the job page and the API's job.

A database gets ``--jobs`` ledger rows (default 1,000,000) of 200 projects, their ends spread
over 74 months (2021-01 to 2027-02, each month a partition of its own, as a backfilled
centre's ledger would be), SU of many sizes with ties, and the daily roll-ups; a researcher of
one project and a budget period of 2026. Then each page is fetched with Django's test client
(signed in as the researcher) ``--rounds`` times; the median server time is reported, and
every query of the ledger the last fetch sent is run again twice under ``EXPLAIN (ANALYZE)``
(the second is reported: a long-lived worker's catalogue caches are warm): its planning and
execution milliseconds and the ledger partitions its plan names.

    python benchmarks/bench_jobs_pages.py [--jobs 1000000] [--keep] [--reuse]

``--keep`` leaves the database (``BENCH_JOBS_DB``, default ``portal_wb``) for another run;
``--reuse`` measures a kept database again after migrating it (before/after a change).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.pg import PG, USAGE_DAILY_FROM_JOBS, database_create, database_drop, psql  # noqa: E402

DB = os.environ.get("BENCH_JOBS_DB", "portal_wb")
PROJECT = "bench0042"
MONTHS = ("2021-01", "2027-02")  # 74 monthly partitions

FILL = "".join(
    (
        """
INSERT INTO allocations_project (code, title, status, field_of_science, created_at)
SELECT 'bench' || lpad(g::text, 4, '0'), 'bench project', 'active', '', now()
FROM generate_series(1, 200) g;

INSERT INTO accounting_job (
  cluster_id, job_id_raw, run, job_id, job_name, array_job_id, array_task_id, het_job_id,
  project_id, username, partition_id, partition_version_id, qos, state, state_raw, exit_code,
  submit, start, "end", elapsed_seconds, nnodes, cpus, memory_mb, gpus, nodelist,
  charge_state, service_units, pending_service_units, weight, dominant_resource,
  energy_wh, source_hash, updated_at)
SELECT c.id, (9000000 + g)::text, '', (9000000 + g)::text, 'bench', '', '', '',
  p.id, 'user' || (g % 40), pv.partition_id, pv.id, 'normal', 'COMPLETED', 'COMPLETED', '0:0',
  e - interval '1 hour', e - interval '1 hour', e, 3600, 1, 4, 7656, 0, 'nid1001',
  'charged', ((g::bigint * 7919) % 50000) / 100.0, 0, 128, 'cores', 17.5, '', now()
FROM generate_series(1, {jobs}) g
CROSS JOIN LATERAL (SELECT timestamptz '2021-01-01 00:00+00'
  + (g::float8 / {jobs}) * (timestamptz '2027-02-28 00:00+00' - timestamptz '2021-01-01 00:00+00')
  AS e) t
JOIN allocations_project p ON p.code = 'bench' || lpad((1 + g % 200)::text, 4, '0')
JOIN accounting_cluster c ON c.name = 'slurm-testbed'
JOIN accounting_partitionversion pv ON pv.partition_id = (
  SELECT id FROM accounting_partition WHERE cluster_id = c.id AND name = 'work');
""",
        USAGE_DAILY_FROM_JOBS,
        "\nANALYZE;\n",
    )
)

SETUP = """
from datetime import date
from decimal import Decimal
from django.contrib.auth.models import User
from accounting.models import Cluster, Partition
from projects.models import Membership, PoolPartition, Project, ResourcePool
from allocations.grants.services import allocation_grant
staff = User.objects.create(username="bench-staff", is_staff=True)
cluster = Cluster.objects.get(name="slurm-testbed")
pool = ResourcePool.objects.create(name="bench CPU", cluster=cluster)
work = Partition.objects.get(cluster=cluster, name="work")
PoolPartition.objects.create(pool=pool, partition=work)
project = Project.objects.get(code="{project}")
allocation_grant(project=project, pool=pool, amount=Decimal(1_000_000),
                 period_start=date(2026, 1, 1), period_end=date(2027, 1, 1), actor=staff)
researcher = User.objects.create(username="bench-researcher")
Membership.objects.create(project=project, user=researcher)
"""

MEASURE = """
import re, statistics, time
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from accounting.models import Job
from projects.models import Project
project = Project.objects.get(code="{project}")
client = Client(SERVER_NAME="localhost")
client.force_login(User.objects.get(username="bench-researcher"))
ended = Job.objects.filter(project=project, end__isnull=False).order_by("-end")
job = ended.values_list("pk", flat=True)[300]
first = client.get("/api/v1/jobs/?project={project}").json()
later = first.get("next") or ""
later = later[later.index("/api/"):] if later else "/api/v1/jobs/?project={project}&page=2"
pages = [
    ("project page", "/allocations/projects/{project}/"),
    ("jobs page, first (HTML)", "/accounting/projects/{project}/jobs/"),
    ("jobs page by SU (HTML, counted)", "/accounting/projects/{project}/jobs/?sort=-su"),
    ("jobs API, first page", "/api/v1/jobs/?project={project}"),
    ("jobs API, next page", later),
    ("job page", f"/accounting/jobs/{{job}}/"),
    ("jobs API, one job", f"/api/v1/jobs/{{job}}/"),
]
for name, url in pages:
    times = []
    for _ in range({rounds}):
        cache.clear()
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            answer = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (url, answer.status_code)
    print(f"PAGE {{name}}: server {{statistics.median(times):.1f}} ms median of {rounds} "
          f"(first-after-cache-clear each time), {{len(queries)}} queries")
    for query in queries.captured_queries:
        sql = query["sql"]
        if "accounting_job" not in sql or sql.startswith(("SAVEPOINT", "RELEASE")):
            continue
        with connection.cursor() as cursor:
            for _ in range(2):  # the second: a worker's plan, its catalogue caches warm
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            plan = "\\n".join(row[0] for row in cursor.fetchall())
        planning = float(re.search(r"Planning Time: ([0-9.]+)", plan).group(1))
        execution = float(re.search(r"Execution Time: ([0-9.]+)", plan).group(1))
        touched = sorted(set(re.findall(r"accounting_job_(p\\d{{4}}_\\d{{2}}|open)\\b", plan)))
        print(f"  query planning {{planning:.2f}} ms, execution {{execution:.2f}} ms, "
              f"{{len(touched)}} ledger partitions: {{sql[:110]}}")
"""


# The project page cached, then the first view after each of a few imports: a small sacct
# import (its run moves the ledger's stamp, so the charts are read again) and, as an import
# charging the project would, a job of the project that ended now with its roll-up.
AFTER_IMPORT = """
import statistics, time
from datetime import timedelta
from decimal import Decimal
from django.contrib.auth.models import User
from django.db.models import F
from django.test import Client
from django.utils import timezone
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, Job, UsageDaily
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project
project = Project.objects.get(code="{project}")
cluster = Cluster.objects.get(name="slurm-testbed")
client = Client(SERVER_NAME="localhost")
client.force_login(User.objects.get(username="bench-researcher"))
url = "/allocations/projects/{project}/"
client.get(url)
cached = []
for _ in range({rounds}):
    started = time.perf_counter()
    client.get(url)
    cached.append((time.perf_counter() - started) * 1000)
first = []
template = Job.objects.filter(project=project).order_by("-end").first()
for number in range({rounds}):
    now = timezone.now()
    jobs_import(cluster=cluster, source=f"bench {{number}}", lines=sacct_lines(
        lines=20, seed=number, start=now - timedelta(hours=2), mean_gap_seconds=300, now=now))
    template.pk, template.job_id_raw = None, f"bench-new-{{time.time_ns()}}"
    template.end, template.start = now, now - timedelta(hours=1)
    template.service_units = Decimal(900 + number)
    template.save(force_insert=True)
    UsageDaily.objects.filter(project=project, day=now.date()).update(
        jobs=F("jobs") + 1, service_units=F("service_units") + template.service_units)
    started = time.perf_counter()
    client.get(url)
    first.append((time.perf_counter() - started) * 1000)
print(f"PROJECT PAGE cached view: median {{statistics.median(cached):.1f}} ms; first view "
      f"after an import: median {{statistics.median(first):.1f}} ms ({rounds} imports)")
"""


def manage_shell(env: dict[str, str], code: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="leave the database")
    parser.add_argument("--reuse", action="store_true", help="measure a kept database again")
    args = parser.parse_args()
    if args.reuse:
        env = {**os.environ, "DATABASE_URL": f"{PG}/{DB}"}
        env.pop("CELERY_BROKER_URL", None)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env,
                       check=True)  # fmt: skip
    else:
        env = database_create(DB, months=MONTHS)
        subprocess.run(
            [sys.executable, "manage.py", "cluster_apply", "examples/clusters/slurm-testbed.json"],
            cwd=ROOT, env=env, check=True, capture_output=True,
        )  # fmt: skip
        psql(DB, FILL.format(jobs=args.jobs))
        psql(DB, "VACUUM ANALYZE accounting_job;")
        manage_shell(env, SETUP.format(project=PROJECT))
    try:
        print(manage_shell(env, MEASURE.format(project=PROJECT, rounds=args.rounds)))
        print(manage_shell(env, AFTER_IMPORT.format(project=PROJECT, rounds=args.rounds)))
    finally:
        if not args.keep:
            database_drop(DB)


if __name__ == "__main__":
    main()

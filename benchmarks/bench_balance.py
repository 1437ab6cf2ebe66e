"""Benchmarks of ``balance_get`` and of a one-year hourly Q(T) series with millions of jobs in
PostgreSQL (allocations and utilisation issues).

A throwaway database gets ``--jobs`` ledger rows (default 10,000,000) for 200 projects on the
testbed cluster over a year, their daily roll-ups (as the import keeps them), grants and
budget periods; then ``balance_get`` for one project is timed 100 times (target: median
≤ 20 ms) and a one-year hourly Q(T) series of the cluster (``utilisation_series_get``,
target ≤ 300 ms). Both read what the import keeps (daily roll-ups, hourly utilisation rows),
so their time does not grow with the jobs.

    python benchmarks/bench_balance.py [--jobs 10000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.pg import USAGE_DAILY_FROM_JOBS, database_create, database_drop, psql  # noqa: E402

DB = "portal_bench_balance"
OUT = ROOT / "benchmarks" / "out"
PROJECTS = 200

FILL = "".join(  # the shared roll-up fill in the middle
    (
        """
INSERT INTO allocations_project (code, title, status, field_of_science, created_at)
SELECT 'bench' || lpad(g::text, 4, '0'), 'bench project', 'active', '', now()
FROM generate_series(1, {projects}) g;

INSERT INTO accounting_job (
  cluster_id, job_id_raw, run, job_id, job_name, array_job_id, array_task_id, het_job_id,
  project_id, username, partition_id, partition_version_id, qos, state, state_raw, exit_code,
  submit, start, "end", elapsed_seconds, nnodes, cpus, memory_mb, gpus, nodelist,
  charge_state, service_units, pending_service_units, weight, dominant_resource,
  energy_wh, source_hash, updated_at)
SELECT c.id, (9000000 + g)::text, '', (9000000 + g)::text, 'bench', '', '', '',
  p.id, 'user' || (g % 40), pv.partition_id, pv.id, 'normal', 'COMPLETED', 'COMPLETED', '0:0',
  e - interval '1 hour', e - interval '1 hour', e, 3600, 1, 4, 7656, 0, 'nid1001',
  'charged', 4, 0, 128, 'cores', 17.5, '', now()
FROM generate_series(1, {jobs}) g
CROSS JOIN LATERAL (SELECT timestamptz '2026-01-01' + (g % 525600) * interval '1 minute' AS e) t
JOIN allocations_project p ON p.code = 'bench' || lpad((1 + g % {projects})::text, 4, '0')
JOIN accounting_cluster c ON c.name = 'slurm-testbed'
JOIN accounting_partitionversion pv ON pv.partition_id = (
  SELECT id FROM accounting_partition WHERE cluster_id = c.id AND name = 'work');

""",
        USAGE_DAILY_FROM_JOBS,
        """

INSERT INTO accounting_utilisationhourly (partition_id, hour_start, core_seconds, gpu_seconds)
SELECT j.partition_id, h,
  sum(j.cpus * extract(
    epoch FROM least(j."end", h + interval '1 hour') - greatest(j.start, h)))::bigint,
  0
FROM accounting_job j
CROSS JOIN LATERAL generate_series(
  date_trunc('hour', j.start), j."end" - interval '1 second', interval '1 hour') AS h
GROUP BY 1, 2;
ANALYZE;
""",
    )
)

TIMING = """
import statistics, time
from datetime import date
from decimal import Decimal
from django.contrib.auth.models import User
from accounting.models import Cluster, Partition
from projects.models import PoolPartition, Project, ResourcePool
from allocations.grants.selectors import balance_get
from allocations.grants.services import allocation_grant
staff = User.objects.create(username="bench-staff", is_staff=True)
cluster = Cluster.objects.get(name="slurm-testbed")
pool = ResourcePool.objects.create(name="bench CPU", cluster=cluster)
work = Partition.objects.get(cluster=cluster, name="work")
PoolPartition.objects.create(pool=pool, partition=work)
for project in Project.objects.filter(code__startswith="bench"):
    allocation_grant(project=project, pool=pool, amount=Decimal(1_000_000),
                     period_start=date(2026, 1, 1), period_end=date(2027, 1, 1), actor=staff)
project = Project.objects.get(code="bench0042")
timings = []
for _ in range(100):
    started = time.perf_counter()
    balance = balance_get(project=project, pool=pool, on=date.fromisoformat("{on}"))
    timings.append((time.perf_counter() - started) * 1000)
print(f"RESULT {statistics.median(timings):.2f} {max(timings):.2f} {balance.used_su}")
from datetime import datetime, timezone as tz
from accounting.utilisation.selectors import utilisation_series_get
timings = []
for _ in range(5):
    started = time.perf_counter()
    series = utilisation_series_get(cluster=cluster, start=datetime(2026, 1, 1, tzinfo=tz.utc),
                                    end=datetime(2027, 1, 1, tzinfo=tz.utc), step="hour")
    timings.append((time.perf_counter() - started) * 1000)
busy = max(window.total.q_percent or 0 for window in series)
print(f"SERIES {statistics.median(timings):.0f} {len(series)} {busy}")
"""

# Which of the ledger's monthly partitions the queries of what users run touch: each query an
# operation sends is EXPLAINed, and the partitions its plan names are listed.
PLANS = r"""
import json, re
from datetime import datetime, timezone as tz
from django.db import connection
from django.test.utils import CaptureQueriesContext
from accounting.ledger_storage import TABLE
from accounting.ledger.selectors import JobFilters, jobs_of_project
from accounting.models import Cluster, Job
from accounting.utilisation.selectors import utilisation_series_get
from projects.models import Project, ResourcePool
from allocations.grants.selectors import balance_get
project = Project.objects.get(code="bench0042")
cluster = Cluster.objects.get(name="slurm-testbed")
pool = ResourcePool.objects.get(name="bench CPU")
march = JobFilters(ended_from=datetime(2026, 3, 1, tzinfo=tz.utc),
                   ended_before=datetime(2026, 4, 1, tzinfo=tz.utc))
job = Job.objects.filter(project=project).values_list("pk", flat=True).first()
operations = {
    "balance (balance_get)": lambda: balance_get(project=project, pool=pool),
    "job list, March 2026, first page": lambda: list(
        jobs_of_project(project=project, filters=march)[:50]),
    "job list, newest first, first page": lambda: list(jobs_of_project(project=project)[:50]),
    "one job (its page)": lambda: Job.objects.get(pk=job),
    "Q(T), a year by the hour": lambda: utilisation_series_get(
        cluster=cluster, start=datetime(2026, 1, 1, tzinfo=tz.utc),
        end=datetime(2027, 1, 1, tzinfo=tz.utc), step="hour"),
}
report = {}
for name, operation in operations.items():
    with CaptureQueriesContext(connection) as queries:
        operation()
    plans = []
    for query in queries.captured_queries:
        if not query["sql"].lstrip().upper().startswith("SELECT"):
            continue
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (COSTS OFF) " + query["sql"])
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    touched = sorted(set(re.findall(TABLE + "_(?:p[0-9]{4}_[0-9]{2}|open)", "\n".join(plans))))
    report[name] = {"queries": len(plans), "partitions": touched, "plans": plans}
print("PLANS " + json.dumps(report))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="balance_get benchmark")
    parser.add_argument("--jobs", type=int, default=10_000_000)
    args = parser.parse_args()
    env = database_create(DB, months=("2026-01", "2027-01"))
    manage = [sys.executable, "manage.py"]
    try:
        subprocess.run(
            [*manage, "cluster_apply", "examples/clusters/slurm-testbed.json"], cwd=ROOT, env=env,
            check=True, capture_output=True,
        )  # fmt: skip
        started = time.perf_counter()
        psql(DB, FILL.format(jobs=args.jobs, projects=PROJECTS))
        print(
            f"filled {args.jobs:,} jobs and their roll-ups in {time.perf_counter() - started:.0f} s"
        )
        # A day in the middle of the jobs' span (a job ends every minute of the year).
        middle = date(2026, 1, 1) + timedelta(minutes=min(args.jobs, 525_600) // 2)
        timing = TIMING.replace("{on}", middle.isoformat())
        done = subprocess.run(
            [*manage, "shell", "-c", timing], cwd=ROOT, env=env, check=True, capture_output=True,
            text=True,
        )  # fmt: skip
        line = next(row for row in done.stdout.splitlines() if row.startswith("RESULT"))
        _, median, worst, used = line.split()
        print(
            f"balance_get with {args.jobs:,} jobs: median {median} ms, max {worst} ms over 100 "
            f"calls (target median <= 20 ms); used {used} SU"
        )
        series = next(row for row in done.stdout.splitlines() if row.startswith("SERIES"))
        _, took, buckets, busiest = series.split()
        print(
            f"one-year hourly Q(T) series with {args.jobs:,} jobs: {took} ms for {buckets} "
            f"buckets, median of 5 (target <= 300 ms); busiest hour Q = {busiest} %"
        )
        done = subprocess.run(
            [*manage, "shell", "-c", PLANS], cwd=ROOT, env=env, check=True, capture_output=True,
            text=True,
        )  # fmt: skip
        line = next(row for row in done.stdout.splitlines() if row.startswith("PLANS "))
        report = json.loads(line.removeprefix("PLANS "))
        OUT.mkdir(exist_ok=True)
        with (OUT / "ledger_plans.txt").open("w") as out:
            for name, found in report.items():
                touched = found["partitions"]
                print(
                    f"{name}: {found['queries']} queries; ledger partitions touched: "
                    f"{', '.join(touched) if touched else 'none'}"
                )
                out.write(f"== {name}\n\n" + "\n\n".join(found["plans"]) + "\n\n")
        print(f"plans written to {OUT / 'ledger_plans.txt'}")
    finally:
        database_drop(DB)


if __name__ == "__main__":
    main()

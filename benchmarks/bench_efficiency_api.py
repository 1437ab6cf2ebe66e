"""Benchmark: the efficiency API for a project with a million jobs (issue: job efficiency).

A throwaway database gets ``--jobs`` ledger rows (default 1,000,000) of ONE project over a year,
each with what it used (CPU time, memory peak, the right-sized SU), and the roll-ups the import
keeps for them (UsageDaily, EfficiencyDaily, EfficiencyMonthly, EfficiencyBucket), made in SQL
as bench_balance.py makes its fill. A member of the project holds an API token; gunicorn serves
the portal with 2 workers on 127.0.0.1, and bench_api.py's load generator asks, for
``--seconds``:

- ``GET /api/v1/efficiency/?project=bench0001`` (the whole year): target p95 <= 50 ms;
- ``GET /api/v1/efficiency/?project=bench0001&start=...&end=...`` (one month);
- ``GET /healthz/`` as the baseline in the same run.

Zero errors are required. The database is dropped at the end.

    python benchmarks/bench_efficiency_api.py [--jobs 1000000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.bench_api import (  # noqa: E402 (the API benchmark's harness)
    Load,
    _check,
    _python_load,
    _wrk,
    gunicorn_serving,
)
from benchmarks.pg import USAGE_DAILY_FROM_JOBS, database_create, database_drop, psql  # noqa: E402

DB = "portal_bench_efficiency_api"
SUMS = (
    "jobs", "service_units", "right_sized_service_units", "core_hours_held", "core_hours_used",
    "memory_jobs", "memory_mb_hours_held", "memory_mb_hours_used", "gpu_jobs", "gpu_hours_held",
    "gpu_hours_used", "walltime_jobs", "hours_run", "hours_asked",
)  # fmt: skip
PROJECT = "bench0001"
TARGET_P95_MS = 50.0

# 4-core, one-hour jobs on the work partition, 40 users; job g burns (g % 100) % of its cores
# and peaks at (g % 97) / 97 of its memory; right-sized: whole cores for that (memory is below
# the cores' share), at 1 SU per core-hour as on the testbed's work partition.
FILL = "".join(  # the shared roll-up fill in the middle
    (
        """
INSERT INTO allocations_project (code, title, status, field_of_science, created_at)
VALUES ('{project}', 'bench project', 'active', '', now());

INSERT INTO accounting_job (
  cluster_id, job_id_raw, run, job_id, job_name, array_job_id, array_task_id, het_job_id,
  project_id, username, partition_id, partition_version_id, qos, state, state_raw, exit_code,
  submit, start, "end", elapsed_seconds, timelimit_minutes, nnodes, cpus, memory_mb, gpus,
  nodelist, charge_state, service_units, pending_service_units, weight, dominant_resource,
  energy_wh, source_hash, updated_at, cpu_seconds_used, memory_peak_mb,
  right_sized_service_units)
SELECT c.id, (9000000 + g)::text, '', (9000000 + g)::text, 'bench', '', '', '',
  p.id, 'user' || (g % 40), pv.partition_id, pv.id, 'normal', 'COMPLETED', 'COMPLETED', '0:0',
  e - interval '1 hour', e - interval '1 hour', e, 3600, 120, 1, 4, 7656, 0, 'nid1001',
  'charged', 4, 0, 128, 'cores', 17.5, '', now(),
  4 * 3600 * (g % 100) / 100.0, 7656 * (g % 97) / 97.0, greatest(ceil(4 * (g % 100) / 100.0), 1)
FROM generate_series(1, {jobs}) g
CROSS JOIN LATERAL (SELECT timestamptz '2026-01-01' + (g % 525600) * interval '1 minute' AS e) t
JOIN allocations_project p ON p.code = '{project}'
JOIN accounting_cluster c ON c.name = 'slurm-testbed'
JOIN accounting_partitionversion pv ON pv.partition_id = (
  SELECT id FROM accounting_partition WHERE cluster_id = c.id AND name = 'work');

""",
        USAGE_DAILY_FROM_JOBS,
        """

INSERT INTO accounting_efficiencydaily (project_id, partition_id, username, day, jobs,
  service_units, right_sized_service_units, core_hours_held, core_hours_used, memory_jobs,
  memory_mb_hours_held, memory_mb_hours_used, gpu_jobs, gpu_hours_held, gpu_hours_used,
  walltime_jobs, hours_run, hours_asked)
SELECT project_id, partition_id, username, ("end" AT TIME ZONE 'UTC')::date, count(*),
  sum(service_units), sum(right_sized_service_units), sum(cpus), sum(cpu_seconds_used / 3600.0),
  count(*), sum(memory_mb), sum(memory_peak_mb), 0, 0, 0, count(*), count(*), 2 * count(*)
FROM accounting_job GROUP BY 1, 2, 3, 4;

INSERT INTO accounting_efficiencymonthly (project_id, partition_id, username, month,
  all_jobs, charged_service_units, {sums})
SELECT project_id, partition_id, username, u.month, u.jobs, u.service_units,
  {coalesced}
FROM (SELECT project_id, partition_id, username, date_trunc('month', day)::date AS month,
        sum(jobs) AS jobs, sum(service_units) AS service_units
      FROM accounting_usagedaily GROUP BY 1, 2, 3, 4) u
LEFT JOIN (SELECT project_id, partition_id, username, date_trunc('month', day)::date AS month,
             {summed}
           FROM accounting_efficiencydaily GROUP BY 1, 2, 3, 4) e
  USING (project_id, partition_id, username, month);

INSERT INTO accounting_efficiencybucket (project_id, partition_id, username, month, metric,
  bucket, jobs)
SELECT project_id, partition_id, username, date_trunc('month', "end" AT TIME ZONE 'UTC')::date,
  m.metric, least(floor(m.ratio * 10), 9), count(*)
FROM accounting_job
CROSS JOIN LATERAL (VALUES
  ('cpu', cpu_seconds_used / (cpus * elapsed_seconds)),
  ('memory', memory_peak_mb / memory_mb),
  ('walltime', elapsed_seconds / (timelimit_minutes * 60.0))) AS m(metric, ratio)
GROUP BY 1, 2, 3, 4, 5, 6;
ANALYZE;
""",
    )
)

# EfficiencyMonthly from the daily rows, as the import keeps it (the names of its sums).
MONTHLY_SQL = {
    "sums": ", ".join(SUMS),
    "coalesced": ", ".join(f"coalesce(e.{name}, 0)" for name in SUMS),
    "summed": ", ".join(f"sum({name}) AS {name}" for name in SUMS),
}

SETUP = """
from django.contrib.auth.models import User
from people.tokens import token_create
from projects.models import Membership, Project
researcher = User.objects.create(username="bench-researcher")
Membership.objects.create(project=Project.objects.get(code="{project}"), user=researcher)
issued = token_create(user=researcher, name="bench", scope="read", expires_in_days=1)
print("TOKEN", issued.plaintext)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    load = _wrk if shutil.which("wrk") else _python_load
    env = database_create(
        DB, months=("2026-01", "2027-01"), PORTAL_VAR_DIR=tempfile.mkdtemp(prefix="bench-eff-")
    )
    manage = [sys.executable, "manage.py"]
    stack = ExitStack()
    failed = False
    try:
        subprocess.run(
            [*manage, "cluster_apply", "examples/clusters/slurm-testbed.json"], cwd=ROOT, env=env,
            check=True, capture_output=True,
        )  # fmt: skip
        started = time.perf_counter()
        psql(DB, FILL.format(jobs=args.jobs, project=PROJECT, **MONTHLY_SQL))
        psql(DB, "VACUUM ANALYZE;")
        print(
            f"filled {args.jobs:,} jobs and their roll-ups in {time.perf_counter() - started:.0f} s"
        )
        done = subprocess.run(
            [*manage, "shell", "-c", SETUP.replace("{project}", PROJECT)], cwd=ROOT, env=env,
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        token = next(row.split()[1] for row in done.stdout.splitlines() if row.startswith("TOKEN"))
        base = stack.enter_context(gunicorn_serving(env))
        year = f"{base}/api/v1/efficiency/?project={PROJECT}"
        month = f"{year}&start=2026-06-01&end=2026-07-01"
        _check(year, token, b"right_sized_service_units")
        _check(month, token, b"right_sized_service_units")

        def measure(url: str) -> Load:
            load(url, token, seconds=2, connections=args.connections)  # warm up
            return load(url, token, seconds=args.seconds, connections=args.connections)

        baseline = measure(f"{base}/healthz/")
        print(f"GET /healthz/ (baseline): {baseline.line()}")
        for label, url in (("a year", year), ("one month", month)):
            result = measure(url)
            met = result.p95_ms <= TARGET_P95_MS and result.errors + result.bad_status == 0
            failed = failed or not met
            print(
                f"GET /api/v1/efficiency/?project={PROJECT} ({label}, {args.jobs:,} jobs): "
                f"{result.line()} (target p95 <= {TARGET_P95_MS:.0f} ms, zero errors): "
                f"{'met' if met else 'MISSED'}"
            )
    finally:
        stack.close()
        database_drop(DB)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

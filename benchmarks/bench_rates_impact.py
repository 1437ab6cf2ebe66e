"""Benchmark of a rate draft's impact (issue 29, item 3: a rate change seen before it ships):
a year of ``--jobs`` charged jobs (default 1,000,000) of ``--projects`` projects (default 100)
on the testbed's two partitions, re-priced under a draft that changes both partitions (a
staff weight on work, a new GPU TDP on gpu), from the per-shape sums.

A throwaway database gets the jobs in SQL (bench_record.py's 1,568 shapes: CPU jobs of 1 to 3
nodes, any core count and four memory sizes; GPU jobs of 1 to 8 GPUs), spread over the projects
so that each project holds most shapes (the worst case of the grouped read); migration 0021's
own backfill builds the shape roll-ups the import keeps. Timed ``--runs`` times after one
warm-up, the window being the twelve months up to a mid-month day (so the daily roll-ups are
read at both ends):

- ``cluster_rates_impact``: the re-pricing itself, every project's SU per pool under the
  draft (target: median <= 2 s, issue 29);
- ``rates_impact_get``: the same with each project's current budget period on the CPU and GPU
  pools and how much earlier it runs out (what the command, the page and the API show).

    python benchmarks/bench_rates_impact.py [--jobs 1000000] [--projects 100] [--runs 5] [--keep]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.pg import (  # noqa: E402
    PROJECT_USAGE_FROM_USAGE,
    SHAPED_JOBS,
    database_create,
    database_drop,
    psql,
)

DB = "portal_bench_rates_impact"
TARGET_S = 2.0

# The jobs of 2026 (``SHAPED_JOBS``), the project of each job by its number.
FILL = (
    """
INSERT INTO allocations_project (code, title, status, field_of_science, created_at)
SELECT 'bench' || lpad(i::text, 4, '0'), 'bench project', 'active', '', now()
FROM generate_series(0, {projects} - 1) i;

"""
    + SHAPED_JOBS.replace(
        "{project_code}", "'bench' || lpad(((g * 37) % {projects})::text, 4, '0')"
    )
    + """

INSERT INTO accounting_usagedaily (project_id, partition_id, username, day, service_units,
  core_hours, gpu_hours, energy_wh, cost, jobs, energy_measured_wh,
  energy_measured_estimate_wh, energy_measured_jobs)
SELECT project_id, partition_id, username, ("end" AT TIME ZONE 'UTC')::date,
  sum(service_units), sum(cpus * elapsed_seconds / 3600.0), sum(gpus * elapsed_seconds / 3600.0),
  0, 0, count(*), 0, 0, 0
FROM accounting_job GROUP BY 1, 2, 3, 4;
"""
    + PROJECT_USAGE_FROM_USAGE
    + """
ANALYZE accounting_usagedaily;
"""
)

TIMING = """
import json, statistics, time
from datetime import date
from decimal import Decimal
from django.apps import apps
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from accounting.ledger.rate_drafts import rate_draft_check
from accounting.ledger.rates_impact import cluster_rates_impact
from accounting.models import Cluster, Partition, UsageShapeDaily, UsageShapeMonthly
from allocations.grants.rates_impact import rates_impact_get
from allocations.grants.services import allocation_grant
from projects.models import PoolPartition, Project, ResourcePool
backfill = __import__("importlib").import_module("accounting.migrations.0021_usage_shape_monthly")
started = time.perf_counter()
backfill.shapes_backfill(apps, connection.schema_editor())
filled = time.perf_counter() - started
with connection.cursor() as cursor:
    cursor.execute("ANALYZE accounting_usageshapedaily; ANALYZE accounting_usageshapemonthly")
cluster = Cluster.objects.get(name="slurm-testbed")
staff = User.objects.create(username="ops", is_staff=True)
for name, partition in (("CPU", "work"), ("GPU", "gpu")):
    pool = ResourcePool.objects.create(cluster=cluster, name=name, slurm_account_suffix=(
        "" if name == "CPU" else "-gpu"))
    PoolPartition.objects.create(pool=pool, partition=Partition.objects.get(
        cluster=cluster, name=partition))
    for project in Project.objects.all():
        allocation_grant(project=project, pool=pool, amount=Decimal(2_400_000),
            period_start=date(2026, 1, 1), period_end=date(2027, 1, 1), actor=staff)
spec = json.loads(open("examples/clusters/slurm-testbed.json").read())
spec["partitions"][0].update(weight_override=192, weight_override_reason="new CPUs")
spec["partitions"][1].update(gpu_tdp_watts=400)
rates = rate_draft_check(cluster=cluster, spec=spec)
today = date(2026, 12, 17)  # twelve months up to a mid-month day: daily rows at both ends

def timed(run):
    run()  # warm-up
    times = []
    for _ in range({runs}):
        began = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - began)
    with CaptureQueriesContext(connection) as queries:
        run()
    return result, times, len(queries)

usage, usage_times, usage_queries = timed(
    lambda: cluster_rates_impact(rates=rates, months=12, today=today))
whole, whole_times, whole_queries = timed(
    lambda: rates_impact_get(rates=rates, months=12, on=today))
jobs = sum(row.jobs for row in usage.rows)
charged = sum((row.charged_su for row in usage.rows), Decimal(0))
draft = sum((row.draft_su for row in usage.rows), Decimal(0))
print(f"RESULT {statistics.median(usage_times):.3f} {max(usage_times):.3f} {usage_queries} "
      f"{statistics.median(whole_times):.3f} {max(whole_times):.3f} {whole_queries} "
      f"{jobs} {len(usage.rows)} {charged} {draft} {len(whole.earlier)} {filled:.1f} "
      f"{UsageShapeDaily.objects.count()} {UsageShapeMonthly.objects.count()}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="rates_impact benchmark")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help=f"keep the database {DB} after")
    args = parser.parse_args()
    env = database_create(DB, months=("2026-01", "2027-01"))
    manage = [sys.executable, "manage.py"]
    try:
        subprocess.run(
            [*manage, "cluster_apply", "examples/clusters/slurm-testbed.json"], cwd=ROOT, env=env,
            check=True, capture_output=True,
        )  # fmt: skip
        started = time.perf_counter()
        psql(DB, FILL.format(jobs=args.jobs, projects=args.projects))
        print(f"filled {args.jobs:,} jobs of {args.projects} projects in "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        done = subprocess.run(
            [*manage, "shell", "-c", TIMING.replace("{runs}", str(args.runs))], cwd=ROOT,
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode:
            sys.exit(f"the timing run failed:\n{done.stderr[-3000:]}")
        line = next(row for row in done.stdout.splitlines() if row.startswith("RESULT"))
        (
            median, worst, queries, whole, whole_worst, whole_queries, jobs, rows, charged,
            draft, earlier, filled, days, months,
        ) = line.split()[1:]  # fmt: skip
        print(
            f"shape roll-ups (migration 0021's backfill): {filled} s, {days} daily rows, "
            f"{months} monthly rows"
        )
        print(
            f"cluster_rates_impact, twelve months up to 2026-12-17, {int(jobs):,} jobs in "
            f"{rows} project-pool rows: median {median} s, max {worst} s over {args.runs} runs "
            f"(target median <= {TARGET_S} s), {queries} queries; {charged} SU charged, "
            f"{draft} SU under the draft"
        )
        print(
            f"rates_impact_get (with each project's budget periods): median {whole} s, max "
            f"{whole_worst} s, {whole_queries} queries; {earlier} periods would run out earlier"
        )
        if float(median) > TARGET_S:
            sys.exit(f"missed the target: median {median} s > {TARGET_S} s")
    finally:
        if not args.keep:
            database_drop(DB)


if __name__ == "__main__":
    main()

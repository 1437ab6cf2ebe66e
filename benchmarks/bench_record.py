"""Benchmark of re-pricing a project's year at a round's rates (issue 28, a reviewer's record):
``reprice_project`` for one project with ``--jobs`` charged jobs (default 1,000,000) over a
year, of 1,568 shapes (CPU jobs of 1 to 3 nodes, any core count and four memory sizes; GPU jobs of
1 to 8 GPUs), on the testbed's two partitions.

A throwaway database gets the jobs in SQL; migration 0021's own backfill
(``shapes_backfill``) then builds the shape roll-ups the import keeps (so the figure is also
what the migration takes on such a ledger); a new version of each partition, from the day
before the request, carries the round's rates. The window is the record's: the twelve months
ending at the request's date, which starts and ends mid-month. Timed ``--runs`` times after
one warm-up (target: median <= 100 ms for this part of the record, whose whole budget is
300 ms), with the query count.

Then the whole record, as a reviewer reads it: the day and efficiency roll-ups the import keeps
are filled from the same jobs in SQL (one row per user, partition and day), the project gets a
grant on each pool over 2026, and a round (period 2027) holds its application under review. Timed:
``GET /api/v1/requests/<id>/record/`` and the request's page with the record, each ``--runs``
times after a warm-up, through Django's test client (target: median <= 300 ms each).

    python benchmarks/bench_record.py [--jobs 1000000] [--runs 20]
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

DB = "portal_bench_record"
TARGET_MS = 100
RECORD_TARGET_MS = 300

# One project's jobs over 2026 (``SHAPED_JOBS``). Every shape recurs every few hours, so nearly
# all of them are in every day's rows: the daily table's worst case.
FILL = """
INSERT INTO allocations_project (code, title, status, field_of_science, created_at)
VALUES ('bench0001', 'bench project', 'active', '', now());
""" + SHAPED_JOBS.replace("{project_code}", "'bench0001'")

# What the import keeps beside the ledger, of the same jobs: UsageDaily and the efficiency
# roll-ups (made-up usage: 60 % of cores, half the memory, all of the time asked).
ROLLUPS = """
INSERT INTO accounting_usagedaily (project_id, partition_id, username, day, service_units,
  core_hours, gpu_hours, energy_wh, cost, jobs, energy_measured_wh,
  energy_measured_estimate_wh, energy_measured_jobs)
SELECT project_id, partition_id, username, ("end" AT TIME ZONE 'UTC')::date,
  sum(service_units), sum(cpus * elapsed_seconds / 3600.0), sum(gpus * elapsed_seconds / 3600.0),
  0, 0, count(*), 0, 0, 0
FROM accounting_job GROUP BY 1, 2, 3, 4;

INSERT INTO accounting_efficiencydaily (project_id, partition_id, username, day, jobs,
  service_units, right_sized_service_units, core_hours_held, core_hours_used, memory_jobs,
  memory_mb_hours_held, memory_mb_hours_used, gpu_jobs, gpu_hours_held, gpu_hours_used,
  walltime_jobs, hours_run, hours_asked)
SELECT project_id, partition_id, username, ("end" AT TIME ZONE 'UTC')::date, count(*),
  sum(service_units), sum(service_units) * 0.6, sum(cpus * elapsed_seconds / 3600.0),
  sum(cpus * elapsed_seconds / 3600.0) * 0.6, count(*),
  sum(memory_mb * elapsed_seconds / 3600.0), sum(memory_mb * elapsed_seconds / 3600.0) * 0.5,
  count(*) FILTER (WHERE gpus > 0), sum(gpus * elapsed_seconds / 3600.0),
  sum(gpus * elapsed_seconds / 3600.0) * 0.5, count(*), sum(elapsed_seconds / 3600.0),
  sum(elapsed_seconds / 3600.0)
FROM accounting_job GROUP BY 1, 2, 3, 4;

INSERT INTO accounting_efficiencymonthly (project_id, partition_id, username, month, jobs,
  service_units, right_sized_service_units, core_hours_held, core_hours_used, memory_jobs,
  memory_mb_hours_held, memory_mb_hours_used, gpu_jobs, gpu_hours_held, gpu_hours_used,
  walltime_jobs, hours_run, hours_asked, all_jobs, charged_service_units)
SELECT project_id, partition_id, username, date_trunc('month', day)::date, sum(jobs),
  sum(service_units), sum(right_sized_service_units), sum(core_hours_held),
  sum(core_hours_used), sum(memory_jobs), sum(memory_mb_hours_held),
  sum(memory_mb_hours_used), sum(gpu_jobs), sum(gpu_hours_held), sum(gpu_hours_used),
  sum(walltime_jobs), sum(hours_run), sum(hours_asked), sum(jobs), sum(service_units)
FROM accounting_efficiencydaily GROUP BY 1, 2, 3, 4;
ANALYZE accounting_usagedaily; ANALYZE accounting_efficiencydaily;
ANALYZE accounting_efficiencymonthly;
"""

TIMING = """
import statistics, time
from datetime import date, datetime, timezone as tz
from decimal import Decimal
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from accounting.ledger.repricing import reprice_project
from accounting.models import PartitionVersion, UsageShapeDaily, UsageShapeMonthly
from projects.models import Project
backfill = __import__("importlib").import_module("accounting.migrations.0021_usage_shape_monthly")
started = time.perf_counter()
backfill.shapes_backfill(apps, connection.schema_editor())
filled = time.perf_counter() - started
with connection.cursor() as cursor:
    cursor.execute("ANALYZE accounting_usageshapedaily; ANALYZE accounting_usageshapemonthly")
for old in PartitionVersion.objects.all():
    old.pk, old.number = None, old.number + 1
    old.effective_from = datetime(2026, 11, 1, tzinfo=tz.utc)
    old.weight_override, old.weight_override_reason = old.derived_weight * 2, "round rates"
    old.save()
project = Project.objects.get(code="bench0001")
request_day = date(2026, 11, 17)
start = request_day.replace(year=request_day.year - 1)
reprice_project(project.pk, start, request_day, at=request_day)  # warm-up
timings = []
for _ in range({runs}):
    began = time.perf_counter()
    repricing = reprice_project(project.pk, start, request_day, at=request_day)
    timings.append((time.perf_counter() - began) * 1000)
with CaptureQueriesContext(connection) as queries:
    reprice_project(project.pk, start, request_day, at=request_day)
jobs = sum(row.jobs for row in repricing.partitions)

# The whole record, as a reviewer reads it (module docstring).
from django.contrib.auth.models import User
from django.test import Client
from accounting.models import Cluster, Partition
from allocations.grants.services import allocation_grant
from allocations.rounds.services import (
    request_create, request_review_start, request_submit, round_create,
)
from projects.models import PoolPartition, ResourcePool
from django.utils import timezone
staff = User.objects.create(username="ops", is_staff=True)
chair, reviewer = (User.objects.create(username=name) for name in ("chair", "reviewer"))
project.pi = User.objects.create(username="pi")
project.save()
project.memberships.create(user=project.pi, role="pi")
cluster = Cluster.objects.get(name="slurm-testbed")
pools = {}
for name, partition in (("CPU", "work"), ("GPU", "gpu")):
    pool = ResourcePool.objects.create(cluster=cluster, name=name, slurm_account_suffix=(
        "" if name == "CPU" else "-gpu"))
    PoolPartition.objects.create(pool=pool, partition=Partition.objects.get(
        cluster=cluster, name=partition))
    pools[pool] = Decimal(50_000_000)
    allocation_grant(project=project, pool=pool, amount=Decimal(40_000_000),
        period_start=date(2026, 1, 1), period_end=date(2027, 1, 1), actor=staff)
now = timezone.now()
round_ = round_create(name="2027", opens_at=now - timezone.timedelta(days=1),
    closes_at=now + timezone.timedelta(days=30), period_start=date(2027, 1, 1),
    period_end=date(2028, 1, 1), available=pools, chair=chair, committee=[reviewer],
    actor=staff)
application = request_create(project=project, actor=project.pi, round_=round_,
    amounts={pool: Decimal(45_000_000) for pool in pools})
request_submit(request=application, actor=project.pi)
request_review_start(request=application, actor=chair)
client = Client(HTTP_HOST="localhost")
client.force_login(reviewer)
record_ms = {}
for name, url in (("api", f"/api/v1/requests/{application.pk}/record/"),
                  ("page", f"/allocations/requests/{application.pk}/")):
    warm = client.get(url)  # warm-up
    assert warm.status_code == 200, (url, warm.status_code, warm.content[:300])
    times = []
    for _ in range({runs}):
        began = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200
    with CaptureQueriesContext(connection) as page_queries:
        client.get(url)
    record_ms[name] = (statistics.median(times), max(times), len(page_queries))
print("RECORD " + " ".join(f"{m:.1f} {w:.1f} {q}" for m, w, q in record_ms.values()))
print(f"RESULT {statistics.median(timings):.1f} {max(timings):.1f} {len(queries)} {jobs} "
      f"{repricing.charged_su} {repricing.repriced_su} {filled:.1f} "
      f"{UsageShapeDaily.objects.count()} {UsageShapeMonthly.objects.count()}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="reprice_project benchmark")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    env = database_create(DB, months=("2026-01", "2027-01"))
    manage = [sys.executable, "manage.py"]
    try:
        subprocess.run(
            [*manage, "cluster_apply", "examples/clusters/slurm-testbed.json"], cwd=ROOT, env=env,
            check=True, capture_output=True,
        )  # fmt: skip
        started = time.perf_counter()
        psql(DB, FILL.format(jobs=args.jobs))
        print(f"filled {args.jobs:,} jobs in {time.perf_counter() - started:.0f} s")
        psql(DB, ROLLUPS + PROJECT_USAGE_FROM_USAGE)
        done = subprocess.run(
            [*manage, "shell", "-c", TIMING.replace("{runs}", str(args.runs))], cwd=ROOT,
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode:
            sys.exit(f"the timing run failed:\n{done.stderr[-3000:]}")
        line = next(row for row in done.stdout.splitlines() if row.startswith("RESULT"))
        _, median, worst, queries, jobs, charged, repriced, filled, days, months = line.split()
        print(
            f"migration 0021's backfill of the shape roll-ups: {filled} s "
            f"({days} daily rows, {months} monthly rows)"
        )
        print(
            f"reprice_project, twelve months ending mid-month, {int(jobs):,} jobs of "
            f"{args.jobs:,}: median {median} ms, max {worst} ms over {args.runs} runs "
            f"(target median <= {TARGET_MS} ms), {queries} queries; {charged} SU charged, "
            f"{repriced} SU at the round's rates"
        )
        record = next(row for row in done.stdout.splitlines() if row.startswith("RECORD"))
        api, api_worst, api_queries, page, page_worst, page_queries = record.split()[1:]
        print(
            f"the whole record as a reviewer reads it: GET /api/v1/requests/<id>/record/ median "
            f"{api} ms (max {api_worst} ms, {api_queries} queries); the request's page with "
            f"the record median {page} ms (max {page_worst} ms, {page_queries} queries); "
            f"target median <= {RECORD_TARGET_MS} ms"
        )
        if float(median) > TARGET_MS:
            sys.exit(f"missed the target: median {median} ms > {TARGET_MS} ms")
        if max(float(api), float(page)) > RECORD_TARGET_MS:
            sys.exit(f"missed the record's target: {api} / {page} ms > {RECORD_TARGET_MS} ms")
    finally:
        database_drop(DB)


if __name__ == "__main__":
    main()

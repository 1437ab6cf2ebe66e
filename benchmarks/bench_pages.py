"""Benchmark of the browser pages with a million jobs in PostgreSQL (pages issue).

A throwaway database gets ``--jobs`` ledger rows (default 1,000,000) for 200 projects on the
testbed cluster over the last year, with their daily roll-ups (as the import keeps them),
filled in SQL with generate_series like ``bench_balance.py``; then grants on two pools for
every project, an allocation round with requests, and a PI. Each page is then requested
through Django's full request handler (middleware, view, queries, template, charts) and its
server time measured: median and maximum of ``--repeat`` requests after one warm-up.
Target: every page's median ≤ 200 ms.

    python benchmarks/bench_pages.py [--jobs 1000000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.pg import USAGE_DAILY_FROM_JOBS, database_create, database_drop, psql  # noqa: E402

DB = "portal_bench_pages"
PROJECTS = 200
TARGET_MS = 200.0

FILL = "".join(  # the shared roll-up fill in the middle
    (
        """
INSERT INTO allocations_project (code, title, status, field_of_science, created_at)
SELECT 'bench' || lpad(g::text, 4, '0'), 'bench project ' || g, 'active', '', now()
FROM generate_series(1, {projects}) g;

INSERT INTO accounting_job (
  cluster_id, job_id_raw, run, job_id, job_name, array_job_id, array_task_id, het_job_id,
  project_id, username, partition_id, partition_version_id, qos, state, state_raw, exit_code,
  submit, start, "end", elapsed_seconds, nnodes, cpus, memory_mb, gpus, nodelist,
  charge_state, service_units, pending_service_units, weight, dominant_resource,
  energy_wh, source_hash, updated_at)
SELECT c.id, (9000000 + g)::text, '', (9000000 + g)::text, 'bench', '', '', '',
  p.id, 'user' || (g % 40), pv.partition_id, pv.id, 'normal',
  CASE WHEN g % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
  CASE WHEN g % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END, '0:0',
  e - (s * interval '1 second'), e - (s * interval '1 second'), e, s, 1, 4 * (1 + g % 8),
  7656 * (1 + g % 8) * (1 + (g % 7 = 0)::int * 3), 0, 'nid1001',
  'charged', s / 3600.0 * 4 * (1 + g % 8) * (1 + (g % 7 = 0)::int * 3), 0, 128,
  CASE WHEN g % 7 = 0 THEN 'memory' ELSE 'cores' END,
  s / 3600.0 * 17.5 * (1 + g % 8), '', now()
FROM generate_series(1, {jobs}) g
CROSS JOIN LATERAL (
  SELECT now() - (g % 525600) * interval '1 minute' AS e,
         600 + ((g::bigint * 7919) % 36000)::int AS s) t
JOIN allocations_project p ON p.code = 'bench' || lpad((1 + g % {projects})::text, 4, '0')
JOIN accounting_cluster c ON c.name = 'slurm-testbed'
JOIN accounting_partitionversion pv ON pv.partition_id = (
  SELECT id FROM accounting_partition WHERE cluster_id = c.id AND name = 'work');

""",
        USAGE_DAILY_FROM_JOBS,
        """
ANALYZE;
""",
    )
)

TIMING = r"""
import statistics, time
from datetime import timedelta
from decimal import Decimal
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from accounting.models import Cluster, Job, Partition
from projects.models import Membership, PoolPartition, Project, ResourcePool
from allocations.grants.services import allocation_grant
from allocations.rounds.services import (
    request_create, request_review_start, request_submit, round_create,
)

staff = User.objects.create(username="bench-staff", is_staff=True)
pi = User.objects.create(username="bench-pi")
chair = User.objects.create(username="bench-chair")
cluster = Cluster.objects.get(name="slurm-testbed")
pools = []
for name, partition, suffix in (("bench CPU", "work", ""), ("bench GPU", "gpu", "-gpu")):
    pool = ResourcePool.objects.create(name=name, cluster=cluster, slurm_account_suffix=suffix)
    PoolPartition.objects.create(
        pool=pool, partition=Partition.objects.get(cluster=cluster, name=partition))
    pools.append(pool)
today = timezone.localdate()
start, end = today - timedelta(days=100), today + timedelta(days=265)
for project in Project.objects.filter(code__startswith="bench"):
    for pool in pools:
        allocation_grant(project=project, pool=pool, amount=Decimal(2_000_000),
                         period_start=start, period_end=end, actor=staff)
project = Project.objects.get(code="bench0042")
project.pi = pi
project.save(update_fields=["pi"])
Membership.objects.create(project=project, user=pi, role=Membership.Role.PI)
now = timezone.now()
round_ = round_create(name="bench round", opens_at=now - timedelta(days=1),
                      closes_at=now + timedelta(days=10), period_start=end,
                      period_end=end + timedelta(days=365),
                      available={pool: Decimal(10_000_000) for pool in pools},
                      chair=chair, actor=staff)
applicants = list(Project.objects.filter(code__startswith="bench").order_by("code")[:39])
for other in [*applicants, project]:
    request = request_create(round_=round_, project=other, actor=staff, justification="bench",
                             amounts={pool: Decimal(100_000) for pool in pools})
    request_submit(request=request, actor=staff)
    request_review_start(request=request, actor=chair)
mine = project.requests.get()
job = Job.objects.filter(project=project, dominant_resource="memory").order_by("-end").first()
work = Partition.objects.get(cluster=cluster, name="work")
jobs_in_project = Job.objects.filter(project=project).count()
pages = [
    ("dashboard", pi, "/"),
    ("project page (week)", pi, "/allocations/projects/bench0042/"),
    ("project page (day)", pi, "/allocations/projects/bench0042/?step=day"),
    ("project page (month)", pi, "/allocations/projects/bench0042/?step=month"),
    ("jobs table", pi, "/accounting/projects/bench0042/jobs/"),
    ("jobs table, by SU, page 40", pi, "/accounting/projects/bench0042/jobs/?sort=-su&page=40"),
    ("jobs table, filtered", pi, "/accounting/projects/bench0042/jobs/?user=user2"
     f"&state=COMPLETED&partition={work.pk}&ended_from={today - timedelta(days=90)}"),
    ("job detail", pi, f"/accounting/jobs/{job.pk}/"),
    ("quote", pi, f"/accounting/quote/?partition={work.pk}&nodes=2&cores_per_node=16&hours=3"),
    ("cost ratio explorer", pi, "/accounting/cost-ratio/"),
    ("cost ratio live update", pi, "/accounting/cost-ratio/live/?system=paper"
     "&cpu_node_hours=1&speedup=10&grid_intensity=500"),
    ("request status", pi, f"/allocations/requests/{mine.pk}/"),
    ("round overview (40 requests)", chair, f"/allocations/rounds/{round_.pk}/"),
    ("staff dashboard", staff, "/"),
    ("imports (staff)", staff, "/accounting/imports/"),
    ("quarantine (staff)", staff, "/accounting/quarantine/"),
    ("enforcement (staff)", staff, "/allocations/enforcement/"),
]
print(f"INFO {Job.objects.count()} jobs, {jobs_in_project} in bench0042")
for label, user, url in pages:
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    assert client.get(url).status_code == 200, (label, url)
    timings = []
    for _ in range({repeat}):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    print(f"RESULT {statistics.median(timings):.1f} {max(timings):.1f} {label}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="server time of the browser pages")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    today = date.today()  # the fill's jobs end over the last 365 days
    months = (f"{today.year - 1}-{today.month:02d}", f"{today.year}-{today.month:02d}")
    env = database_create(DB, months=months, DJANGO_DEBUG="0")
    manage = [sys.executable, "manage.py"]
    missed = []
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
        timing = TIMING.replace("{repeat}", str(args.repeat))
        done = subprocess.run(
            [*manage, "shell", "-c", timing], cwd=ROOT, env=env, check=False, capture_output=True,
            text=True,
        )  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"the timing script failed:\n{done.stdout}\n{done.stderr[-3000:]}")
        for line in done.stdout.splitlines():
            if line.startswith("INFO"):
                print(line[5:])
            if not line.startswith("RESULT"):
                continue
            _, median, worst, label = line.split(" ", 3)
            verdict = "ok" if float(median) <= TARGET_MS else "MISSED"
            if verdict != "ok":
                missed.append(label)
            print(f"  {label:<32} median {median:>6} ms  max {worst:>6} ms  {verdict}")
        print(
            f"target: median <= {TARGET_MS:.0f} ms of server time per page, {args.repeat} requests"
        )
    finally:
        database_drop(DB)
    if missed:
        sys.exit(f"missed the target: {', '.join(missed)}")


if __name__ == "__main__":
    main()

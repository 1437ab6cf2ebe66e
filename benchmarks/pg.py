"""A throwaway PostgreSQL database for a benchmark: created empty and migrated, dropped after.

The server is ``BENCH_PG`` (default: the local one, trust auth). Benchmarks fill their
database with SQL (``psql``) or through ``manage.py`` with the environment given back.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")


# The balance's roll-up from UsageDaily, the migration's rule (accounting 0030).
PROJECT_USAGE_FROM_USAGE = """
INSERT INTO accounting_projectusagedaily (project_id, day, partition_id, service_units, cost,
  jobs)
SELECT project_id, day, partition_id, sum(service_units), sum(cost), sum(jobs)
FROM accounting_usagedaily GROUP BY 1, 2, 3;
"""

# The daily roll-ups of a ledger filled in SQL, as the import would have kept them.
USAGE_DAILY_FROM_JOBS = (
    """
INSERT INTO accounting_usagedaily (project_id, partition_id, username, day, service_units,
  core_hours, gpu_hours, energy_wh, jobs)
SELECT project_id, partition_id, username, ("end" AT TIME ZONE 'UTC')::date, sum(service_units),
  sum(cpus * elapsed_seconds / 3600.0), 0, sum(energy_wh), count(*)
FROM accounting_job GROUP BY 1, 2, 3, 4;
"""
    + PROJECT_USAGE_FROM_USAGE
)


# A year of charged jobs (2026) in SQL, of 1,568 shapes on the testbed's two partitions: a job
# ends every 31.5 s / (jobs / 1M), each of 1 minute to 12 hours. Two in three on work (1 to 3
# nodes, 1 to 128 cores and four memory sizes a node: 1,536 shapes), one in three on gpu (1
# node, 1 to 8 GPUs with 8 cores each, four memory sizes: 32). ``{project_code}``: an SQL
# expression of the project code of job ``g``. Filled with ``.format(jobs=..., project_code=...)``.
SHAPED_JOBS = """
INSERT INTO accounting_job (
  cluster_id, job_id_raw, run, job_id, job_name, array_job_id, array_task_id, het_job_id,
  project_id, username, partition_id, partition_version_id, qos, state, state_raw, exit_code,
  submit, start, "end", elapsed_seconds, nnodes, cpus, memory_mb, gpus, nodelist,
  charge_state, service_units, pending_service_units, weight, dominant_resource,
  energy_wh, source_hash, updated_at)
SELECT c.id, (9000000 + g)::text, '', (9000000 + g)::text, 'bench', '', '', '',
  p.id, 'user' || (g % 40), pv.partition_id, pv.id, 'normal', 'COMPLETED', 'COMPLETED', '0:0',
  e - make_interval(secs => s), e - make_interval(secs => s), e, s, shape.nodes, shape.cpus,
  shape.memory_mb, shape.gpus, 'nid1001', 'charged', round(shape.cpus * s / 3600.0, 6), 0,
  pv.derived_weight, 'cores', 0, '', now()
FROM generate_series(1::bigint, {jobs}) g
CROSS JOIN LATERAL (
  SELECT timestamptz '2026-01-01 00:00+00' + g * interval '31536 seconds' / ({jobs} / 1000.0)
    AS e,
  60 + (g * 7919) % 43200 AS s
) t
CROSS JOIN LATERAL (SELECT g / 3 AS k) n
CROSS JOIN LATERAL (
  SELECT CASE WHEN g % 3 = 0 THEN 'gpu' ELSE 'work' END AS partition,
    CASE WHEN g % 3 = 0 THEN 1 ELSE 1 + k % 3 END AS nodes,
    CASE WHEN g % 3 = 0 THEN 8 * (1 + k % 8) ELSE (1 + k % 3) * (1 + (k / 3) % 128) END AS cpus,
    CASE WHEN g % 3 = 0 THEN 8000 * (1 + (k / 8) % 4)
      ELSE 8000 * (1 + (k / 384) % 4) * (1 + k % 3) END AS memory_mb,
    CASE WHEN g % 3 = 0 THEN 1 + k % 8 ELSE 0 END AS gpus
) shape
JOIN allocations_project p ON p.code = {project_code}
JOIN accounting_cluster c ON c.name = 'slurm-testbed'
JOIN accounting_partition part ON part.cluster_id = c.id AND part.name = shape.partition
JOIN accounting_partitionversion pv ON pv.partition_id = part.id;
ANALYZE accounting_job;
"""


def psql(database: str, sql: str) -> None:
    """Run ``sql`` on ``database`` of the benchmark server; stop with psql's error if it fails."""
    done = subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", f"{PG}/{database}"], input=sql, text=True,
        check=False, capture_output=True,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"psql failed on {database}: {done.stderr.strip()[-2000:]}")


def database_create(
    name: str, *, months: tuple[str, str] | None = None, **environment: str
) -> dict[str, str]:
    """Make ``name`` anew and migrate it; the environment for ``manage.py`` on it (this
    process's, with ``DATABASE_URL`` set, no Celery broker, and ``environment`` added).

    ``months`` ("YYYY-MM", "YYYY-MM"): the ledger's monthly partitions to make before a fill
    in SQL (the import makes its own; rows of a month without one land in the open
    partition, which no query can skip)."""
    psql("postgres", f"DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name};")
    env = {**os.environ, "DATABASE_URL": f"{PG}/{name}", **environment}
    env.pop("CELERY_BROKER_URL", None)
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
        )
        if months is not None:
            subprocess.run(
                [sys.executable, "manage.py", "ledger_partitions", "--from", months[0],
                 "--to", months[1]],
                cwd=ROOT, env=env, check=True, capture_output=True,
            )  # fmt: skip
    except BaseException:
        database_drop(name)
        raise
    return env


def database_drop(name: str) -> None:
    psql("postgres", f"DROP DATABASE IF EXISTS {name};")

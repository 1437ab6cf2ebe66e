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


# The daily roll-ups of a ledger filled in SQL, as the import would have kept them.
USAGE_DAILY_FROM_JOBS = """
INSERT INTO accounting_usagedaily (project_id, partition_id, username, day, service_units,
  core_hours, gpu_hours, energy_wh, jobs)
SELECT project_id, partition_id, username, ("end" AT TIME ZONE 'UTC')::date, sum(service_units),
  sum(cpus * elapsed_seconds / 3600.0), 0, sum(energy_wh), count(*)
FROM accounting_job GROUP BY 1, 2, 3, 4;
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

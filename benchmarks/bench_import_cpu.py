"""CPU time of an import, the importer's and its PostgreSQL backend's: what compares when the
machine is loaded and wall clock does not (docs/importing.md, "Columns end to end").

A throwaway database is migrated and given the slurm-testbed cluster, then a generated file of
``--lines`` allocation lines is imported twice in this process with ``jobs_import`` (the
command's own entry point below the file handling): the first import and the re-import. For
each: wall seconds, this process's CPU seconds (``resource.getrusage``, every thread: the
reader's and the COPY writer's too) and the CPU seconds of the PostgreSQL backend serving it
(``/proc/<pid>/stat`` of ``pg_backend_pid()``, so the server must run on this machine).
Alternate two checkouts' runs to compare them.

    python benchmarks/bench_import_cpu.py [--lines 200000] [--shape allocations|usage]

``--shape usage`` imports what the scheduled import reads instead (``SACCT_FORMAT``: each job
with its steps and the usage columns the efficiency figures need), of the same jobs.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
BENCH_DB = os.environ.get("BENCH_DB", "portal_bench_cpu")


def _psql(*commands: str) -> None:
    args = ["psql", "-q", "-v", "ON_ERROR_STOP=1", f"{PG}/postgres"]
    for command in commands:
        args += ["-c", command]
    subprocess.run(args, check=True, capture_output=True, text=True)


def _backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measured(path: Path) -> list[tuple[str, float, float, float]]:
    from django.db import connection

    from accounting.ledger.pipeline import jobs_import
    from accounting.models import Cluster

    cluster = Cluster.objects.get(name="slurm-testbed")
    results = []
    for label in ("import", "re-import"):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        backend, usage, started = (
            _backend_cpu(pid),
            resource.getrusage(resource.RUSAGE_SELF),
            time.perf_counter(),
        )
        with path.open() as lines:
            jobs_import(cluster=cluster, lines=lines, source="bench", create_projects=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
        results.append((label, wall, cpu, _backend_cpu(pid) - backend))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--shape", choices=("allocations", "usage"), default="allocations")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks.sacct_generator import GENERATOR_VERSION, write_sacct_file

    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    path = out / f"sacct-{args.shape}-{args.lines}-v{GENERATOR_VERSION}.psv"
    if not path.exists():
        usage = args.shape == "usage"
        write_sacct_file(path, lines=args.lines, seed=42, usage=usage, allocations=not usage)
    _psql(f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
    env = {**os.environ, "DATABASE_URL": f"{PG}/{BENCH_DB}"}
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [*manage, "cluster_apply", "examples/clusters/slurm-testbed.json"],
        cwd=ROOT, env=env, check=True, capture_output=True,
    )  # fmt: skip
    os.environ["DATABASE_URL"] = env["DATABASE_URL"]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    try:
        for label, wall, cpu, backend in _measured(path):
            print(
                f"{label:10} {args.lines:,} lines: wall {wall:6.2f} s, importer CPU {cpu:6.2f} s,"
                f" PostgreSQL backend CPU {backend:6.2f} s"
            )
    finally:
        from django.db import connections

        connections.close_all()
        _psql(f"DROP DATABASE IF EXISTS {BENCH_DB}")


if __name__ == "__main__":
    main()

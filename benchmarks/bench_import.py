"""Benchmark of the sacct import (issue: Slurm accounting import).

Measured in one run, on the same generated file (benchmarks/sacct_generator.py):

  (a) baseline: ``psql \\copy`` of the file into a typed table with the same unique key;
  (b) the full import on PostgreSQL (parse, charge, ledger, roll-ups);
  (c) a re-import of the same file, which must change nothing in the ledger;
  (d) the full import with the embedded default (SQLite);
  (e) the full import of the same jobs as ``sacct --json`` (data_parser v0.0.40 shapes, steps
      nested), on a fresh PostgreSQL database: the JSON path must stay within 1.5 x (b);
  (f) the full import with ``--workers 2`` (two processes, each a range of the file), on a
      fresh PostgreSQL database;
  and the peak RSS of each import process.

Every import runs as ``manage.py import_sacct`` in a child process, so its peak RSS is its own.

    python benchmarks/bench_import.py [--lines 1000000] [--skip-sqlite]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
BENCH_DB = os.environ.get("BENCH_DB", "portal_bench")  # another name: runs side by side
COPY_TABLE = """
CREATE TABLE sacct_copy (
  job_id text, job_id_raw text NOT NULL, job_name text, username text, account text,
  partition text, qos text, state text, exit_code text, submit timestamp, start timestamp,
  "end" timestamp, elapsed text, elapsed_raw bigint, nnodes integer, ncpus integer,
  nodelist text, req_tres text, alloc_tres text, req_mem text, consumed_energy_raw bigint,
  timelimit_raw integer, CONSTRAINT sacct_copy_key UNIQUE (job_id_raw))
"""


def _psql(database: str, *commands: str) -> None:
    args = ["psql", "-q", "-v", "ON_ERROR_STOP=1", f"{PG}/{database}"]
    for command in commands:
        args += ["-c", command]
    subprocess.run(args, check=True, capture_output=True, text=True)


def _timed_child(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Run a child; return wall seconds, its peak RSS in MB, and its standard output."""
    elapsed, usage, output = _child_usage(args, env)
    return elapsed, usage.ru_maxrss // 1024, output


def _child_usage(args: list[str], env: dict[str, str]) -> tuple[float, Any, str]:
    """Run a child; return wall seconds, its resource usage (``os.wait4``'s: CPU time, peak
    RSS) and its standard output."""
    started = time.perf_counter()
    process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    output = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{output}")
    return elapsed, usage, output


def _manage(*args: str) -> list[str]:
    return [sys.executable, "manage.py", *args]


def _prepare(env: dict[str, str]) -> None:
    subprocess.run(_manage("migrate", "--noinput", "-v", "0"), cwd=ROOT, env=env, check=True)
    subprocess.run(
        _manage("cluster_apply", "examples/clusters/slurm-testbed.json"),
        cwd=ROOT, env=env, check=True, capture_output=True,
    )  # fmt: skip


def _ledger_checksum(env: dict[str, str]) -> str:
    code = (
        "from django.db.models import Count, Max, Sum;"
        "from accounting.models import Job, UsageDaily;"
        "print(Job.objects.aggregate(Count('id'), Sum('service_units'), Max('updated_at')),"
        " UsageDaily.objects.aggregate(Count('id'), Sum('service_units'), Sum('jobs')))"
    )
    done = subprocess.run(
        _manage("shell", "-c", code), cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip().splitlines()[-1]


def run(lines: int, skip_sqlite: bool, shape: str = "allocations") -> dict[str, Any]:
    from benchmarks.sacct_generator import GENERATOR_VERSION, write_sacct_file, write_sacct_json

    OUT.mkdir(exist_ok=True)
    data = OUT / f"sacct-{shape}-{lines}-v{GENERATOR_VERSION}.psv"
    if not data.exists():
        print(f"generating {data.name} ({lines:,} lines, {shape}) ...", flush=True)
        write_sacct_file(data, lines=lines, seed=42, allocations=shape == "allocations")
    results: dict[str, Any] = {"lines": lines, "shape": shape}

    if shutil.which("psql") is None:
        raise SystemExit("psql is not installed: the PostgreSQL baseline cannot run")
    _psql("postgres", f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
    _psql(BENCH_DB, COPY_TABLE)
    started = time.perf_counter()
    _psql(
        BENCH_DB,
        f"\\copy sacct_copy FROM '{data}' WITH (FORMAT csv, DELIMITER '|', HEADER true, NULL '')",
    )
    results["copy_s"] = time.perf_counter() - started
    _psql(BENCH_DB, "DROP TABLE sacct_copy")

    env = {**os.environ, "DATABASE_URL": f"{PG}/{BENCH_DB}"}
    env.pop("CELERY_BROKER_URL", None)
    _prepare(env)
    imp = _manage(
        "import_sacct", str(data), "--cluster", "slurm-testbed", "--create-projects", "--json"
    )
    results["import_s"], results["import_rss_mb"], first = _timed_child(imp, env)
    before = _ledger_checksum(env)
    results["reimport_s"], results["reimport_rss_mb"], second = _timed_child(imp, env)
    after = _ledger_checksum(env)
    summary_first, summary_second = json.loads(first), json.loads(second)
    results["reimport_ledger_changes"] = float(
        (before != after) + summary_second["charged"] + summary_second["updated"]
    )
    print(f"first import:  {summary_first}")
    print(f"second import: {summary_second}")

    data_json = data.with_suffix(".json")
    if not data_json.exists():
        print(f"writing {data_json.name} (the same jobs as sacct --json) ...", flush=True)
        write_sacct_json(data, data_json)
    _psql("postgres", f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
    _prepare(env)
    imp_json = _manage(
        "import_sacct", str(data_json), "--cluster", "slurm-testbed", "--create-projects", "--json"
    )
    results["json_import_s"], results["json_import_rss_mb"], third = _timed_child(imp_json, env)
    summary_json = json.loads(third)
    print(f"JSON import:   {summary_json}")
    results["json_same_buckets"] = float(summary_json == summary_first)

    _psql("postgres", f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
    _prepare(env)
    results["workers2_import_s"], results["workers2_rss_mb"], fourth = _timed_child(
        [*imp, "--workers", "2"], env
    )
    results["workers2_same_buckets"] = float(json.loads(fourth) == summary_first)
    results["workers2_ledger"] = _ledger_checksum(env)

    if not skip_sqlite:
        with tempfile.TemporaryDirectory() as var:
            lite = {**os.environ, "PORTAL_VAR_DIR": var}
            lite.pop("DATABASE_URL", None)
            lite.pop("CELERY_BROKER_URL", None)
            _prepare(lite)
            results["sqlite_import_s"], results["sqlite_rss_mb"], _ = _timed_child(imp, lite)
    _psql("postgres", f"DROP DATABASE IF EXISTS {BENCH_DB}")
    return results


def report(results: dict[str, Any]) -> None:
    copy = results["copy_s"]
    lines = int(results["lines"])
    shape = (
        "job allocations only (sacct --allocations)"
        if results["shape"] == "allocations"
        else "allocations with their steps (3 lines of 4 are steps, which are only counted)"
    )
    print(f"sacct import of {lines:,} generated lines: {shape} (one run; wall clock)")
    print(f"  (a) psql \\copy into a typed table with the unique key: {copy:7.2f} s")
    print(
        f"  (b) full import, PostgreSQL:  {results['import_s']:7.2f} s  "
        f"= {results['import_s'] / copy:5.2f} x (a)  (target <= 3)  "
        f"peak RSS {results['import_rss_mb']} MB"
    )
    print(
        f"  (c) re-import, PostgreSQL:    {results['reimport_s']:7.2f} s  "
        f"= {results['reimport_s'] / copy:5.2f} x (a)  (target <= 3)  ledger changes: "
        f"{int(results['reimport_ledger_changes'])}  peak RSS {results['reimport_rss_mb']} MB"
    )
    if "sqlite_import_s" in results:
        print(
            f"  (d) full import, SQLite:      {results['sqlite_import_s']:7.2f} s  "
            f"(target <= 120 s)  peak RSS {results['sqlite_rss_mb']} MB"
        )
    if "json_import_s" in results:
        print(
            f"  (e) same jobs as sacct --json: {results['json_import_s']:7.2f} s  "
            f"= {results['json_import_s'] / results['import_s']:5.2f} x (b)  (target <= 1.5)  "
            f"peak RSS {results['json_import_rss_mb']} MB  same buckets as (b): "
            f"{'yes' if results['json_same_buckets'] else 'NO'}"
        )
    if "workers2_import_s" in results:
        print(
            f"  (f) --workers 2:              {results['workers2_import_s']:7.2f} s  "
            f"= {results['workers2_import_s'] / copy:5.2f} x (a), "
            f"{results['import_s'] / results['workers2_import_s']:4.2f} x faster than (b)  "
            f"peak RSS {results['workers2_rss_mb']} MB per process  same buckets as (b): "
            f"{'yes' if results['workers2_same_buckets'] else 'NO'}"
        )
    print("  peak RSS target: <= 400 MB")


def main() -> None:
    parser = argparse.ArgumentParser(description="sacct import benchmark")
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument(
        "--shape",
        choices=("allocations", "mixed", "both"),
        default="both",
        help="allocations only (the headline: what a centre imports), the mixed file with steps,"
        " or both",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    shapes = ("allocations", "mixed") if args.shape == "both" else (args.shape,)
    for shape in shapes:
        results = run(args.lines, args.skip_sqlite, shape)
        (OUT / f"import-{shape}.json").write_text(json.dumps(results, indent=2))
        report(results)


if __name__ == "__main__":
    main()

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
import re
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


def _timed_child(args: list[str], env: dict[str, str]) -> tuple[float, int, str, str]:
    """Run a child; return wall seconds, its peak RSS in MB, its standard output and its log
    (standard error)."""
    with tempfile.TemporaryFile("w+") as log:
        elapsed, usage, output = _child_usage(args, env, stderr=log)
        log.seek(0)
        return elapsed, usage.ru_maxrss // 1024, output, log.read()


def _child_usage(
    args: list[str], env: dict[str, str], stderr: Any = None
) -> tuple[float, Any, str]:
    """Run a child; return wall seconds, its resource usage (``os.wait4``'s: CPU time, peak
    RSS) and its standard output."""
    started = time.perf_counter()
    process = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
    )
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


_STAGES = re.compile(r"import run \d+: parse ([0-9.]+) s, price ([0-9.]+) s, write ([0-9.]+) s")


def _stages(log: str) -> dict[str, float]:
    """The per-stage seconds the import logs at its end (accounting.ledger.columnar.Stages)."""
    found = _STAGES.search(log)
    if found is None:
        return {}
    return dict(zip(("parse_s", "price_s", "write_s"), map(float, found.groups()), strict=True))


def _one_job_id(data: Path, lines: int) -> Path:
    """``lines`` lines of ONE job id (the file's first job, each line a different elapsed time):
    a hostile file that once wrote the batch at every repeat."""
    path = data.with_name(f"{data.stem}-one-job-id.psv")
    if path.exists():
        return path
    with data.open() as source:
        header, first = source.readline(), source.readline().rstrip("\n").split("|")
    at = header.rstrip("\n").split("|").index("ElapsedRaw")
    with path.open("w") as out:
        out.write(header)
        for number in range(lines):
            first[at] = str(1 + number % 3600)
            out.write("|".join(first) + "\n")
    return path


def _floor(env: dict[str, str], dump: Path) -> float:
    """Seconds of ``\\copy`` of the import's own finished rows into the ledger: the rows are
    dumped from the imported database, which is then cloned with an empty ledger (projects,
    partitions, users and the run the rows refer to stay), and copied back in."""
    columns = subprocess.run(
        ["psql", "-At", f"{PG}/{BENCH_DB}", "-c",
         "SELECT string_agg(quote_ident(column_name), ',' ORDER BY ordinal_position)"
         " FROM information_schema.columns WHERE table_name = 'accounting_job'"
         " AND column_name <> 'id'"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    _psql(BENCH_DB, f"\\copy (SELECT {columns} FROM accounting_job) TO '{dump}'")  # noqa: S608
    floor_db = f"{BENCH_DB}_floor"
    _psql("postgres", f"DROP DATABASE IF EXISTS {floor_db}")
    _psql("postgres", f"CREATE DATABASE {floor_db} TEMPLATE {BENCH_DB}")
    _psql(floor_db, "TRUNCATE accounting_job CASCADE")
    started = time.perf_counter()
    _psql(floor_db, f"\\copy accounting_job ({columns}) FROM '{dump}'")
    seconds = time.perf_counter() - started
    _psql("postgres", f"DROP DATABASE IF EXISTS {floor_db}")
    return seconds


def run(
    lines: int, skip_sqlite: bool, shape: str = "allocations", *, skip_workers: bool = False
) -> dict[str, Any]:
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

    env = {**os.environ, "DATABASE_URL": f"{PG}/{BENCH_DB}", "PORTAL_LOG_LEVEL": "INFO"}
    env.pop("CELERY_BROKER_URL", None)
    _prepare(env)
    imp = _manage(
        "import_sacct", str(data), "--cluster", "slurm-testbed", "--create-projects", "--json"
    )
    results["import_s"], results["import_rss_mb"], first, log = _timed_child(imp, env)
    results["import_stages"] = _stages(log)
    before = _ledger_checksum(env)
    results["reimport_s"], results["reimport_rss_mb"], second, log = _timed_child(imp, env)
    results["reimport_stages"] = _stages(log)
    after = _ledger_checksum(env)
    summary_first, summary_second = json.loads(first), json.loads(second)
    results["reimport_ledger_changes"] = float(
        (before != after) + summary_second["charged"] + summary_second["updated"]
    )
    print(f"first import:  {summary_first}")
    print(f"second import: {summary_second}")
    if shape == "allocations":
        with tempfile.TemporaryDirectory() as scratch:
            dump = Path(scratch) / "ledger.copy"
            results["floor_s"] = _floor(env, dump)

    data_json = data.with_suffix(".json")
    if not data_json.exists():
        print(f"writing {data_json.name} (the same jobs as sacct --json) ...", flush=True)
        write_sacct_json(data, data_json)
    _psql("postgres", f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
    _prepare(env)
    imp_json = _manage(
        "import_sacct", str(data_json), "--cluster", "slurm-testbed", "--create-projects", "--json"
    )
    results["json_import_s"], results["json_import_rss_mb"], third, _ = _timed_child(imp_json, env)
    summary_json = json.loads(third)
    print(f"JSON import:   {summary_json}")
    results["json_same_buckets"] = float(summary_json == summary_first)

    if shape == "allocations":
        one = _one_job_id(data, lines)
        _psql("postgres", f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
        _prepare(env)
        imp_one = _manage(
            "import_sacct", str(one), "--cluster", "slurm-testbed", "--create-projects", "--json"
        )
        results["one_job_id_s"], results["one_job_id_rss_mb"], fifth, log = _timed_child(
            imp_one, env
        )
        results["one_job_id_stages"] = _stages(log)
        print(f"one job id:    {json.loads(fifth)}")

    if not skip_workers:
        _psql("postgres", f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
        _prepare(env)
        results["workers2_import_s"], results["workers2_rss_mb"], fourth, _ = _timed_child(
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
            results["sqlite_import_s"], results["sqlite_rss_mb"], _, _ = _timed_child(imp, lite)
    _psql("postgres", f"DROP DATABASE IF EXISTS {BENCH_DB}")
    return results


def _stage_text(stages: dict[str, float]) -> str:
    if not stages:
        return ""
    return "  stages: " + ", ".join(f"{name[:-2]} {value:.2f} s" for name, value in stages.items())


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
        f"peak RSS {results['import_rss_mb']} MB (target <= 400)"
        + _stage_text(results.get("import_stages", {}))
    )
    print(
        f"  (c) re-import, PostgreSQL:    {results['reimport_s']:7.2f} s  "
        f"= {results['reimport_s'] / copy:5.2f} x (a)  (target <= 1.5)  ledger changes: "
        f"{int(results['reimport_ledger_changes'])}  peak RSS {results['reimport_rss_mb']} MB"
        + _stage_text(results.get("reimport_stages", {}))
    )
    if "floor_s" in results:
        print(
            f"  (g) floor: \\copy of the import's own rows into the ledger: "
            f"{results['floor_s']:7.2f} s = {results['floor_s'] / copy:5.2f} x (a); "
            f"(b) = {results['import_s'] / results['floor_s']:5.2f} x the floor (target <= 1.5)"
        )
    if "sqlite_import_s" in results:
        print(
            f"  (d) full import, SQLite:      {results['sqlite_import_s']:7.2f} s  "
            f"(target <= 120 s)  peak RSS {results['sqlite_rss_mb']} MB"
        )
    if "json_import_s" in results:
        print(
            f"  (e) same jobs as sacct --json: {results['json_import_s']:7.2f} s  "
            f"= {results['json_import_s'] / results['import_s']:5.2f} x (b)  (target <= 1.3)  "
            f"peak RSS {results['json_import_rss_mb']} MB  same buckets as (b): "
            f"{'yes' if results['json_same_buckets'] else 'NO'}"
        )
    if "one_job_id_s" in results:
        print(
            f"  (h) {lines:,} lines of ONE job id: {results['one_job_id_s']:7.2f} s  "
            f"= {results['one_job_id_s'] / results['import_s']:5.2f} x (b)  (target <= 3)  "
            f"peak RSS {results['one_job_id_rss_mb']} MB"
            + _stage_text(results.get("one_job_id_stages", {}))
        )
    if "workers2_import_s" in results:
        print(
            f"  (f) --workers 2:              {results['workers2_import_s']:7.2f} s  "
            f"= {results['workers2_import_s'] / copy:5.2f} x (a), "
            f"{results['import_s'] / results['workers2_import_s']:4.2f} x faster than (b)  "
            f"peak RSS {results['workers2_rss_mb']} MB per process  same buckets as (b): "
            f"{'yes' if results['workers2_same_buckets'] else 'NO'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="sacct import benchmark")
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--skip-workers", action="store_true", help="no --workers 2 run")
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
        results = run(args.lines, args.skip_sqlite, shape, skip_workers=args.skip_workers)
        (OUT / f"import-{shape}.json").write_text(json.dumps(results, indent=2))
        report(results)


if __name__ == "__main__":
    main()

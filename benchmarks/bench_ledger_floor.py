"""The ledger's floor before and after the lean ledger (migration accounting 0022, issue 30).

The floor is ``psql \\copy`` of the import's own finished rows into the ledger: what no import
can beat, whatever it does in Python. Measured against ``psql \\copy`` of the sacct file into a
typed table with the same unique key (bench_import.py's baseline), in the same phase:

- before: the ledger of accounting 0021 (seven foreign keys checked at commit, seven indexes
  on every monthly partition, the key table filled by its trigger, node fractions on every
  row);
- after: the lean ledger (0022), with the key rows copied beside the rows in the same
  transaction as the import writes them (the trigger skipped), and, for comparison, the rows
  alone and the rows with the trigger filling the key table (any other writer).

The rows come from a real import of ``sacct_generator`` output (allocations only), then the
database is migrated back to 0021 with its rows (node fractions filled in SQL, about the size
the import stored), and forward again. Medians of ``--rounds`` alternating rounds.

    python benchmarks/bench_ledger_floor.py [--lines 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_import import COPY_TABLE, OUT, PG  # noqa: E402

DB = os.environ.get("BENCH_FLOOR_DB", "portal_floor")
URL = f"{PG}/{DB}"

FRACTIONS_FILL = """
UPDATE accounting_job j SET node_fractions = jsonb_build_array(jsonb_build_object(
    'nodes', j.nnodes::text,
    'cores', (j.cpus::numeric / j.nnodes / (v.sockets * v.cores_per_socket))::text,
    'memory', (ceil(j.memory_mb / j.nnodes * v.sockets * v.cores_per_socket / v.memory_mb)
               / (v.sockets * v.cores_per_socket))::text,
    'gpus', CASE WHEN v.gpus > 0 THEN (j.gpus::numeric / j.nnodes / v.gpus)::text ELSE '0' END))
FROM accounting_partitionversion v
WHERE v.id = j.partition_version_id AND j.nnodes > 0 AND j.start IS NOT NULL
"""


def psql(script: str, database: str = DB) -> float:
    """Run ``script`` (SQL and psql meta-commands) in one psql session; its wall seconds."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as handle:
        handle.write(script)
    started = time.perf_counter()
    subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-X", f"{PG}/{database}", "-f", handle.name],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    os.unlink(handle.name)
    return elapsed


def manage(*args: str) -> None:
    env = {**os.environ, "DATABASE_URL": URL}
    env.pop("CELERY_BROKER_URL", None)
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)


def ledger_empty() -> None:
    """Both tables emptied by TRUNCATE: the key table's trigger would delete its rows one by
    one and leave every later round a table and indexes full of dead rows to skip."""
    psql("TRUNCATE accounting_job_key, accounting_job CASCADE;")


def typed_copy(data: Path) -> float:
    psql(f"DROP TABLE IF EXISTS sacct_copy; {COPY_TABLE};")
    return psql(
        f"\\copy sacct_copy FROM '{data}' WITH (FORMAT csv, DELIMITER '|', HEADER true, NULL '')\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from benchmarks.sacct_generator import GENERATOR_VERSION, write_sacct_file

    OUT.mkdir(exist_ok=True)
    data = OUT / f"sacct-allocations-{args.lines}-v{GENERATOR_VERSION}.psv"
    if not data.exists():
        write_sacct_file(data, lines=args.lines, seed=42, allocations=True)
    rows_after, keys, rows_before = (OUT / f"floor-{name}.tsv" for name in ("rows", "keys", "old"))

    psql(f"DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB};", database="postgres")
    manage("migrate", "--noinput", "-v", "0")
    manage("cluster_apply", "examples/clusters/slurm-testbed.json")
    started = time.perf_counter()
    manage("import_sacct", str(data), "--cluster", "slurm-testbed", "--create-projects")
    print(f"import of {args.lines:,} lines: {time.perf_counter() - started:.1f} s", flush=True)
    psql(
        f"\\copy (SELECT * FROM accounting_job) TO '{rows_after}'\n"  # noqa: S608
        f"\\copy (SELECT * FROM accounting_job_key) TO '{keys}'\n"
    )
    manage("migrate", "accounting", "0021_usage_shape_monthly", "-v", "0")
    export_old = f"\\copy (SELECT * FROM accounting_job) TO '{rows_before}'\n"  # noqa: S608
    psql(f"{FRACTIONS_FILL};\n{export_old}")
    ledger_empty()

    times: dict[str, list[float]] = {}

    def timed(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)
        print(f"  {name}: {seconds:.2f} s", flush=True)

    print("before (accounting 0021):", flush=True)
    for _ in range(args.rounds):
        timed("typed copy, before", typed_copy(data))
        timed("ledger 0021", psql(f"\\copy accounting_job FROM '{rows_before}'\n"))
        ledger_empty()
    manage("migrate", "accounting", "-v", "0")
    print("after (accounting 0022, the lean ledger):", flush=True)
    for _ in range(args.rounds):
        timed("typed copy, after", typed_copy(data))
        timed(
            "lean ledger + key rows (the import)",
            psql(
                "BEGIN;\nSET LOCAL portal.ledger_import = 'on';\n"
                f"\\copy accounting_job_key FROM '{keys}'\n"
                f"\\copy accounting_job FROM '{rows_after}'\nCOMMIT;\n"
            ),
        )
        ledger_empty()
        timed(
            "lean ledger, key rows by the trigger",
            psql(f"\\copy accounting_job FROM '{rows_after}'\n"),
        )
        ledger_empty()
        timed(
            "lean ledger rows alone",
            psql(
                "BEGIN;\nSET LOCAL portal.ledger_import = 'on';\n"
                f"\\copy accounting_job FROM '{rows_after}'\nCOMMIT;\n"
            ),
        )
        ledger_empty()

    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"\nmedians of {args.rounds} rounds, {args.lines:,} lines:")
    for name, seconds in median.items():
        base = median["typed copy, before" if name.endswith("before") or "0021" in name
                      else "typed copy, after"]  # fmt: skip
        print(f"  {name:40s} {seconds:7.2f} s  {seconds / base:5.2f} x typed copy")
    psql(f"DROP DATABASE IF EXISTS {DB};", database="postgres")


if __name__ == "__main__":
    main()

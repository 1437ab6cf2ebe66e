"""Benchmark of the cost statistics (PeCoH batch cost analyser, DESIGN section 6).

    python benchmarks/bench_coststats.py [--jobs 1000000] [--seed 42] [--skip-postgres]

(a) The pure part in memory: N synthetic Mistral jobs priced with the Full model (Listing 3)
    into a table, and the statistics at a 1 % increment (as in the report's chapter 6); the same
    again with an energy rate added to the model, which takes the decimal path; and with the
    model's nodes shared (``nodes-are shared``; single-node jobs hold 1-24 of 24 cores).
(b) On PostgreSQL (``DATABASE_URL``'s server, else ``BENCH_PG``'s, by default the local one):
    a throwaway database ``portal_bench_costs`` on that server, migrated, N ``Job`` rows loaded
    with COPY, and ``manage.py coststats --statistics --increment 1`` run as a child process and
    timed (target <= 10 s for 1M jobs), for the Full model and again with its nodes shared
    (which reads each job's shape too).
    The database is dropped afterwards.

The jobs look like the report's Mistral day (ch. 6): two thirds on one node, a plateau at 16
nodes near the 90 % quantile, a few up to 512 nodes (a third of them on two fragments, so that
almost every multi-node job has a node list of its own), runtimes from seconds to days
(log-normal), energy on 90 %.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory

from accounting.costs.costmodels import cost_model_load, cost_model_parse  # noqa: E402
from accounting.costs.coststats import cost_statistics, cost_table_build  # noqa: E402

MODEL = ROOT / "examples" / "costmodels" / "mistral-full.cost"
BENCH_DB = "portal_bench_costs"
TARGET_SECONDS = 10.0
PERIOD_START = datetime(2017, 9, 10, tzinfo=UTC)

# Mistral's compute blocks (Listing 1), as (prefix, first, last).
BLOCKS = (("m", 10000, 11367), ("m", 20000, 21115), ("m", 21607, 21769))
# Sizes of the multi-node third, in per mille: 90 % of all jobs on 16 nodes or fewer (Fig. 6.1).
SIZES = (2, 4, 8, 16, 32, 64, 128, 512)
# A single-node job's share of its node under a shared model: 1, 2, 6, 12 or 24 of 24 cores.
SHARES = tuple(Fraction(cores, 24) for cores in (1, 2, 6, 12, 24))
SIZE_WEIGHTS = (250, 200, 150, 250, 70, 50, 25, 5)

Record = tuple[str, str, int, int | None, Fraction | None]


def synthetic_jobs(count: int, seed: int) -> Iterator[Record]:
    """Deterministic jobs as (job_id, nodelist, elapsed_seconds, consumed_energy_joules,
    node_share); the shares come from a generator of their own, so the rest stays the same."""
    rng = random.Random(seed)
    share_rng = random.Random(seed + 1)
    for number in range(count):
        draw = rng.random()
        if draw < 0.02:
            nodelist, size = f"mg{rng.randint(100, 111)}", 1  # fat GPU nodes
        elif draw < 0.67:
            prefix, first, last = rng.choice(BLOCKS)
            nodelist, size = f"{prefix}{rng.randint(first, last)}", 1
        else:
            prefix, first, last = rng.choice(BLOCKS)
            size = min(rng.choices(SIZES, SIZE_WEIGHTS)[0], last - first + 1)
            start = rng.randint(first, last - size + 1)
            if size >= 4 and rng.random() < 0.3:  # fragmented, as Slurm often allocates
                half = size // 2
                gap = rng.randint(1, 40)
                if start + size + gap <= last:
                    nodelist = (
                        f"{prefix}[{start}-{start + half - 1},"
                        f"{start + half + gap}-{start + size + gap - 1}]"
                    )
                else:
                    nodelist = f"{prefix}[{start}-{start + size - 1}]"
            else:
                nodelist = f"{prefix}[{start}-{start + size - 1}]"
        runtime = min(int(rng.lognormvariate(6.0, 2.2)), 8 * 86_400)
        energy = None if rng.random() < 0.1 else int(runtime * size * rng.uniform(150, 450))
        # Single-node jobs hold a part of their node (what a shared model charges).
        share = share_rng.choice(SHARES) if size == 1 else None
        yield (str(7_000_000 + number), nodelist, runtime, energy, share)


def bench_pure(count: int, seed: int) -> None:
    jobs = list(synthetic_jobs(count, seed))
    model = cost_model_load(MODEL)
    energy_model = cost_model_parse(
        MODEL.read_text() + "\nnodes Everything m[10000-11999,20000-21999] mg[100-299]\n"
        "  energy-rate Electricity 25 c/kWh\n",
        source="mistral-full + energy-rate",
    )
    shared_model = cost_model_parse(
        "nodes-are shared\n" + MODEL.read_text(), source="mistral-full, nodes shared"
    )
    for label, priced_with in (
        ("Full model", model),
        ("Full model + an energy rate", energy_model),
        ("Full model, nodes shared", shared_model),
    ):
        started = time.perf_counter()
        table = cost_table_build(priced_with, jobs)
        built = time.perf_counter()
        stats = cost_statistics(table, increment=1)
        done = time.perf_counter()
        total = stats.statistics[-1].sum
        print(
            f"coststats (pure, {label}): {count:,} jobs in {done - started:.1f} s "
            f"(table {built - started:.1f} s, statistics {done - built:.1f} s); "
            f"total {total:,.2f} {priced_with.currency}"
        )


def _psql(url: str, *commands: str) -> str:
    args = ["psql", "-q", "-At", "-v", "ON_ERROR_STOP=1", url]
    for command in commands:
        args += ["-c", command]
    done = subprocess.run(args, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"psql failed: {done.stderr.strip()}")
    return done.stdout


def _with_database(url: str, name: str) -> str:
    return urlunparse(urlparse(url)._replace(path=f"/{name}"))


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout


def _fill(data_type: str) -> str:
    """A value for a NOT NULL column this benchmark does not know (added by a later migration)."""
    if data_type in {"integer", "bigint", "smallint", "numeric", "double precision", "real"}:
        return "0"
    if data_type == "boolean":
        return "f"
    if data_type in {"json", "jsonb"}:
        return "{}"
    if data_type.startswith("timestamp"):
        return PERIOD_START.isoformat()
    return ""


def _load_jobs(url: str, env: dict[str, str], count: int, seed: int) -> None:
    ids = _manage(
        env,
        "shell",
        "-c",
        "from accounting.models import Cluster, Partition;"
        "from projects.models import Project;"
        "c = Cluster.objects.create(name='bench-mistral');"
        "p = Partition.objects.create(cluster=c, name='compute');"
        "j = Project.objects.create(code='bench0001');"
        "print(c.pk, p.pk, j.pk)",
    ).split()
    cluster_id, partition_id, project_id = ids[-3:]
    rows = _psql(
        url,
        "SELECT column_name, data_type, column_default IS NOT NULL FROM information_schema.columns"
        " WHERE table_name = 'accounting_job' AND is_nullable = 'NO' ORDER BY ordinal_position",
    )
    now = datetime.now(UTC).isoformat()
    known = {
        "cluster_id": cluster_id, "partition_id": partition_id, "project_id": project_id,
        "username": "bench", "state": "COMPLETED", "state_raw": "COMPLETED",
        "charge_state": "charged", "updated_at": now,
    }  # fmt: skip
    fixed: dict[str, str] = {}
    for row in rows.splitlines():
        name, data_type, has_default = row.split("|")
        if name == "id" or has_default == "t":
            continue
        fixed[name] = known.get(name, _fill(data_type))
    per_job = ["job_id_raw", "job_id", "nodelist", "nnodes", "elapsed_seconds"]
    per_job += ["consumed_energy_joules", "start", "end"]
    columns = [name for name in fixed if name not in per_job] + per_job
    with tempfile.NamedTemporaryFile("w", suffix=".csv", newline="", delete=False) as handle:
        writer = csv.writer(handle)
        constant = [fixed[name] for name in columns if name not in per_job]
        step = timedelta(days=7) / max(count, 1)
        for index, (job_id, nodelist, runtime, energy, _) in enumerate(synthetic_jobs(count, seed)):
            end = PERIOD_START + step * index
            nnodes = nodelist.count(",") + 1  # not used by coststats, which expands the list
            writer.writerow(
                [*constant, job_id, job_id, nodelist, nnodes, runtime,
                 "\\N" if energy is None else energy,
                 (end - timedelta(seconds=runtime)).isoformat(), end.isoformat()]
            )  # fmt: skip
        path = handle.name
    try:
        started = time.perf_counter()
        quoted = ", ".join(f'"{column}"' for column in columns)
        _psql(url, f"\\copy accounting_job ({quoted}) FROM '{path}' WITH (FORMAT csv, NULL '\\N')")
        _psql(url, "ANALYZE accounting_job")
        print(f"  loaded {count:,} Job rows with COPY in {time.perf_counter() - started:.1f} s")
    finally:
        os.unlink(path)


def _coststats_timed(env: dict[str, str], label: str, model: Path, count: int) -> bool:
    command = [
        sys.executable, "manage.py", "coststats", "--model", str(model),
        "--cluster", "bench-mistral", "--statistics", "--increment", "1",
    ]  # fmt: skip
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    # The output is a few lines: reading one pipe after the other cannot block the child.
    output = process.stdout.read() if process.stdout else ""
    errors = process.stderr.read() if process.stderr else ""
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"coststats failed:\n{errors}")
    lines = output.splitlines()
    print(f"  {errors.strip()}")
    for line in lines[-5:]:
        print(f"  {line}")
    met = elapsed <= TARGET_SECONDS * count / 1_000_000
    print(
        f"coststats (PostgreSQL, {label}): {count:,} jobs in {elapsed:.1f} s "
        f"(target <= {TARGET_SECONDS * count / 1_000_000:g} s), "
        f"peak RSS {usage.ru_maxrss // 1024} MB" + ("" if met else "  MISSED")
    )
    return met


def bench_postgres(database_url: str, count: int, seed: int, *, keep: bool = False) -> bool:
    if shutil.which("psql") is None:
        print("coststats (PostgreSQL): skipped, psql is not installed")
        return True
    admin = _with_database(database_url, "postgres")
    url = _with_database(database_url, BENCH_DB)
    _psql(admin, f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
    try:
        env = {**os.environ, "DATABASE_URL": url}
        env.pop("CELERY_BROKER_URL", None)
        _manage(env, "migrate", "--noinput", "-v", "0")
        _manage(env, "ledger_partitions", "--from", "2017-09", "--to", "2017-10")
        _load_jobs(url, env, count, seed)
        met = True
        with tempfile.TemporaryDirectory() as folder:
            shared = Path(folder) / "mistral-full-shared.cost"
            shared.write_text("nodes-are shared\n" + MODEL.read_text())
            for label, model in (("Full model", MODEL), ("Full model, nodes shared", shared)):
                met = _coststats_timed(env, label, model, count) and met
        return met
    finally:
        if not keep:
            _psql(admin, f"DROP DATABASE IF EXISTS {BENCH_DB}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-pure", action="store_true")
    parser.add_argument(
        "--keep-database", action="store_true", help=f"leave {BENCH_DB} for profiling"
    )
    args = parser.parse_args()
    # Like the other benchmarks: DATABASE_URL's server when it is PostgreSQL, else BENCH_PG's.
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        server = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
        database_url = f"{server}/postgres"
    met = True
    # PostgreSQL first: the child's peak RSS must not include pages of this process's pure run,
    # which a fork would inherit.
    if args.skip_postgres or not database_url.startswith(("postgres://", "postgresql://")):
        print("coststats (PostgreSQL): skipped (--skip-postgres)")
    else:
        met = bench_postgres(database_url, args.jobs, args.seed, keep=args.keep_database)
    if not args.skip_pure:
        bench_pure(args.jobs, args.seed)
    if not met:
        sys.exit(2)


if __name__ == "__main__":
    main()

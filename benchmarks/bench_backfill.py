"""Benchmark of a backfill on Celery workers: the same range on one worker, then on two.

    python benchmarks/bench_backfill.py [--lines 200000] [--windows 20]

A throwaway database gets the testbed's spec; the cluster's sacct is a script that replays a
generated ``sacct --allocations`` file for the window asked (as sacct selects jobs for -S/-E:
those that ran at any time in it). ``import_backfill`` splits the file's time range into
``--windows`` windows and enqueues one task per window on the imports queue; the time is from
the enqueue to the last window's end. Run once with one worker process, then, on an emptied
ledger, with two: the ledgers must be equal, and the speed-up is reported. Redis
(``BENCH_BROKER``, default the local one, database 13) is the broker.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.pg import PG, database_create, database_drop, psql  # noqa: E402
from benchmarks.sacct_generator import GENERATOR_VERSION, write_sacct_file  # noqa: E402

DB = "portal_bench_backfill"
BROKER = os.environ.get("BENCH_BROKER", "redis://127.0.0.1:6379/13")
OUT = ROOT / "benchmarks" / "out"

REPLAY = """#!{python}
import sys
from datetime import datetime, timezone

def when(text):
    if text in ("Unknown", "None", ""):
        return None
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)

options = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
since = datetime.fromisoformat(options["--starttime"]).replace(tzinfo=timezone.utc)
until = datetime.fromisoformat(options["--endtime"]).replace(tzinfo=timezone.utc)
with open({data!r}) as lines:
    header = next(lines)
    names = header.rstrip("\\n").split("|")
    start_at, submit_at, end_at = (names.index(n) for n in ("Start", "Submit", "End"))
    sys.stdout.write(header)
    for line in lines:
        fields = line.split("|")
        start = when(fields[start_at]) or when(fields[submit_at])
        end = when(fields[end_at])
        if start < until and (end is None or end >= since):
            sys.stdout.write(line)
"""

LEDGER = (
    "from django.db.models import Count, Sum; from accounting.models import Job, UsageDaily;"
    "print(Job.objects.aggregate(Count('id'), Sum('service_units')),"
    " UsageDaily.objects.aggregate(Count('id'), Sum('service_units'), Sum('jobs')))"
)
FINISHED = (
    "SELECT count(*) FROM accounting_importrun"
    " WHERE source LIKE 'backfill%' AND status <> 'running'"
)


def _finished_windows() -> int:
    # psql, not a Django process per poll: the poll must not take a core from the workers.
    done = subprocess.run(
        ["psql", "-tA", "-c", FINISHED, f"{PG}/{DB}"], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip() or 0)


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
        capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def _range_of(data: Path) -> tuple[datetime, datetime]:
    first = last = None
    with data.open() as lines:
        names = next(lines).rstrip("\n").split("|")
        submit_at, end_at = names.index("Submit"), names.index("End")
        for line in lines:
            fields = line.split("|")
            submit = datetime.fromisoformat(fields[submit_at]).replace(tzinfo=UTC)
            end = datetime.fromisoformat(fields[end_at]).replace(tzinfo=UTC)
            first = submit if first is None else min(first, submit)
            last = end if last is None else max(last, end)
    if first is None or last is None:
        raise SystemExit(f"{data} holds no job")
    return first - timedelta(minutes=1), last + timedelta(minutes=1)


def _backfill(env: dict[str, str], workers: int, *, since: datetime, until: datetime,
              windows: int) -> tuple[float, str]:  # fmt: skip
    """Seconds from the enqueue to the last window's end with ``workers`` worker processes,
    and the ledger's checksum."""
    logs = [(OUT / f"bench-backfill-worker-{workers}-{n}.log").open("w") for n in range(workers)]
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--pool",
                "solo",
                "--queues",
                "imports,portal",
                "--hostname",
                f"bench{n}@%h",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=logs[n],
        )
        for n in range(workers)
    ]
    try:
        time.sleep(5)  # the workers connect to the broker (not part of the measurement)
        hours = (until - since).total_seconds() / 3600 / windows
        started = time.perf_counter()
        _manage(
            env, "import_backfill", "--cluster", "slurm-testbed", "--since", since.isoformat(),
            "--until", until.isoformat(), "--window-hours", f"{hours:.6f}",
        )  # fmt: skip
        while _finished_windows() < windows:
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        for log in logs:
            log.close()
    return elapsed, _manage(env, "shell", "-c", LEDGER)


def main() -> int:
    parser = argparse.ArgumentParser(description="parallel backfill benchmark")
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--windows", type=int, default=20)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    data = OUT / f"sacct-allocations-{args.lines}-v{GENERATOR_VERSION}.psv"
    if not data.exists():
        write_sacct_file(data, lines=args.lines, seed=42, allocations=True)
    since, until = _range_of(data)
    with tempfile.TemporaryDirectory() as folder:
        replay = Path(folder) / "sacct"
        replay.write_text(REPLAY.format(python=sys.executable, data=str(data)))
        replay.chmod(0o755)
        env = {**database_create(DB, PORTAL_VAR_DIR=folder), "CELERY_BROKER_URL": BROKER}
        try:
            subprocess.run(
                [sys.executable, "manage.py", "cluster_apply",
                 "examples/clusters/slurm-testbed.json"],
                cwd=ROOT, env=env, check=True, capture_output=True,
            )  # fmt: skip
            # Our own constants and a temporary path, not input: plain SQL is enough.
            psql(
                DB,
                "INSERT INTO allocations_project (code, title, status, field_of_science,"  # noqa: S608
                " created_at) SELECT 'pawsey000' || g, 'bench', 'active', '', now()"
                " FROM generate_series(1, 4) g;"
                f" UPDATE accounting_cluster SET sacct_command = '{replay}';",
            )
            one, ledger_one = _backfill(env, 1, since=since, until=until, windows=args.windows)
            psql(
                DB,
                "TRUNCATE accounting_job, accounting_usagedaily, accounting_projectusagedaily, "
                "accounting_utilisationhourly "
                "CASCADE; DELETE FROM accounting_importrun;",
            )
            two, ledger_two = _backfill(env, 2, since=since, until=until, windows=args.windows)
        finally:
            database_drop(DB)
    print(
        f"backfill of {args.lines:,} allocations in {args.windows} windows "
        f"({since:%Y-%m-%d} .. {until:%Y-%m-%d}), one run each:"
    )
    print(f"  one worker:  {one:7.2f} s")
    print(f"  two workers: {two:7.2f} s  = {one / two:4.2f} x faster")
    print(f"  same ledger: {'yes' if ledger_one == ledger_two else 'NO'} ({ledger_two})")
    return 0 if ledger_one == ledger_two else 1


if __name__ == "__main__":
    sys.exit(main())

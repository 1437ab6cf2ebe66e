"""Benchmark of Q(T) series (DESIGN section 4) read from the hourly rows in PostgreSQL.

    python benchmarks/bench_utilisation.py [--runs 7] [--target-ms 300] [--database NAME]

A throwaway database ``portal_bench_utilisation`` gets the Setonix spec
(``examples/clusters/setonix.json``: work, highmem and gpu partitions, Australia/Perth), a second
rate version of ``work`` from 1 July with 64 more nodes (a node-count change mid-year), and one
``UtilisationHourly`` row per partition and local hour of 2026, filled by SQL
(``generate_series``), with the import's month stamps (``UtilisationMonth``) summed from them.
That is what 10 million jobs leave in the table: the import keeps one
row per partition-hour however many jobs ran in it, so the row count, not the job count, is
what a series costs.

Timed, the median of ``--runs`` calls each, in one process:

- the baseline: the bare fetch of the same rows (``SELECT partition_id, hour_start,
  core_seconds, gpu_seconds FROM accounting_utilisationhourly WHERE ...``) on a cursor, and the
  same with ``hour_start`` as epoch seconds (what the selector reads);
- ``utilisation_series_get`` for the year in hourly (target <= 300 ms end to end), daily and
  monthly buckets, each with its ratio to the baseline;
- the API (``/api/v1/utilisation/``, the ``columns`` shape, Django's test client with a staff
  token, the cache of the settings: local memory unless ``PORTAL_CACHE_URL`` is set) for the
  year by hour and by day, plain and gzipped: warm, and the first view after an upsert of the
  import's writer (``hourly_apply``) into one hour of December (issue 33, docs/utilisation.md).

The exit status is 2 when the hourly series misses the target. The database is dropped
afterwards (``--keep`` leaves it, e.g. to profile with ``DATABASE_URL`` pointing at it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.pg import database_create, database_drop, psql  # noqa: E402

DB = "portal_bench_utilisation"
SPEC = ROOT / "examples" / "clusters" / "setonix.json"
YEAR = 2026
MORE_WORK_NODES = "nid[001000-002655]"  # 1592 + 64 nodes from 1 July
TARGET_MS = 300.0

# One row per partition and local hour of the year (Perth is UTC+8 all year, so local hours
# are UTC hours). Allocated core-seconds between 35 % and 95 % of the partition's capacity,
# varying by hour of day and by day; GPU-seconds likewise on the GPU partition.
FILL = """
INSERT INTO accounting_utilisationhourly (partition_id, hour_start, core_seconds, gpu_seconds)
SELECT v.partition_id, h,
  (v.node_count * v.sockets * v.cores_per_socket * 3600
    * (0.35 + 0.6 * ((extract(hour FROM h) * 7 + extract(doy FROM h) * 13)::int % 100) / 100.0)
  )::bigint,
  (v.node_count * v.gpus * 3600
    * (0.35 + 0.6 * ((extract(hour FROM h) * 11 + extract(doy FROM h) * 5)::int % 100) / 100.0)
  )::bigint
FROM accounting_partitionversion v
JOIN accounting_partition p ON p.id = v.partition_id
JOIN accounting_cluster c ON c.id = p.cluster_id AND c.name = 'setonix'
CROSS JOIN generate_series(
  timestamptz '{year}-01-01 00:00+08', timestamptz '{next_year}-01-01 00:00+08' - interval '1 hour',
  interval '1 hour') AS h
WHERE v.number = 1;
INSERT INTO accounting_utilisationmonth (partition_id, month, core_seconds, gpu_seconds, changes)
SELECT partition_id, date_trunc('month', hour_start AT TIME ZONE 'UTC')::date,
  sum(core_seconds), sum(gpu_seconds), 1
FROM accounting_utilisationhourly GROUP BY 1, 2;
ANALYZE;
"""

TIMING = """
import statistics, time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo
from django.db import connection
from accounting.models import Cluster
from accounting.utilisation.selectors import utilisation_series_get
from accounting.utilisation.quality import Utilisation

cluster = Cluster.objects.get(name="setonix")
zone = ZoneInfo(cluster.timezone)
start, end = datetime({year}, 1, 1, tzinfo=zone), datetime({next_year}, 1, 1, tzinfo=zone)
runs = {runs}


def median_ms(call):
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        result = call()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), result


BARE = (
    "SELECT partition_id, {{hour}}, core_seconds, gpu_seconds FROM accounting_utilisationhourly "
    "WHERE partition_id IN (SELECT id FROM accounting_partition WHERE cluster_id = %s) "
    "AND hour_start >= %s AND hour_start < %s"
)


def bare(hour):
    with connection.cursor() as cursor:
        cursor.execute(BARE.format(hour=hour), [cluster.pk, start, end])
        return cursor.fetchall()


took, rows = median_ms(lambda: bare("hour_start"))
print(f"RESULT baseline {{took:.1f}} {{len(rows)}} -")
took, rows = median_ms(lambda: bare("EXTRACT(EPOCH FROM hour_start)::bigint"))
print(f"RESULT epoch {{took:.1f}} {{len(rows)}} -")
for step in ("hour", "day", "month"):
    took, series = median_ms(
        lambda: utilisation_series_get(cluster=cluster, start=start, end=end, step=step)
    )
    year = sum((window.total for window in series), start=Utilisation())
    print(f"RESULT {{step}} {{took:.1f}} {{len(series)}} {{year.q_percent}}")

# The API end to end (Django's request handler in this process, a staff token, the cache of
# the settings: local memory unless PORTAL_CACHE_URL is set), warm, and the first view after
# an upsert of the import's writer into the window's last month (its block alone recomputed).
from django.contrib.auth.models import User
from django.test import Client
from accounting.ledger.rollups import hourly_apply
from people.tokens import token_create

staff = User.objects.create(username="bench-staff", is_staff=True)
token = token_create(user=staff, name="bench", scope="read", expires_in_days=1).plaintext
client = Client(HTTP_HOST="127.0.0.1")
work = cluster.partitions.get(name="work")
december = datetime({year}, 12, 15, 3, tzinfo=zone)
for step in ("hour", "day"):
    window = f"start={year}-01-01T00:00&end={next_year}-01-01T00:00"
    path = f"/api/v1/utilisation/?cluster=setonix&{{window}}&step={{step}}"
    for encoding in ("", "gzip"):
        name = f"api-{{step}}-{{encoding or 'plain'}}"
        headers = {{"HTTP_AUTHORIZATION": "Token " + token, "HTTP_ACCEPT_ENCODING": encoding}}

        def view():
            response = client.get(path, **headers)
            assert response.status_code == 200, response.content[:300]
            return response

        view()  # the cache filled
        took, response = median_ms(view)
        print(f"RESULT {{name}} {{took:.1f}} {{len(response.content)}} -")
        firsts = []
        for index in range(runs):
            hourly_apply({{(work.pk, december + timedelta(hours=index)): [3600, 0]}})
            started = time.perf_counter()
            view()
            firsts.append((time.perf_counter() - started) * 1000)
        first = statistics.median(firsts)
        print(f"RESULT {{name}}-first {{first:.1f}} {{len(response.content)}} -")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="calls per figure (median)")
    parser.add_argument("--target-ms", type=float, default=TARGET_MS)
    parser.add_argument("--keep", action="store_true", help="keep the database (for profiling)")
    parser.add_argument("--database", default=DB, help=f"the throwaway database (default {DB})")
    args = parser.parse_args()
    env = database_create(args.database)
    manage = [sys.executable, "manage.py"]
    try:
        with tempfile.TemporaryDirectory() as folder:
            bigger = json.loads(SPEC.read_text())
            for partition in bigger["partitions"]:
                if partition["name"] == "work":
                    partition["nodelist"] = MORE_WORK_NODES
            changed = Path(folder) / "setonix.json"
            changed.write_text(json.dumps(bigger))
            july = ["--effective", f"{YEAR}-07-01T00:00+08:00"]
            for spec, effective in ((SPEC, []), (changed, july)):
                subprocess.run(
                    [*manage, "cluster_apply", str(spec), *effective], cwd=ROOT, env=env,
                    check=True, capture_output=True,
                )  # fmt: skip
        started = time.perf_counter()
        psql(args.database, FILL.format(year=YEAR, next_year=YEAR + 1))
        seconds = time.perf_counter() - started
        print(f"filled one row per partition-hour of {YEAR} in {seconds:.1f} s")
        timing = TIMING.format(year=YEAR, next_year=YEAR + 1, runs=args.runs)
        done = subprocess.run(
            [*manage, "shell", "-c", timing], cwd=ROOT, env=env, check=True, capture_output=True,
            text=True,
        )  # fmt: skip
    finally:
        if not args.keep:
            database_drop(args.database)
    results: dict[str, tuple[float, int, str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT"):
            name, took_ms, count, q_text = line.split()[1:]
            results[name] = (float(took_ms), int(count), q_text)
    baseline, rows, _ = results["baseline"]
    print(
        f"baseline: bare SELECT of the {rows:,} rows (hour_start as timestamptz): median "
        f"{baseline:.1f} ms; with hour_start as epoch seconds, as the selector reads them: "
        f"{results['epoch'][0]:.1f} ms"
    )
    for step in ("hour", "day", "month"):
        took, buckets, q_percent = results[step]
        target = f" (target <= {args.target_ms:.0f} ms)" if step == "hour" else ""
        print(
            f"utilisation_series_get, one year by {step}: median {took:.1f} ms for {buckets:,} "
            f"buckets{target}, {took / baseline:.2f}x the bare fetch; Q over the year "
            f"{q_percent} %"
        )
    for step in ("hour", "day"):
        for encoding in ("plain", "gzip"):
            warm, size, _ = results[f"api-{step}-{encoding}"]
            first = results[f"api-{step}-{encoding}-first"][0]
            print(
                f"API a year by {step} ({encoding}, {size:,} bytes): median {warm:.1f} ms warm; "
                f"first view after an upsert into December {first:.1f} ms ({first / warm:.2f}x)"
            )
    met = results["hour"][0] <= args.target_ms
    print(f"hourly series: target {'met' if met else 'MISSED'}; median of {args.runs} runs each")
    return 0 if met else 2


if __name__ == "__main__":
    sys.exit(main())

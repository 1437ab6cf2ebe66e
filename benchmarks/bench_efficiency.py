"""Benchmark: what reading jobs' usage costs the import (issue: job efficiency).

The same generated history (benchmarks/sacct_generator.py, same seed) is written twice, without
and with the usage columns the portal's default sacct command now asks for (TotalCPU, MaxRSS,
TRESUsageInTot/Max/Ave), in two shapes:

  (a) allocations with their steps (the default command's output now: the memory peaks are on
      the steps' lines, which the import reads for usage instead of only counting them);
  (b) allocations only (``--allocations``: TotalCPU alone, CPU efficiency only).

Each file is imported by ``manage.py import_sacct`` in a child process into a fresh PostgreSQL
database, the two files of a shape alternating, ``--repeat`` pairs; the figure is the median of
the per-pair ratios (with usage / without), target <= 1.2. Reported beside: the import
process's CPU time (steadier than wall time on a shared machine; PostgreSQL's work is not in
it), and its peak RSS, since the step usage of a batch is held in memory until it is written.

    python benchmarks/bench_efficiency.py [--lines 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.bench_import import (  # noqa: E402 (the import benchmark's harness)
    OUT,
    PG,
    _child_usage,
    _manage,
    _prepare,
    _psql,
)

DB = "portal_bench_efficiency"
TARGET = 1.2


def _file(shape: str, lines: int, usage: bool) -> Path:
    from benchmarks.sacct_generator import GENERATOR_VERSION, write_sacct_file

    OUT.mkdir(exist_ok=True)
    name = f"sacct-{shape}-{lines}-v{GENERATOR_VERSION}{'-usage' if usage else ''}.psv"
    path = OUT / name
    if not path.exists():
        print(f"generating {name} ...", flush=True)
        write_sacct_file(
            path, lines=lines, seed=42, allocations=shape == "allocations", usage=usage
        )
    return path


def _import(path: Path, env: dict[str, str]) -> tuple[float, float, int, dict[str, int]]:
    """Wall seconds, the import process's CPU seconds (steadier than wall time on a shared
    machine; PostgreSQL's work is not in it), its peak RSS in MB, and its summary."""
    _psql("postgres", f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")
    _prepare(env)
    command = _manage(
        "import_sacct", str(path), "--cluster", "slurm-testbed", "--create-projects", "--json"
    )
    seconds, usage, output = _child_usage(command, env)
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, usage.ru_maxrss // 1024, json.loads(output)


def run(lines: int, repeat: int) -> dict[str, Any]:
    env = {**os.environ, "DATABASE_URL": f"{PG}/{DB}"}
    env.pop("CELERY_BROKER_URL", None)
    results: dict[str, Any] = {"lines": lines}
    for shape in ("mixed", "allocations"):
        plain, usage = _file(shape, lines, usage=False), _file(shape, lines, usage=True)
        ratios: list[float] = []
        times: dict[str, list[float]] = {"plain": [], "usage": []}
        cpu: dict[str, list[float]] = {"plain": [], "usage": []}
        rss = {"plain": 0, "usage": 0}
        for _ in range(repeat):
            without, cpu_without, rss_without, summary_without = _import(plain, env)
            with_usage, cpu_with, rss_with, summary_with = _import(usage, env)
            if summary_with != summary_without:
                raise SystemExit(f"{shape}: the buckets differ: {summary_without} {summary_with}")
            ratios.append(with_usage / without)
            times["plain"].append(without)
            times["usage"].append(with_usage)
            cpu["plain"].append(cpu_without)
            cpu["usage"].append(cpu_with)
            rss = {"plain": max(rss["plain"], rss_without), "usage": max(rss["usage"], rss_with)}
        results[shape] = {
            "without_s": statistics.median(times["plain"]),
            "with_s": statistics.median(times["usage"]),
            "ratio": statistics.median(ratios),
            "ratios": ratios,
            "cpu_without_s": statistics.median(cpu["plain"]),
            "cpu_with_s": statistics.median(cpu["usage"]),
            "rss_mb": rss,
        }
    _psql("postgres", f"DROP DATABASE IF EXISTS {DB}")
    return results


def report(results: dict[str, Any]) -> None:
    print(f"\nimport with usage columns against without, {results['lines']:,} lines per file")
    names = {
        "mixed": "(a) allocations and steps",
        "allocations": "(b) allocations only (--allocations)",
    }
    for shape, name in names.items():
        figures = results[shape]
        verdict = "ok" if figures["ratio"] <= TARGET else f"ABOVE the {TARGET} x target"
        print(
            f"{name}: {figures['without_s']:.2f} s -> {figures['with_s']:.2f} s (medians), "
            f"ratio {figures['ratio']:.3f} x ({verdict}; pairs "
            f"{', '.join(f'{r:.3f}' for r in figures['ratios'])}), the import process's CPU "
            f"{figures['cpu_without_s']:.2f} s -> {figures['cpu_with_s']:.2f} s (medians), "
            f"peak RSS {figures['rss_mb']['plain']} MB -> {figures['rss_mb']['usage']} MB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = run(args.lines, args.repeat)
    report(results)
    out = OUT / "bench_efficiency.json"
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

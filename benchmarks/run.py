"""``make bench``: every benchmark, each printing its figures and its ratio to a baseline (or
its target) measured in the same run. Options pass through: ``make bench BENCH_ARGS=--quick``
(a tenth of the sizes) or ``BENCH_ARGS="--only import"``."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def benches(quick: bool) -> dict[str, list[str]]:
    size = "100000" if quick else "1000000"
    big = "1000000" if quick else "10000000"
    python = sys.executable
    return {
        "charging": [python, "benchmarks/bench_charging.py", "--jobs", size],
        "import": [python, "benchmarks/bench_import.py", "--lines", size],
        "backfill": [python, "benchmarks/bench_backfill.py", "--lines", str(int(size) // 5)],
        "balance": [python, "benchmarks/bench_balance.py", "--jobs", big],
        "api": [python, "benchmarks/bench_api.py", "--jobs", big],
        "pages": [python, "benchmarks/bench_pages.py", "--jobs", size],
        "scale": [python, "benchmarks/bench_scale.py", "--jobs", big],
        "overhead": [python, "benchmarks/bench_overhead.py"],
        "coststats": [python, "benchmarks/bench_coststats.py"],
        "utilisation": [python, "benchmarks/bench_utilisation.py"],
        "efficiency": [python, "benchmarks/bench_efficiency.py", "--lines", str(int(size) // 5)],
        "efficiency_api": [
            python,
            "benchmarks/bench_efficiency_api.py",
            "--jobs",
            "100000" if quick else "1000000",
        ],
        "record": [python, "benchmarks/bench_record.py", "--jobs", size],
        "what_if": [
            python,
            "benchmarks/bench_what_if.py",
            "--requests",
            "50" if quick else "500",
        ],
        "slurm_sync": [
            python,
            "benchmarks/bench_slurm_sync.py",
            "--projects",
            "100" if quick else "1000",
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--only", choices=sorted(benches(False)))
    args = parser.parse_args()
    failed = []
    for name, command in benches(args.quick).items():
        if args.only and name != args.only:
            continue
        print(f"== {name}: {' '.join(command[1:])}", flush=True)
        if subprocess.run(command, cwd=ROOT, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"missed target or failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()

"""``make bench``: every benchmark, each printing its figures and its ratio to a baseline
measured in the same run. Options are passed through, e.g. ``make bench BENCH_ARGS=--quick``."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--only", choices=["charging", "import", "balance", "overhead"])
    args = parser.parse_args()
    size = "100000" if args.quick else "1000000"
    big = "1000000" if args.quick else "10000000"
    benches = {
        "charging": [sys.executable, "benchmarks/bench_charging.py", "--jobs", size],
        "import": [sys.executable, "benchmarks/bench_import.py", "--lines", size],
        "balance": [sys.executable, "benchmarks/bench_balance.py", "--jobs", big],
        "overhead": [sys.executable, "benchmarks/bench_overhead.py"],
    }
    failed = []
    for name, command in benches.items():
        if args.only and name != args.only:
            continue
        print(f"== {name}: {' '.join(command[1:])}", flush=True)
        if subprocess.run(command, cwd=ROOT, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"missed target or failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()

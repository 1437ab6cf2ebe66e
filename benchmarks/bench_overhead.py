"""The true-overhead sweep (canonical units, DESIGN section 5) on one month of synthetic jobs.

    python benchmarks/bench_overhead.py [--jobs N] [--nodes K] [--seed S] [--target SECONDS]

N synthetic jobs (default 1,000,000; fixed seed) on K nodes (default 1,000: nine in ten CPU nodes
of 128 cores and 245,000 MiB, one in ten GPU nodes of 64 cores, 8 GPUs and 245,000 MiB) over
one month. Jobs are laid out in lanes (a slice of a node that runs one job after another, with
gaps) so that nodes are partly full, as on a real machine; one CPU lane in four is shared by
groups of four nodes and carries multi-node jobs (``nid[0004-0007]``, totals split evenly). Each
job is a ``NodeJob`` with a node list, as the integrator will pass them.

Timed: ``true_overhead_report`` over the month in hourly buckets (node list expansion with
python-hostlist, the event sort and the sweep), CPU time of this process; wall time is printed
too. Building the job objects is reported separately and not counted. Target: 30 s; the exit
status is 1 if the report disagrees with the generator's totals (allocated core-seconds,
histogram, series) and 2 if the target is missed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from any directory

from accounting.canonical import (
    NodeJob,
    NodeResources,
    OverheadPartition,
    OverheadReport,
    true_overhead_report,
)
from accounting.peak import epoch_seconds, from_epoch_seconds

TARGET_SECONDS = 30.0
MONTH_START = datetime(2024, 3, 1, tzinfo=UTC)
MONTH_END = datetime(2024, 4, 1, tzinfo=UTC)
CPU_NODE = NodeResources(cores=128, memory_mb=245000)
GPU_NODE = NodeResources(cores=64, memory_mb=245000, gpus=8)
GROUP = 4  # nodes sharing a multi-node lane

# (node indices, cores, memory MiB, GPUs per node) of one lane
Lane = tuple[tuple[int, ...], int, int, int]


def node_name(index: int) -> str:
    return f"nid{index:04d}"


def nodelist(nodes: Sequence[int]) -> str:
    if len(nodes) == 1:
        return node_name(nodes[0])
    return f"nid[{nodes[0]:04d}-{nodes[-1]:04d}]"  # the lanes hold consecutive nodes


def partitions(node_count: int) -> tuple[OverheadPartition, OverheadPartition]:
    gpu_nodes = max(1, node_count // 10)
    cpu_nodes = node_count - gpu_nodes
    return (
        OverheadPartition("work", f"nid[0000-{cpu_nodes - 1:04d}]", CPU_NODE),
        OverheadPartition("gpu", f"nid[{cpu_nodes:04d}-{node_count - 1:04d}]", GPU_NODE),
    )


def lanes(node_count: int) -> list[Lane]:
    """Slices of nodes that each run one job at a time: never more than a node holds."""
    gpu_nodes = max(1, node_count // 10)
    cpu_nodes = node_count - gpu_nodes
    result: list[Lane] = []
    for first in range(0, cpu_nodes, GROUP):
        group = tuple(range(first, min(first + GROUP, cpu_nodes)))
        result.append((group, 32, 61250, 0))  # shared by the group: multi-node jobs
        for node in group:
            result.extend(((node,), 32, 61250, 0) for _ in range(3))
    for node in range(cpu_nodes, node_count):
        result.extend(((node,), 8, 30625, 1) for _ in range(8))
    return result


def make_jobs(count: int, node_count: int, seed: int) -> tuple[list[NodeJob], int]:
    """``count`` jobs in lanes over the month, and their allocated core-seconds in the month."""
    rng = random.Random(seed)
    month_start, month_end = epoch_seconds(MONTH_START), epoch_seconds(MONTH_END)
    all_lanes = lanes(node_count)
    cycle = len(all_lanes) * (month_end - month_start) // count  # mean job + gap per lane
    jobs: list[NodeJob] = []
    core_seconds = 0
    lane_clock = [month_start - rng.randrange(cycle) for _ in all_lanes]
    while len(jobs) < count:
        for number, (nodes, lane_cores, lane_memory, lane_gpus) in enumerate(all_lanes):
            if len(jobs) >= count:
                break
            start = lane_clock[number] + rng.randrange(cycle // 4)  # gap before the job
            end = start + rng.randrange(60, cycle * 3 // 2)
            lane_clock[number] = end
            used = nodes if len(nodes) == 1 else nodes[: rng.randint(1, len(nodes))]
            cores = rng.randint(1, lane_cores)
            if rng.random() < 0.3:  # memory-heavy
                memory = rng.randint(0, lane_memory)
            else:  # about the cores' share, Slurm's default
                memory = cores * lane_memory // lane_cores
            gpus = rng.randint(0, lane_gpus)
            jobs.append(
                NodeJob(
                    job_id=str(len(jobs)),
                    start=from_epoch_seconds(start),
                    end=from_epoch_seconds(end),
                    nodelist=nodelist(used),
                    cores=cores * len(used),
                    memory_mb=memory * len(used),
                    gpus=gpus * len(used),
                )
            )
            inside = min(end, month_end) - max(start, month_start)
            if inside > 0:
                core_seconds += cores * len(used) * inside
    return jobs, core_seconds


def check(report: OverheadReport, node_count: int, core_seconds: int) -> list[str]:
    """Disagreements between the report and what the generator knows."""
    problems = []
    allocated = sum(p.allocated.core_seconds for p in report.partitions.values())
    if allocated != core_seconds:
        problems.append(f"allocated core-seconds {allocated} != generated {core_seconds}")
    window = epoch_seconds(MONTH_END) - epoch_seconds(MONTH_START)
    node_seconds = sum(sum(p.histogram.values()) for p in report.partitions.values())
    if node_seconds != node_count * window:
        problems.append(f"histogram holds {node_seconds} node-seconds, not {node_count * window}")
    for partition in report.partitions.values():
        from_histogram = sum(units * seconds for units, seconds in partition.histogram.items())
        if from_histogram != partition.unit_seconds:
            problems.append(f"{partition.name}: histogram and series disagree")
    if report.unplaced:
        problems.append(f"{len(report.unplaced)} jobs unplaced, e.g. {report.unplaced[0]}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="synthetic jobs (1,000,000)")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes (1,000)")
    parser.add_argument("--seed", type=int, default=20240301)
    parser.add_argument("--target", type=float, default=TARGET_SECONDS, help="seconds (30)")
    options = parser.parse_args(argv)
    if options.jobs < 1 or options.nodes < 10:
        parser.error("--jobs must be at least 1 and --nodes at least 10")

    started = time.process_time()
    jobs, core_seconds = make_jobs(options.jobs, options.nodes, options.seed)
    built = time.process_time() - started
    print(f"built {len(jobs):,} jobs on {options.nodes:,} nodes in {built:.1f} s (not timed)")

    started, wall_started = time.process_time(), time.perf_counter()
    report = true_overhead_report(
        jobs=jobs, partitions=partitions(options.nodes), start=MONTH_START, end=MONTH_END
    )
    seconds = time.process_time() - started
    wall_seconds = time.perf_counter() - wall_started

    for partition in report.partitions.values():
        hours = partition.unit_seconds / 3600
        rates = ", ".join(
            f"{name} {float(rate):.0%}" if rate is not None else f"{name} -"
            for name, rate in zip(("cores", "memory", "gpus"), partition.fair_rates, strict=True)
        )
        print(
            f"{partition.name}: {partition.node_count} nodes, {hours:,.0f} unit-hours of true "
            f"overhead, {len(partition.buckets)} hourly buckets, fair rates {rates}"
        )
    problems = check(report, options.nodes, core_seconds)
    for problem in problems:
        print(f"MISMATCH: {problem}")
    verdict = "met" if seconds <= options.target else "MISSED"
    print(
        f"sweep of {len(jobs):,} jobs / {options.nodes:,} nodes / one month: {seconds:.1f} s CPU, "
        f"{wall_seconds:.1f} s wall (target {options.target:.0f} s CPU: {verdict})"
    )
    if problems:
        return 1
    return 0 if seconds <= options.target else 2


if __name__ == "__main__":
    sys.exit(main())

"""The true-overhead sweep (canonical units, DESIGN section 5) on one month of synthetic jobs.

    python benchmarks/bench_overhead.py [--jobs N] [--nodes K] [--seed S] [--target SECONDS]
                                        [--portal]

N synthetic jobs (default 1,000,000; fixed seed) on K nodes (default 1,000: nine in ten CPU nodes
of 128 cores and 245,000 MiB, one in ten GPU nodes of 64 cores, 8 GPUs and 245,000 MiB) over
one month. Jobs are laid out in lanes (a slice of a node that runs one job after another, with
gaps) so that nodes are partly full, as on a real machine; one CPU lane in four is shared by
groups of four nodes and carries multi-node jobs (``nid[0004-0007]``, totals split evenly). Each
job is a ``NodeJob`` with a node list, as the integrator will pass them.

Timed: ``true_overhead_report`` over the month in hourly buckets (node list expansion with
python-hostlist, the event sort and the sweep), CPU time of this process, first without and then
with per-job fair shares (the ratio of the two is printed); wall time is printed too. Building
the job objects is reported separately and not counted. Target: 30 s for each; the exit status
is 1 if a report disagrees with the generator's totals (allocated core-seconds, histogram,
series; with fair shares: the jobs' billed shares must add up to each partition's billable
total and never be less than what the job held) and 2 if the target is missed.

``--portal`` also times the portal's path on a throwaway PostgreSQL database (``BENCH_PG``,
default ``postgres://postgres@127.0.0.1:5432``): the same jobs are copied into the ledger, then
``overhead_run_compute`` reads them, sweeps with fair shares and stores the partition results and
one ``JobFairShare`` per job (COPY), in wall time; the baseline is reading the same job rows
alone with the same query. Target: 120 s.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from any directory

from accounting.utilisation.canonical import (
    NodeJob,
    NodeResources,
    OverheadPartition,
    OverheadReport,
    true_overhead_report,
)
from accounting.utilisation.peak import epoch_seconds, from_epoch_seconds

TARGET_SECONDS = 30.0
PORTAL_TARGET_SECONDS = 120.0
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from any directory
from benchmarks.pg import database_create, database_drop  # noqa: E402

DB = "portal_bench_overhead"
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


def check_fair_shares(report: OverheadReport) -> list[str]:
    """Disagreements between the jobs' fair shares and the partitions' billable totals."""
    problems = []
    fields = ("core_seconds", "memory_mb_seconds", "gpu_seconds")
    billed = [0, 0, 0]
    for share in report.fair_shares:
        amounts = (
            share.billed_core_seconds,
            share.billed_memory_mb_seconds,
            share.billed_gpu_seconds,
        )
        held = (
            share.allocated_core_seconds, share.allocated_memory_mb_seconds,
            share.allocated_gpu_seconds,
        )  # fmt: skip
        if any(amount < allocated for amount, allocated in zip(amounts, held, strict=True)):
            problems.append(f"job {share.job_id} is billed less than it held")
            break
        for index, amount in enumerate(amounts):
            billed[index] += amount
    for index, name in enumerate(fields):
        billable = sum(getattr(p.billable, name) for p in report.partitions.values())
        if billed[index] != billable:
            problems.append(f"billed {name} {billed[index]} != billable {billable}")
    return problems


PORTAL_SCRIPT = """
import time
from django.db import connection
from accounting.models import Cluster, Partition
from accounting.utilisation.overhead import _jobs, overhead_run_compute
from projects.models import Project
from benchmarks.bench_overhead import MONTH_END, MONTH_START, make_jobs

jobs_count, nodes, seed = {jobs}, {nodes}, {seed}
cluster = Cluster.objects.get(name="bench")
work, gpu = Partition.objects.get(name="work"), Partition.objects.get(name="gpu")
project = Project.objects.get(code="bench")
first_gpu_node = nodes - max(1, nodes // 10)
jobs, _ = make_jobs(jobs_count, nodes, seed)
started = time.perf_counter()
columns = ", ".join((
    "cluster_id", "job_id_raw", "run", "job_id", "job_name", "array_job_id", "array_task_id",
    "het_job_id", "project_id", "username", "partition_id", "qos", "state", "state_raw",
    "exit_code", "start", '"end"', "elapsed_seconds", "nnodes", "cpus", "memory_mb", "gpus",
    "nodelist", "charge_state", "service_units", "pending_service_units", "dominant_resource",
    "energy_wh", "source_hash", "updated_at",
))
with connection.cursor() as cursor, cursor.cursor.copy(
    f"COPY accounting_job ({{columns}}) FROM STDIN"
) as copy:
    for job in jobs:
        first_node = int(job.nodelist.removeprefix("nid").lstrip("[")[:4])
        partition = gpu if first_node >= first_gpu_node else work
        copy.write_row((
            cluster.pk, job.job_id, "", job.job_id, "bench", "", "", "", project.pk, "u",
            partition.pk, "normal", "COMPLETED", "COMPLETED", "0:0", job.start, job.end,
            job.end_seconds - job.start_seconds, 1, job.cores, job.memory_mb, job.gpus,
            job.nodelist, "charged", 0, 0, "cores", 0, "", job.end,
        ))
with connection.cursor() as cursor:
    cursor.execute("ANALYZE accounting_job")
print(f"LOADED {{time.perf_counter() - started:.1f}}")
del jobs
started = time.perf_counter()
rows = sum(1 for _ in _jobs(cluster=cluster, start=MONTH_START, end=MONTH_END, now=MONTH_END))
print(f"READ {{time.perf_counter() - started:.2f}} {{rows}}")
started = time.perf_counter()
run = overhead_run_compute(cluster=cluster, start=MONTH_START, end=MONTH_END, step="hour")
print(f"RUN {{time.perf_counter() - started:.2f}} {{run.status}} {{run.jobs_seen}} "
      f"{{run.fair_shares.count()}} {{run.error or '-'}}")
"""

SETUP_SCRIPT = """
from decimal import Decimal
from django.contrib.auth.models import User
from accounting.models import Cluster, Partition, PartitionVersion
from projects.models import Project
nodes = {nodes}
gpus = max(1, nodes // 10)
cluster = Cluster.objects.create(name="bench")
for name, nodelist, sockets, gpu_count in (
    ("work", f"nid[0000-{{nodes - gpus - 1:04d}}]", 2, 0),
    ("gpu", f"nid[{{nodes - gpus:04d}}-{{nodes - 1:04d}}]", 1, 8),
):
    partition = Partition.objects.create(cluster=cluster, name=name)
    PartitionVersion.objects.create(
        partition=partition, number=1, effective_from="2024-01-01T00:00:00Z", nodelist=nodelist,
        node_count=nodes, sockets=sockets, cores_per_socket=64, memory_mb=245000, gpus=gpu_count,
        cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(280 if gpu_count else 0),
        derived_weight=Decimal(128),
    )
Project.objects.create(code="bench", title="bench", pi=User.objects.create(username="bench"))
"""


def portal_path(jobs: int, nodes: int, seed: int) -> tuple[float, float, str] | None:
    """(baseline read seconds, overhead_run_compute seconds, run summary) on PostgreSQL."""
    env = database_create(DB)
    manage = [sys.executable, "manage.py"]
    try:
        subprocess.run(
            [*manage, "shell", "-c", SETUP_SCRIPT.format(nodes=nodes)], cwd=ROOT, env=env,
            check=True, capture_output=True,
        )  # fmt: skip
        script = PORTAL_SCRIPT.format(jobs=jobs, nodes=nodes, seed=seed)
        done = subprocess.run(
            [*manage, "shell", "-c", script], cwd=ROOT, env=env, check=True, capture_output=True,
            text=True,
        )  # fmt: skip
        lines = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line}
        print(f"portal: copied {jobs:,} jobs into the ledger in {lines['LOADED'][0]} s (not timed)")
        read_seconds, run_seconds = float(lines["READ"][0]), float(lines["RUN"][0])
        return read_seconds, run_seconds, " ".join(lines["RUN"][1:])
    finally:
        database_drop(DB)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="synthetic jobs (1,000,000)")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes (1,000)")
    parser.add_argument("--seed", type=int, default=20240301)
    parser.add_argument("--target", type=float, default=TARGET_SECONDS, help="seconds (30)")
    parser.add_argument(
        "--portal", action="store_true", help="also time overhead_run_compute on PostgreSQL"
    )
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
    verdict = "met" if seconds <= options.target else "MISSED"
    print(
        f"sweep of {len(jobs):,} jobs / {options.nodes:,} nodes / one month: {seconds:.1f} s CPU, "
        f"{wall_seconds:.1f} s wall (target {options.target:.0f} s CPU: {verdict})"
    )
    del report

    started, wall_started = time.process_time(), time.perf_counter()
    shared = true_overhead_report(
        jobs=jobs, partitions=partitions(options.nodes), start=MONTH_START, end=MONTH_END,
        fair_shares=True,
    )  # fmt: skip
    shares_seconds = time.process_time() - started
    shares_wall = time.perf_counter() - wall_started
    problems += check_fair_shares(shared)
    shares_verdict = "met" if shares_seconds <= options.target else "MISSED"
    print(
        f"with fair shares of {len(shared.fair_shares):,} jobs: {shares_seconds:.1f} s CPU, "
        f"{shares_wall:.1f} s wall, {shares_seconds / seconds:.2f}x the sweep alone "
        f"(target {options.target:.0f} s CPU: {shares_verdict})"
    )
    missed = seconds > options.target or shares_seconds > options.target
    del shared, jobs

    if options.portal:
        measured = portal_path(options.jobs, options.nodes, options.seed)
        if measured is not None:
            read_seconds, run_seconds, summary = measured
            portal_verdict = "met" if run_seconds <= PORTAL_TARGET_SECONDS else "MISSED"
            print(
                f"portal overhead_run_compute (read, sweep with fair shares, store): "
                f"{run_seconds:.1f} s wall; reading the job rows alone {read_seconds:.1f} s, "
                f"ratio {run_seconds / read_seconds:.1f}x (target {PORTAL_TARGET_SECONDS:.0f} s: "
                f"{portal_verdict}); run {summary}"
            )
            if not summary.startswith("done"):
                problems.append(f"the portal run did not finish: {summary}")
            missed = missed or run_seconds > PORTAL_TARGET_SECONDS
    for problem in problems:
        print(f"MISMATCH: {problem}")
    if problems:
        return 1
    return 2 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

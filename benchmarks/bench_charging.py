"""Throughput of the charging engine against a bare loop doing the same Decimal arithmetic.

    python benchmarks/bench_charging.py [--jobs N] [--repeat R] [--seed S]

N synthetic jobs (default 1,000,000; fixed seed) on Setonix-like CPU and GPU partitions, 1-4 nodes,
varied cores, memory, GPUs and time, arrive as sacct-style totals. The engine path is what the
import does: ``split_evenly`` then ``charge`` (energy model), which also validates the usage and
works out the per-node fractions, the dominant resource and the energy estimate. The bare loop
works out the same numbers inline with plain tuples (SU, energy estimate, hours, per-node
fractions, dominant resource) by the same exact arithmetic: ceil of eq 9, max of eq 1, one exact
division rounded half-even to 6 places. Target: the engine within 3x of the bare loop; the exit
status is 1 if the two disagree on any total and 2 if the target is missed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Sequence
from decimal import ROUND_DOWN, Context, Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from any directory

from accounting.clusters.charging import PartitionSpec, charge, energy_weight, split_evenly

TARGET_RATIO = 3

# (partition, nodes, cores, memory_mb, gpus, elapsed_seconds), totals over the job as sacct gives
Job = tuple[int, int, int, Decimal, int, int]

SPECS = (
    PartitionSpec(
        name="work", sockets=2, cores_per_socket=64, memory_mb=245000, cpu_tdp_watts=Decimal(280)
    ),
    PartitionSpec(
        name="highmem", sockets=2, cores_per_socket=64, memory_mb=980000, cpu_tdp_watts=Decimal(280)
    ),
    PartitionSpec(
        name="gpu",
        sockets=1,
        cores_per_socket=64,
        memory_mb=245000,
        gpus=8,
        cpu_tdp_watts=Decimal(280),
        gpu_tdp_watts=Decimal(280),
    ),
)


def make_jobs(count: int, seed: int) -> list[Job]:
    """Deterministic synthetic jobs: mostly CPU, a third GPU, a few memory-heavy or uneven."""
    rng = random.Random(seed)
    jobs: list[Job] = []
    shared: dict[int, Decimal] = {}  # one Decimal per distinct memory figure keeps 1M jobs small
    for _ in range(count):
        partition = rng.choices((0, 1, 2), weights=(6, 1, 3))[0]
        spec = SPECS[partition]
        nodes = rng.choices((1, 2, 3, 4), weights=(10, 3, 1, 2))[0]
        gpus_per_node = rng.randint(1, spec.gpus) if spec.gpus else 0
        if gpus_per_node:
            cores_per_node = gpus_per_node * spec.cores // spec.gpus
        else:
            cores_per_node = rng.choice((1, 2, 4, 8, 16, 32, 64, 128, rng.randint(1, spec.cores)))
        if rng.random() < 0.3:  # memory-heavy: any amount up to the node's
            memory_per_node = rng.randint(0, spec.memory_mb)
        else:  # the cores' share, Slurm's default
            memory_per_node = cores_per_node * spec.memory_mb // spec.cores
        cores = cores_per_node * nodes
        if nodes > 1 and rng.random() < 0.1:  # ntasks that do not divide over the nodes
            cores -= rng.randint(1, min(cores_per_node, nodes - 1))
        elapsed_seconds = rng.randint(1, 2 * 86400)
        memory_total = memory_per_node * nodes
        memory_mb = shared.setdefault(memory_total, Decimal(memory_total))
        jobs.append((partition, nodes, cores, memory_mb, gpus_per_node * nodes, elapsed_seconds))
    return jobs


Totals = tuple[Decimal, Decimal]  # summed SU and energy (Wh), to check that both loops agree


def run_engine(jobs: Sequence[Job]) -> Totals:
    """What the import does per job: split the totals, charge with the energy model."""
    specs = SPECS
    service_units = energy_wh = Decimal(0)
    for partition, nodes, cores, memory_mb, gpus, elapsed_seconds in jobs:
        usage = split_evenly(nodes=nodes, cores=cores, memory_mb=memory_mb, gpus=gpus)
        result = charge(specs[partition], usage, elapsed_seconds=elapsed_seconds)
        service_units += result.service_units
        energy_wh += result.energy_wh
    return service_units, energy_wh


def _round_to_quantum(numerator: int, denominator: int) -> Decimal:
    quanta, rest = divmod(numerator * 1_000_000, denominator)
    if 2 * rest > denominator or (2 * rest == denominator and quanta & 1):
        quanta += 1
    return Decimal(quanta).scaleb(-6)


def run_bare(jobs: Sequence[Job]) -> Totals:
    """The same numbers inline: SU, energy, hours, per-node fractions and dominant resource.

    No dataclasses, no validation, no per-spec tables; plain tuples and Decimal arithmetic.
    """
    split_context = Context(prec=28, rounding=ROUND_DOWN)
    constants = []
    for spec in SPECS:
        gpu_scale = max(spec.gpus, 1)
        weight = energy_weight(spec).as_integer_ratio()
        tdp_watts = spec.node_gpu_tdp_watts if spec.gpus else spec.node_cpu_tdp_watts
        constants.append(
            (
                spec.cores,
                spec.gpus,
                gpu_scale,
                spec.memory_mb,
                weight[0],
                weight[1] * 3600 * spec.cores * gpu_scale,
                tdp_watts.as_integer_ratio(),
            )
        )
    total_service_units = total_energy_wh = Decimal(0)
    for partition, nodes, cores, memory_mb, gpus, elapsed_seconds in jobs:
        node_cores, node_gpus, gpu_scale, node_memory, weight_numerator, denominator, tdp = (
            constants[partition]
        )
        cores_i: Decimal | int
        gpus_i: Decimal | int
        if nodes == 1:
            cores_i, memory_i, gpus_i = cores, memory_mb, gpus
        else:
            cores_i = cores // nodes if cores % nodes == 0 else split_context.divide(cores, nodes)
            memory_i = split_context.divide(memory_mb, nodes)
            gpus_i = gpus // nodes if gpus % nodes == 0 else split_context.divide(gpus, nodes)
        quotient, remainder = divmod(memory_i * node_cores, node_memory)  # eq 9
        memory_equivalents = int(quotient) + 1 if remainder else int(quotient)
        core_units = cores_i * gpu_scale
        gpu_units = gpus_i * node_cores
        memory_units = memory_equivalents * gpu_scale
        share_units = max(core_units, gpu_units, memory_units)  # eq 1
        fractions = (
            Decimal(cores_i) / node_cores,
            Decimal(memory_equivalents) / node_cores,
            Decimal(gpus_i) / node_gpus if node_gpus else Decimal(0),
        )
        node_fractions = (fractions,) * nodes
        dominant = "gpus"
        if core_units > gpu_units:
            dominant = "cores"
        if memory_units > max(core_units, gpu_units):
            dominant = "memory"
        share_numerator, share_denominator = (share_units * nodes).as_integer_ratio()
        service_units = _round_to_quantum(
            weight_numerator * elapsed_seconds * share_numerator, denominator * share_denominator
        )
        energy_wh = _round_to_quantum(
            tdp[0] * elapsed_seconds * share_numerator,
            tdp[1] * 3600 * node_cores * gpu_scale * share_denominator,
        )
        hours = Decimal(elapsed_seconds) / 3600
        result = (service_units, hours, node_fractions, dominant, energy_wh)
        total_service_units += result[0]
        total_energy_wh += result[4]
    return total_service_units, total_energy_wh


def time_both(jobs: Sequence[Job], repeat: int) -> tuple[float, float, Totals, Totals]:
    """Median CPU seconds of the engine and of the bare loop, run alternately.

    CPU time of this process (not wall time) and alternation keep other load on the machine from
    favouring either side.
    """
    engine_times, bare_times = [], []
    engine_totals = bare_totals = (Decimal(0), Decimal(0))
    for _ in range(repeat):
        started = time.process_time()
        engine_totals = run_engine(jobs)
        engine_times.append(time.process_time() - started)
        started = time.process_time()
        bare_totals = run_bare(jobs)
        bare_times.append(time.process_time() - started)
    return (
        statistics.median(engine_times),
        statistics.median(bare_times),
        engine_totals,
        bare_totals,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="synthetic jobs (1,000,000)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions; the median counts")
    parser.add_argument("--seed", type=int, default=20240601)
    options = parser.parse_args(argv)
    if options.jobs < 1 or options.repeat < 1:
        parser.error("--jobs and --repeat must be positive")

    started = time.perf_counter()
    jobs = make_jobs(options.jobs, options.seed)
    weights = ", ".join(f"{spec.name} {energy_weight(spec)}" for spec in SPECS)
    print(
        f"generated {len(jobs):,} jobs in {time.perf_counter() - started:.1f} s "
        f"(seed {options.seed}; SU per node-hour: {weights})"
    )

    engine_seconds, bare_seconds, engine_totals, bare_totals = time_both(jobs, options.repeat)
    if engine_totals != bare_totals:
        print(f"MISMATCH: engine (SU, Wh) {engine_totals}, bare loop {bare_totals}")
        return 1
    engine_rate, bare_rate = len(jobs) / engine_seconds, len(jobs) / bare_seconds
    ratio = bare_rate / engine_rate
    print(
        f"total charged: {engine_totals[0]:,} SU, {engine_totals[1]:,} Wh "
        "(engine and bare loop agree)"
    )
    print(
        f"charging: engine {engine_rate:,.0f} charges/s, bare loop {bare_rate:,.0f} charges/s, "
        f"ratio {ratio:.2f} (target <= {TARGET_RATIO}; median of {options.repeat}, CPU time)"
    )
    return 0 if ratio <= TARGET_RATIO else 2


if __name__ == "__main__":
    sys.exit(main())

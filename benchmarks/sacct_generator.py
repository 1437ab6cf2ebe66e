"""Generate realistic ``sacct --parsable2`` output for benchmarks and fault tests.

The shape follows the real sample in examples/sacct (Slurm 22.05, a mini-Setonix): the same
columns, each allocation followed by its steps (.batch, .extern, numbered srun steps), array
tasks, heterogeneous jobs, multi-node jobs, GPU jobs, memory-heavy jobs, every final state,
and memory printed with Slurm's unit suffixes. Deterministic for a given seed.

Jobs are scheduled as Slurm would place them: first come, first served onto nodes with the
cores, memory and GPUs free, so no node ever holds more than it has (the utilisation of the
output never exceeds 100 %). The jobs on a node also never hold more than the whole node in
eq 1's max fraction (the share of a node the SU charge and a shared cost model count): a job
that takes most of a node's memory keeps others off its cores, so the jobs on a node never
pay for more than the node. Run times are scaled to the submission rate so that the workload
asks for about :data:`OFFERED_LOAD` of each partition, and every job's time limit is at least
its run time (a TIMEOUT job ran exactly its limit).

    python benchmarks/sacct_generator.py OUT.psv --lines 1000000 [--seed 42]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import random
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script too

from accounting.clusters.charging import PartitionSpec, node_share_even

HEADER = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|Elapsed|"
    "ElapsedRaw|NNodes|NCPUS|NodeList|ReqTRES|AllocTRES|ReqMem|ConsumedEnergyRaw|TimelimitRaw"
)
USAGE_HEADER = "|TotalCPU|MaxRSS|TRESUsageInTot|TRESUsageInMax|TRESUsageInAve"
USERS = {
    "alice": ("pawsey0001", "pawsey0003"),
    "bob": ("pawsey0002", "pawsey0004"),
    "carol": ("pawsey0003", "pawsey0004"),
    "root": ("pawsey0001", "pawsey0002"),
}
# name, node prefix, node numbers, cores, memory MB, gpus
PARTITIONS = {
    "work": ("nid", range(1001, 1005), 128, 245000, 0),
    "gpu": ("nid", range(2001, 2003), 64, 245000, 8),
}
STATES = (
    ["COMPLETED"] * 80 + ["FAILED"] * 8 + ["TIMEOUT"] * 4 + ["CANCELLED by 20001"] * 4
    + ["OUT_OF_MEMORY"] * 2 + ["NODE_FAIL"] + ["PREEMPTED"]
)  # fmt: skip
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
# Bumped when the same seed gives other output: benchmark files cached under the old one go.
GENERATOR_VERSION = 3
OFFERED_LOAD = 0.75
# What one job asks of its partition on average (cores of work, GPUs of gpu: the resources
# :func:`_shape` draws), with the share of jobs the partition gets: the mean run time that
# offers OFFERED_LOAD of the partition follows (:func:`_mean_run_seconds`).
MEAN_DEMAND = {"work": (0.75, 0.35 * 1 + 0.40 * 51 + 0.15 * 128 + 0.10 * 3 * 128),
               "gpu": (0.25, 1.05 * (1 + 1 + 2 + 2 + 4 + 8) / 6)}  # fmt: skip
RUN_TIME_SIGMA = 1.5  # of the lognormal run time: many short jobs and a long tail
TIME_LIMITS_MINUTES = (5, 10, 15, 30, 60, 120, 240, 480, 720, 1440, 2880)


def _memory(mb: int) -> str:
    """Slurm's printing: the largest unit that keeps the value a multiple of 1/2 (…G, …M)."""
    if mb % 1024 == 0:
        gigabytes = mb // 1024
        return f"{gigabytes // 1024}T" if gigabytes % 1024 == 0 else f"{gigabytes}G"
    if mb % 512 == 0:
        return f"{mb / 1024:.2f}G"
    return f"{mb}M"


def _step_usage(
    rng: random.Random, steps: list[str], core_seconds: int, memory_mb: int
) -> tuple[list[float], list[int]]:
    """Each step's CPU seconds and memory peak (KiB): the job burns a share of the core-seconds
    it held (most jobs most of it, some little), the batch script a tenth when there are srun
    steps and all of it when there are none, the extern step nothing."""
    burnt = min(rng.betavariate(2, 1.2), 1.0) * core_seconds
    numbered = len(steps) - 2
    cpu = [
        0.0 if step == "extern"
        else burnt * (0.1 if numbered else 1.0) if step == "batch"
        else burnt * 0.9 / numbered
        for step in steps
    ]  # fmt: skip
    return cpu, [int(rng.uniform(0.02, 0.95) * memory_mb * 1024) for _ in steps]


def _cpu_time(seconds: float) -> str:
    """A TotalCPU as sacct prints it: MM:SS.mmm under an hour, [D-]HH:MM:SS above."""
    if seconds < 3600:
        return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}.{int(seconds * 1000) % 1000:03d}"
    return _elapsed(int(seconds))


def _elapsed(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _nodelist(prefix: str, numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]}"
    return f"{prefix}[{','.join(str(n) for n in numbers)}]"


def _shape(rng: random.Random, partition: str) -> tuple[int, int, int, int]:
    """nodes, cpus, memory MB, gpus of one allocation."""
    _, numbers, cores, memory, gpus = PARTITIONS[partition]
    kind = rng.random()
    if partition == "gpu":
        nodes = 2 if kind < 0.05 else 1
        per_node_gpus = rng.choice((1, 1, 2, 2, 4, 8))
        cpus = per_node_gpus * 8 * nodes
        mem = (memory // gpus) * per_node_gpus * nodes if rng.random() < 0.8 else 200 * 1024
        return nodes, cpus, mem, per_node_gpus * nodes
    if kind < 0.35:
        cpus = 1
        mem = 1914 if rng.random() < 0.8 else rng.choice((20, 60, 100)) * 1024
        return 1, cpus, mem, 0
    if kind < 0.75:
        cpus = rng.randint(2, 100)
        mem = cpus * 1914 if rng.random() < 0.7 else rng.randint(cpus, 120) * 1024
        return 1, cpus, min(mem, memory), 0
    if kind < 0.9:
        return 1, cores, 244992, 0
    nodes = rng.randint(2, len(numbers))
    return nodes, cores * nodes, 244992 * nodes, 0


@cache
def _share_units(partition: str, cores: int, memory_mb: int, gpus: int) -> int:
    """A node's share (eq 1's max fraction, by the charging engine) in whole units of
    1 / (cores x max(GPUs, 1)) of the node, the units :func:`_node_capacity` counts."""
    _, _, node_cores, node_memory, node_gpus = PARTITIONS[partition]
    spec = PartitionSpec(
        name=partition, sockets=1, cores_per_socket=node_cores, memory_mb=node_memory,
        gpus=node_gpus, cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(280 if node_gpus else 0),
    )  # fmt: skip
    share = node_share_even(spec, nodes=1, cores=cores, memory_mb=memory_mb, gpus=gpus)
    units = share * node_cores * max(node_gpus, 1)
    assert units.denominator == 1, units  # whole cores and GPUs, memory in core-equivalents
    return int(units)


def _node_capacity(cores: int, memory_mb: int, gpus: int) -> tuple[int, int, int, int]:
    """Cores, memory MB, GPUs and share units (:func:`_share_units`) of a whole node."""
    return cores, memory_mb, gpus, cores * max(gpus, 1)


class _Node:
    """One node's capacity and what it holds over time: a step function, ``used[i]`` (cores,
    memory MB, GPUs, share units) held from ``times[i]`` to ``times[i + 1]`` (epoch seconds)."""

    __slots__ = ("capacity", "number", "times", "used")

    def __init__(self, number: int, cores: int, memory_mb: int, gpus: int) -> None:
        self.number = number
        self.capacity = _node_capacity(cores, memory_mb, gpus)
        self.times = [0]
        self.used = [(0, 0, 0, 0)]

    def forget_before(self, moment: int) -> None:
        """Drop the steps that ended by ``moment``: no job will start earlier."""
        index = bisect.bisect_right(self.times, moment) - 1
        if index > 0:
            del self.times[:index], self.used[:index]

    def busy_until(self, begin: int, end: int, need: tuple[int, int, int, int]) -> int:
        """0 when ``need`` is free on the node all through ``[begin, end)``; otherwise the
        end of the first step that lacks it, the earliest a new try could succeed."""
        cores = self.capacity[0] - need[0]
        memory = self.capacity[1] - need[1]
        gpus = self.capacity[2] - need[2]
        share = self.capacity[3] - need[3]
        times, used = self.times, self.used
        index = bisect.bisect_right(times, begin) - 1
        while index < len(times) and times[index] < end:
            held = used[index]
            if held[0] > cores or held[1] > memory or held[2] > gpus or held[3] > share:
                return times[index + 1]  # the last step holds nothing: never out of range
            index += 1
        return 0

    def hold(self, begin: int, end: int, need: tuple[int, int, int, int]) -> None:
        first, last = self._step_at(begin), self._step_at(end)
        for index in range(first, last):
            held = self.used[index]
            self.used[index] = (
                held[0] + need[0],
                held[1] + need[1],
                held[2] + need[2],
                held[3] + need[3],
            )

    def _step_at(self, moment: int) -> int:
        """The index of the step starting at ``moment``, splitting the one it falls in."""
        index = bisect.bisect_right(self.times, moment) - 1
        if self.times[index] != moment:
            index += 1
            self.times.insert(index, moment)
            self.used.insert(index, self.used[index - 1])
        return index


def _place(
    rng: random.Random,
    nodes: list[_Node],
    count: int,
    need: tuple[int, int, int, int],
    earliest: int,
    seconds: int,
) -> tuple[int, list[_Node]]:
    """The first time at or after ``earliest`` when ``count`` nodes each have ``need`` (cores,
    memory, GPUs, share units) free for ``seconds``, and the nodes chosen: each job takes the
    first slot that fits around those placed before it (Slurm's backfill, with exact run
    times)."""
    begin = earliest
    while True:
        busy = [(node.busy_until(begin, begin + seconds, need), node) for node in nodes]
        free = [node for until, node in busy if not until]
        if len(free) >= count:
            return begin, sorted(rng.sample(free, count), key=lambda node: node.number)
        begin = min(until for until, _ in busy if until)


def _mean_run_seconds(partition: str, mean_gap_seconds: int) -> float:
    share, demand = MEAN_DEMAND[partition]
    _, numbers, cores, _, gpus = PARTITIONS[partition]
    capacity = len(numbers) * (gpus or cores)
    return OFFERED_LOAD * capacity * mean_gap_seconds / (share * demand)


def _run_time(
    rng: random.Random, partition: str, mean_gap_seconds: int, state: str
) -> tuple[int, int]:
    """Seconds run and the time limit in minutes: a limit the user chose above the run time,
    or for a TIMEOUT the limit the job ran into."""
    mean = _mean_run_seconds(partition, mean_gap_seconds)
    mu = math.log(mean) - RUN_TIME_SIGMA**2 / 2
    elapsed = int(rng.lognormvariate(mu, RUN_TIME_SIGMA)) + 1
    if state == "TIMEOUT":
        limit = max([m for m in TIME_LIMITS_MINUTES if m * 60 <= elapsed] or [1])
        return limit * 60, limit
    wanted = elapsed * rng.choice((1.2, 2, 4, 10)) / 60
    fitting = [m for m in TIME_LIMITS_MINUTES if m >= wanted]
    if not fitting:
        return min(elapsed, TIME_LIMITS_MINUTES[-1] * 60), TIME_LIMITS_MINUTES[-1]
    return elapsed, fitting[0]


def sacct_lines(
    *,
    lines: int,
    seed: int = 42,
    start: datetime | None = None,
    mean_gap_seconds: int = 20,
    now: datetime | None = None,
    allocations: bool = False,
    reserved: Sequence[tuple[datetime, datetime]] = (),
    usage: bool = False,
) -> Iterator[str]:
    """Yield the header and then ``lines`` data lines (allocations with their steps, or with
    ``allocations`` only allocations: what ``sacct --allocations``, a centre's usual import,
    prints).

    Jobs are submitted every ``mean_gap_seconds`` on average from ``start`` and start when
    their nodes have room (see the module's docstring); with ``now``, generation stops at jobs
    submitted later, jobs still pending at ``now`` are left out, and a job still running at
    ``now`` is printed as RUNNING with an Unknown end, as sacct does. ``reserved`` windows
    are the whole machine's (a Slurm reservation): no generated job runs in them, so other
    jobs imported for those hours (the real sample, in the demo) find the nodes free.
    With ``usage``, the lines add what each job used (:data:`USAGE_HEADER`'s columns, as the
    portal's default sacct command asks for them): TotalCPU on the allocation, the sum of its
    steps', and the memory peak on each step; drawn from a generator of their own, so the
    history itself is the same as without.
    """
    rng = random.Random(seed)
    used_rng = random.Random(seed + 1)
    clock = start or datetime(2026, 1, 1, tzinfo=UTC)
    fleet = {
        name: [_Node(number, cores, memory, gpus) for number in numbers]
        for name, (_, numbers, cores, memory, gpus) in PARTITIONS.items()
    }
    for begin, end in reserved:
        for node in (node for nodes in fleet.values() for node in nodes):
            node.hold(int(begin.timestamp()), int(end.timestamp()), node.capacity)
    job_id = 5_000_000
    yield HEADER + (USAGE_HEADER if usage else "") + "\n"
    produced = 0
    while produced < lines:
        user = rng.choice(tuple(USERS))
        account = rng.choice(USERS[user])
        partition = "gpu" if rng.random() < 0.25 else "work"
        prefix = PARTITIONS[partition][0]
        nodes, cpus, mem, gpus = _shape(rng, partition)
        clock += timedelta(seconds=rng.randint(1, 2 * mean_gap_seconds))
        submit = clock
        if now is not None and submit > now:
            return
        state = rng.choice(STATES)
        elapsed, time_limit = _run_time(rng, partition, mean_gap_seconds, state)
        earliest = int(submit.timestamp()) + rng.randint(0, 120)
        per_node = (cpus // nodes, mem // nodes, gpus // nodes)
        need = (*per_node, _share_units(partition, *per_node))
        for node in fleet[partition]:
            node.forget_before(int(submit.timestamp()))
        begins, chosen = _place(rng, fleet[partition], nodes, need, earliest, elapsed)
        for node in chosen:
            node.hold(begins, begins + elapsed, need)
        node_numbers = [node.number for node in chosen]
        start_at = datetime.fromtimestamp(begins, tz=UTC)
        end = start_at + timedelta(seconds=elapsed)
        if now is not None and start_at > now:
            continue  # still pending: sacct --state=... of finished and running jobs omits it
        running = now is not None and end > now
        if running:
            assert now is not None
            state = "RUNNING"
            elapsed = int((now - start_at).total_seconds())
        exit_code = "0:0" if state == "COMPLETED" else rng.choice(("1:0", "0:9", "0:15", "2:0"))
        job_id += 1
        shown_id = str(job_id)
        if rng.random() < 0.08:  # an array task
            shown_id = f"{job_id - rng.randint(0, 5)}_{rng.randint(0, 99)}"
        gres = f",gres/gpu={gpus}" if gpus else ""
        tres = f"billing={cpus},cpu={cpus}{gres},mem={_memory(mem)},node={nodes}"
        nodelist = _nodelist(prefix, node_numbers)
        times = (
            submit.strftime(TIME_FORMAT),
            start_at.strftime(TIME_FORMAT),
            "Unknown" if running else end.strftime(TIME_FORMAT),
        )
        common = f"{_elapsed(elapsed)}|{elapsed}|{nodes}|{cpus}|{nodelist}"
        steps = ["batch", "extern", *[str(n) for n in range(rng.choice((0, 0, 1, 2, 3)))]]
        step_cpu, peak_kib = (
            _step_usage(used_rng, steps, cpus * elapsed, mem) if usage else ([], [])
        )
        total_cpu = f"|{_cpu_time(sum(step_cpu))}||||" if usage else ""
        yield (
            f"{shown_id}|{job_id}|bench-{partition}|{user}|{account}|{partition}|normal|{state}|"
            f"{exit_code}|{times[0]}|{times[1]}|{times[2]}|{common}|{tres}|{tres}|{_memory(mem)}|"
            f"0|{time_limit}{total_cpu}\n"
        )
        produced += 1
        if allocations:
            continue
        step_tres = f"cpu={cpus}{gres},mem={_memory(mem)},node={nodes}"
        step_state = "RUNNING" if running else "COMPLETED"
        for number, step in enumerate(steps):
            if produced >= lines:
                break
            used = ""
            if usage:
                rss = f"{peak_kib[number]}K"
                tres_used = (
                    f"cpu={_elapsed(int(step_cpu[number]))},energy=0,fs/disk=4096,mem={rss},"
                    f"pages=0,vmem={rss}"
                )
                used = f"|{_cpu_time(step_cpu[number])}|{rss}|{tres_used}|{tres_used}|{tres_used}"
            yield (
                f"{shown_id}.{step}|{job_id}.{step}|{step}||{account}|||{step_state}|0:0|{times[1]}|"
                f"{times[1]}|{times[2]}|{common}||{step_tres}||0|{used}\n"
            )
            produced += 1


def write_sacct_file(
    path: Path, *, lines: int, seed: int = 42, cluster: str = "", **options: Any
) -> Path:
    """Write ``lines`` data lines (plus the header) to ``path``. ``cluster`` is informative."""
    with path.open("w") as out:
        out.writelines(sacct_lines(lines=lines, seed=seed, **options))
    return path


def _tres_list(tres: Mapping[str, str]) -> list[dict[str, Any]]:
    from accounting.clusters.units import parse_memory_mb

    items = []
    for key, value in tres.items():
        kind, _, name = key.partition("/")
        count = int(parse_memory_mb(value)) if kind == "mem" else int(value)
        items.append({"type": kind, "name": name, "id": 0, "count": count})
    return items


def _epoch(moment: datetime | None) -> dict[str, Any]:
    if moment is None:
        return {"set": True, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": int(moment.timestamp())}


def _json_exit(exit_code: str | None) -> dict[str, Any]:
    status, _, signal = (exit_code or "0:0").partition(":")
    if int(signal or 0):
        return {"status": ["SIGNALED"], "signal": {"id": {"set": True, "number": int(signal)}}}
    return {
        "status": ["SUCCESS" if status == "0" else "ERROR"],
        "return_code": {"set": True, "infinite": False, "number": int(status)},
    }


def write_sacct_json(psv: Path, path: Path, *, cluster: str = "setonix") -> Path:
    """Write the jobs of a generated ``--parsable2`` file as ``sacct --json`` would print them
    (data_parser v0.0.40 shapes, steps nested in their job): the JSON benchmark reads the very
    jobs the text benchmark reads."""
    from accounting.ledger.sacct import SacctRecord, parse_sacct

    def flush(out: Any, job: dict[str, Any] | None, first: bool) -> bool:
        if job is None:
            return first
        out.write(("" if first else ",\n") + json.dumps(job, separators=(",", ":")))
        return False

    with psv.open() as lines, path.open("w") as out:
        out.write('{"meta":{"plugin":{"data_parser":"v0.0.40"}},"errors":[],"jobs":[\n')
        job: dict[str, Any] | None = None
        first = True
        for record in parse_sacct(lines):
            assert isinstance(record, SacctRecord), record
            if record.kind == "step":
                assert job is not None
                job["steps"].append(
                    {
                        "step": {"id": record.job_id_raw, "name": record.job_name or ""},
                        "time": {
                            "start": _epoch(record.start),
                            "end": _epoch(record.end),
                            "elapsed": record.elapsed_seconds,
                        },
                        "state": [record.state],
                        "exit_code": _json_exit(record.exit_code),
                        "nodes": {"count": record.nnodes, "range": record.nodelist},
                        "tres": {"allocated": _tres_list(record.alloc_tres)},
                    }
                )
                continue
            first = flush(out, job, first)
            job = {
                "cluster": cluster,
                "job_id": int(record.job_id_raw),
                "array": {
                    "job_id": int(record.array_job_id or 0),
                    "task_id": {
                        "set": record.array_task_id is not None,
                        "infinite": False,
                        "number": int(record.array_task_id or 0),
                    },
                },
                "name": record.job_name or "",
                "user": record.user,
                "account": record.account,
                "partition": record.partition,
                "qos": record.qos or "",
                "state": {"current": [record.state], "reason": "None"},
                "kill_request_user": "alice" if record.cancelled_by_uid else None,
                "exit_code": _json_exit(record.exit_code),
                "time": {
                    "submission": _epoch(record.submit),
                    "start": _epoch(record.start),
                    "end": _epoch(record.end),
                    "elapsed": record.elapsed_seconds,
                    "limit": {"set": True, "infinite": False, "number": record.timelimit_minutes},
                },
                "allocation_nodes": record.nnodes,
                "nodes": record.nodelist,
                "tres": {
                    "allocated": _tres_list(record.alloc_tres),
                    "requested": _tres_list(record.req_tres),
                },
                "steps": [],
            }
        flush(out, job, first)
        out.write("\n]}\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--allocations", action="store_true", help="allocations only, as sacct --allocations"
    )
    args = parser.parse_args()
    write_sacct_file(args.output, lines=args.lines, seed=args.seed, allocations=args.allocations)


if __name__ == "__main__":
    main()

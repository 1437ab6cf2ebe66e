"""The generated history behaves like a cluster's: jobs wait for room on their nodes, so no
node ever holds more cores, memory or GPUs than it has, nor more than itself in eq 1's max
fraction (what a shared cost model charges), and time limits bound run times."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from accounting.clusters.charging import PartitionSpec, node_share_even
from accounting.clusters.units import parse_memory_mb
from benchmarks.sacct_generator import PARTITIONS, sacct_lines

NOW = datetime(2026, 11, 1, tzinfo=UTC)
DEMO = {"lines": 14_000, "seed": 2026, "start": NOW - timedelta(days=180), "now": NOW,
        "mean_gap_seconds": 1088}  # portal/demo.py's rate  # fmt: skip
BENCHMARK = {"lines": 30_000, "seed": 42, "mean_gap_seconds": 20}  # benchmarks' default rate


def _allocations(**options):
    header, *lines = sacct_lines(allocations=True, **options)
    names = header.rstrip("\n").split("|")
    for line in lines:
        yield dict(zip(names, line.rstrip("\n").split("|"), strict=True))


def _nodes(nodelist: str) -> list[str]:
    match = re.fullmatch(r"(\D+)\[([\d,]+)\]", nodelist)
    if match is None:
        return [nodelist]
    return [f"{match[1]}{number}" for number in match[2].split(",")]


def _held(job: dict[str, str]) -> tuple[int, int, int]:
    nodes = int(job["NNodes"])
    tres = dict(item.split("=") for item in job["AllocTRES"].split(","))
    memory = int(parse_memory_mb(tres["mem"]))
    return int(tres["cpu"]) // nodes, memory // nodes, int(tres.get("gres/gpu", 0)) // nodes


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize("options", [DEMO, BENCHMARK], ids=["demo", "benchmark"])
def test_no_node_ever_holds_more_than_it_has(options):
    events: dict[str, list[tuple[datetime, int, tuple[int, int, int]]]] = defaultdict(list)
    capacity = {
        f"{prefix}{number}": (cores, memory, gpus)
        for prefix, numbers, cores, memory, gpus in PARTITIONS.values()
        for number in numbers
    }
    jobs = 0
    for job in _allocations(**options):
        jobs += 1
        end = options.get("now", datetime.max.replace(tzinfo=UTC))
        if job["End"] != "Unknown":
            end = _moment(job["End"])
        held = _held(job)
        for node in _nodes(job["NodeList"]):
            # Ends before starts at the same second: a node freed at 10:00 can start at 10:00.
            events[node] += [(_moment(job["Start"]), 1, held), (end, 0, held)]
    assert jobs > 2000
    for node, changes in events.items():
        in_use = [0, 0, 0]
        for _, starts, held in sorted(changes, key=lambda change: change[:2]):
            sign = 1 if starts else -1
            in_use = [used + sign * part for used, part in zip(in_use, held, strict=True)]
            assert all(used <= most for used, most in zip(in_use, capacity[node], strict=True)), (
                f"{node} holds {in_use} of {capacity[node]}"
            )


@pytest.mark.parametrize("options", [DEMO, BENCHMARK], ids=["demo", "benchmark"])
def test_the_jobs_on_a_node_never_hold_more_than_the_whole_node_in_max_fractions(options):
    """Issue 29: a job that takes most of a node's memory keeps others off its cores, so the
    jobs on a node never pay a shared cost model for more than the node."""
    specs = {
        name: PartitionSpec(
            name=name, sockets=1, cores_per_socket=cores, memory_mb=memory, gpus=gpus,
            cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(280 if gpus else 0),
        )
        for name, (_, _, cores, memory, gpus) in PARTITIONS.items()
    }  # fmt: skip
    events: dict[str, list[tuple[datetime, int, Fraction]]] = defaultdict(list)
    for job in _allocations(**options):
        end = options.get("now", datetime.max.replace(tzinfo=UTC))
        if job["End"] != "Unknown":
            end = _moment(job["End"])
        cores, memory, gpus = _held(job)
        share = node_share_even(
            specs[job["Partition"]], nodes=1, cores=cores, memory_mb=memory, gpus=gpus
        )
        for node in _nodes(job["NodeList"]):
            events[node] += [(_moment(job["Start"]), 1, share), (end, 0, share)]
    fullest = Fraction(0)
    for node, changes in events.items():
        held = Fraction(0)
        for _, starts, share in sorted(changes, key=lambda change: change[:2]):
            held += share if starts else -share
            assert held <= 1, f"{node} holds {held} of itself"
            fullest = max(fullest, held)
    assert fullest == 1  # nodes do fill up


def test_run_times_stay_within_their_limits_and_a_timeout_ran_its_limit():
    timeouts = 0
    for job in _allocations(**BENCHMARK):
        limit_seconds = int(job["TimelimitRaw"]) * 60
        elapsed = int(job["ElapsedRaw"])
        assert elapsed <= limit_seconds, job
        if job["State"] == "TIMEOUT":
            timeouts += 1
            assert elapsed == limit_seconds, job
    assert timeouts > 100


def test_jobs_wait_for_room_but_the_queue_does_not_grow_without_end():
    waits = [
        (_moment(job["Start"]) - _moment(job["Submit"])).total_seconds()
        for job in _allocations(**BENCHMARK)
    ]
    assert max(waits) > 3600  # some jobs queue, as on a busy machine
    last_tenth = sorted(waits[-len(waits) // 10 :])
    assert last_tenth[len(last_tenth) // 2] < 3600  # the median wait stays under an hour


def test_the_same_seed_gives_the_same_history():
    first = list(sacct_lines(lines=500, seed=3))
    assert first == list(sacct_lines(lines=500, seed=3))
    assert first != list(sacct_lines(lines=500, seed=4))


def test_no_generated_job_runs_in_a_reserved_window():
    """The demo reserves the real sample's hours, so the sample's jobs find the nodes free."""
    window = (NOW - timedelta(days=30), NOW - timedelta(days=30) + timedelta(hours=2))
    running_then = [
        job
        for job in _allocations(**DEMO, reserved=[window])
        if _moment(job["Start"]) < window[1]
        and (job["End"] == "Unknown" or _moment(job["End"]) > window[0])
    ]
    assert running_then == []
    # Without the reservation, the machine is busy then.
    assert any(
        _moment(job["Start"]) < window[1] and _moment(job["End"]) > window[0]
        for job in _allocations(**DEMO)
        if job["End"] != "Unknown"
    )

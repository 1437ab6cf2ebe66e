"""Canonical units, true overhead and fair billing against the paper (Figure 2, section 3.3),
and the occupancy sweep against a brute-force replay. Pure: no database.

The paper's Figure 2 draws nodes without giving their size; its third billing example fixes the
memory at 16 GB (removing 3 units, 6 GB, leaves 10 GB billable of which 10 % is unused), so the
node here has 8 cores and 16 GiB with the paper's unit of 1 core and 2 GB (2048 MiB)."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import hostlist
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.utilisation.canonical import (
    CPU_NODE_UNIT,
    GPU_NODE_UNIT,
    CanonicalError,
    CanonicalUnit,
    FairShare,
    NodeJob,
    NodeResources,
    OverheadPartition,
    ResourceSeconds,
    default_canonical_unit,
    fair_billing_rates,
    node_true_overhead,
    overhead_reports_combine,
    true_overhead,
    true_overhead_report,
)

GIB = 1024
HOUR = 3600
NODE = NodeResources(cores=8, memory_mb=16 * GIB)


def free(cores: int, memory_gib: int) -> NodeResources:
    return NodeResources(cores=cores, memory_mb=memory_gib * GIB)


def percent(rate: Fraction | None) -> int:
    assert rate is not None
    return round(Decimal(rate.numerator) / rate.denominator * 100)


# Figure 2 -------------------------------------------------------------------------------------


def test_a_node_with_all_cores_allocated_has_no_true_overhead():
    assert true_overhead(free=free(0, 5), unit=CPU_NODE_UNIT) == 0


def test_a_node_with_all_memory_allocated_has_no_true_overhead():
    assert true_overhead(free=free(4, 0), unit=CPU_NODE_UNIT) == 0


def test_three_cores_and_1_gb_free_are_no_canonical_unit():
    assert true_overhead(free=free(3, 1), unit=CPU_NODE_UNIT) == 0


def test_three_cores_and_4_gb_free_are_2_units_because_memory_runs_out():
    assert true_overhead(free=free(3, 4), unit=CPU_NODE_UNIT) == 2


def test_three_cores_and_7_gb_free_are_3_units_because_cores_run_out():
    assert true_overhead(free=free(3, 7), unit=CPU_NODE_UNIT) == 3


def test_overhead_is_worked_out_from_capacity_and_allocation():
    allocated = NodeResources(cores=5, memory_mb=9 * GIB)
    assert node_true_overhead(capacity=NODE, allocated=allocated, unit=CPU_NODE_UNIT) == 3


def test_a_gpu_node_counts_free_gpus_only():
    gpu_node = NodeResources(cores=64, memory_mb=256 * GIB, gpus=8)
    assert default_canonical_unit(gpu_node) == GPU_NODE_UNIT
    allocated = NodeResources(cores=64, memory_mb=256 * GIB, gpus=5)
    assert node_true_overhead(capacity=gpu_node, allocated=allocated, unit=GPU_NODE_UNIT) == 3


def test_an_overfull_node_has_zero_overhead_not_negative():
    allocated = NodeResources(cores=9, memory_mb=1)
    assert node_true_overhead(capacity=NODE, allocated=allocated, unit=CPU_NODE_UNIT) == 0


def test_a_unit_without_thresholds_is_refused():
    with pytest.raises(CanonicalError, match="at least one threshold"):
        CanonicalUnit()


def test_a_zero_threshold_is_refused():
    with pytest.raises(CanonicalError, match="positive integer"):
        CanonicalUnit(cores=0, memory_mb=2048)


# Section 3.3 -----------------------------------------------------------------------------------


def test_all_cpus_used_and_30_percent_memory_free_bills_memory_at_143_percent():
    # The paper gives percentages only for this node; 20 GiB keeps 70 % a whole number of MiB.
    node = NodeResources(cores=8, memory_mb=20 * GIB)
    allocated = NodeResources(cores=8, memory_mb=14 * GIB)
    rates = fair_billing_rates(capacity=node, allocated=allocated, unit=CPU_NODE_UNIT)
    assert rates.true_overhead == 0
    assert (rates.cores, rates.memory) == (1, Fraction(10, 7))
    assert (percent(rates.cores), percent(rates.memory)) == (100, 143)


def test_half_the_cpus_free_and_all_memory_used_bills_cpus_at_200_percent():
    allocated = NodeResources(cores=4, memory_mb=16 * GIB)
    rates = fair_billing_rates(capacity=NODE, allocated=allocated, unit=CPU_NODE_UNIT)
    assert rates.true_overhead == 0
    assert (rates.cores, rates.memory) == (2, 1)
    assert (percent(rates.cores), percent(rates.memory)) == (200, 100)


def test_three_units_of_true_overhead_are_not_billed_leaving_memory_at_111_percent():
    allocated = NodeResources(cores=5, memory_mb=9 * GIB)  # 3 cores and 7 GB free
    rates = fair_billing_rates(capacity=NODE, allocated=allocated, unit=CPU_NODE_UNIT)
    assert rates.true_overhead == 3
    assert rates.billable == NodeResources(cores=5, memory_mb=10 * GIB)  # minus 3 cores, 6 GB
    assert (rates.cores, rates.memory) == (1, Fraction(10, 9))
    assert (percent(rates.cores), percent(rates.memory)) == (100, 111)
    assert rates.gpus is None  # no job holds a GPU: nothing to bill


# The sweep ----------------------------------------------------------------------------------

START = datetime(2024, 3, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    return START + timedelta(hours=hours)


def one_node(*jobs: NodeJob, hours: int = 4, partitions=None):
    partitions = partitions or [OverheadPartition("cpu", "n1", NODE)]
    return true_overhead_report(jobs=jobs, partitions=partitions, start=at(0), end=at(hours))


def node_job(job_id, start, end, nodelist="n1", cores=0, memory_gib=0, gpus=0, per_node=None):
    return NodeJob(
        job_id=job_id,
        start=at(start),
        end=at(end),
        nodelist=nodelist,
        cores=cores,
        memory_mb=memory_gib * GIB,
        gpus=gpus,
        per_node=per_node,
    )


def test_the_sweep_rebuilds_one_nodes_overhead_hour_by_hour():
    # 0-1 h: A holds 5 cores / 9 GB -> 3 units; 1-2 h: A and B fill the cores -> 0;
    # 2-3 h: B alone, 3 cores / 6 GB -> 5 cores and 10 GB free -> 5; 3-4 h: idle -> 8.
    report = one_node(
        node_job("A", 0, 2, cores=5, memory_gib=9), node_job("B", 1, 3, cores=3, memory_gib=6)
    )
    cpu = report.partitions["cpu"]
    assert [bucket.unit_seconds for bucket in cpu.buckets] == [3 * HOUR, 0, 5 * HOUR, 8 * HOUR]
    assert [bucket.mean_units for bucket in cpu.buckets] == [3, 0, 5, 8]
    assert dict(cpu.histogram) == {0: HOUR, 3: HOUR, 5: HOUR, 8: HOUR}
    assert cpu.unit_seconds == 16 * HOUR
    assert report.unplaced == ()


def test_the_sweep_bills_what_is_not_true_overhead_to_the_jobs_on_the_node():
    report = one_node(
        node_job("A", 0, 2, cores=5, memory_gib=9), node_job("B", 1, 3, cores=3, memory_gib=6)
    )
    cpu = report.partitions["cpu"]
    assert cpu.occupied_node_seconds == 3 * HOUR  # the idle hour is billed to no one
    assert cpu.allocated == ResourceSeconds(
        core_seconds=(5 + 3) * 2 * HOUR, memory_mb_seconds=(9 + 6) * GIB * 2 * HOUR, gpu_seconds=0
    )
    # billable: 8 cores / 16 GB for 3 h minus (3 + 0 + 5) unit-hours of overhead
    assert cpu.billable == ResourceSeconds(
        core_seconds=(8 * 3 - 8) * HOUR,
        memory_mb_seconds=(16 * 3 - 2 * 8) * GIB * HOUR,
        gpu_seconds=0,
    )
    assert cpu.fair_rates == (1, Fraction(32, 30), None)


def test_a_job_straddling_the_window_counts_only_inside():
    report = one_node(node_job("A", -5, 1, cores=8, memory_gib=16), hours=2)
    cpu = report.partitions["cpu"]
    assert [bucket.unit_seconds for bucket in cpu.buckets] == [0, 8 * HOUR]
    assert cpu.allocated.core_seconds == 8 * HOUR


def test_a_job_ending_when_another_starts_frees_its_node_first():
    report = one_node(
        node_job("A", 0, 1, cores=8, memory_gib=16),
        node_job("B", 1, 2, cores=8, memory_gib=16),
        hours=2,
    )
    assert dict(report.partitions["cpu"].histogram) == {0: 2 * HOUR}


def test_node_lists_are_expanded_and_totals_split_in_whole_units_first_nodes_first():
    partitions = [OverheadPartition("cpu", "n[1-3]", NODE)]
    report = one_node(
        node_job("A", 0, 1, nodelist="n[1-3]", cores=10, memory_gib=3), partitions=partitions
    )
    # 10 cores -> 4, 3, 3; 3 GiB -> 1 GiB each: free 4/15, 5/15, 5/15 -> 4 + 5 + 5 units
    assert report.partitions["cpu"].buckets[0].unit_seconds == 14 * HOUR


def test_per_node_figures_are_used_when_given():
    partitions = [OverheadPartition("cpu", "n[1-2]", NODE)]
    per_node = (free(8, 16), free(0, 0))
    report = one_node(
        node_job("A", 0, 1, nodelist="n[1-2]", cores=8, memory_gib=16, per_node=per_node),
        partitions=partitions,
    )
    assert report.partitions["cpu"].buckets[0].unit_seconds == 8 * HOUR  # the second node is idle


def test_gpu_nodes_count_free_gpus_by_default():
    gpu_node = NodeResources(cores=64, memory_mb=256 * GIB, gpus=8)
    partitions = [OverheadPartition("gpu", "g[01-02]", gpu_node)]
    report = one_node(
        node_job("A", 0, 1, nodelist="g[01-02]", cores=128, memory_gib=512, gpus=6),
        partitions=partitions,
        hours=1,
    )
    gpu = report.partitions["gpu"]
    assert gpu.unit == GPU_NODE_UNIT
    assert gpu.histogram == {5: 2 * HOUR}  # 3 GPUs on each node, 5 free on each: node-seconds
    assert gpu.buckets[0].unit_seconds == 10 * HOUR


def test_jobs_that_cannot_be_placed_are_reported_not_dropped():
    report = one_node(
        node_job("unknown", 0, 1, nodelist="x9", cores=1),
        node_job("malformed", 0, 1, nodelist="n[1-", cores=1),
        node_job("none", 0, 1, nodelist="None assigned", cores=1),
        node_job("short", 0, 1, cores=1, per_node=(free(1, 0), free(1, 0))),
    )
    reasons = {job.job_id: job.reason for job in report.unplaced}
    assert set(reasons) == {"unknown", "malformed", "none", "short"}
    assert "'x9' is in no partition" in reasons["unknown"]
    assert "2 per-node figures for 1 nodes" in reasons["short"]


def test_a_node_in_two_partitions_belongs_to_the_first():
    partitions = [
        OverheadPartition("work", "n[1-2]", NODE),
        OverheadPartition("debug", "n[2-3]", NODE),
    ]
    report = one_node(partitions=partitions, hours=1)
    assert report.partitions["work"].node_count == 2
    assert report.partitions["debug"].node_count == 1


def test_a_custom_unit_changes_the_count():
    unit = CanonicalUnit(cores=2, memory_mb=4 * GIB)
    report = one_node(partitions=[OverheadPartition("cpu", "n1", NODE, unit)], hours=1)
    assert report.partitions["cpu"].histogram == {4: HOUR}


def test_day_buckets_in_a_time_zone():
    report = true_overhead_report(
        jobs=[],
        partitions=[OverheadPartition("cpu", "n1", NODE)],
        start=START,
        end=START + timedelta(days=2),
        step="day",
        timezone="Australia/Perth",
    )
    buckets = report.partitions["cpu"].buckets
    assert [bucket.unit_seconds // HOUR for bucket in buckets] == [8 * 16, 8 * 24, 8 * 8]


# Property: the sweep agrees with a replay tick by tick --------------------------------------

TICK = 10  # minutes: jobs start and end on ticks, so sampling each tick is exact


@st.composite
def small_clusters(draw: st.DrawFn) -> tuple[list[OverheadPartition], list[NodeJob]]:
    partitions = [
        OverheadPartition("cpu", "c[1-3]", NodeResources(cores=8, memory_mb=16 * GIB)),
        OverheadPartition("gpu", "g[1-2]", NodeResources(cores=16, memory_mb=8 * GIB, gpus=4)),
    ]
    jobs = []
    for number in range(draw(st.integers(0, 15))):
        gpu = draw(st.booleans())
        hosts = ["g1", "g2"] if gpu else ["c1", "c2", "c3"]
        first = draw(st.integers(0, len(hosts) - 1))
        last = draw(st.integers(first, len(hosts) - 1))
        count = last - first + 1
        nodelist = ",".join(hosts[first : last + 1])
        start = draw(st.integers(-3, 30)) * TICK
        jobs.append(
            NodeJob(
                job_id=str(number),
                start=START + timedelta(minutes=start),
                end=START + timedelta(minutes=start + draw(st.integers(0, 20)) * TICK),
                nodelist=nodelist,
                cores=draw(st.integers(0, 10 * count)),
                memory_mb=draw(st.integers(0, 10 * GIB * count)),
                gpus=draw(st.integers(0, 5 * count)) if gpu else 0,
            )
        )
    return partitions, jobs


def replay(partitions, jobs, ticks):
    """Overhead per partition, tick by tick, from scratch at every tick."""
    nodes = {}
    for partition in partitions:
        prefix, numbers = partition.nodelist.split("[")
        first, last = numbers.rstrip("]").split("-")
        for number in range(int(first), int(last) + 1):
            nodes[f"{prefix}{number}"] = partition
    series = {partition.name: [] for partition in partitions}
    histogram = {partition.name: {} for partition in partitions}
    # per partition: occupied node-seconds, then allocated and billable resource-seconds
    billing = {partition.name: [0, [0, 0, 0], [0, 0, 0]] for partition in partitions}
    for tick in range(ticks):
        now = START + timedelta(minutes=tick * TICK)
        used = {name: [0, 0, 0] for name in nodes}
        running = dict.fromkeys(nodes, 0)
        for job in jobs:
            if job.start <= now < job.end:
                hosts = job.nodelist.split(",")
                for index, host in enumerate(hosts):
                    running[host] += 1
                    for resource, total in enumerate((job.cores, job.memory_mb, job.gpus)):
                        share, extra = divmod(total, len(hosts))
                        used[host][resource] += share + (index < extra)
        totals = dict.fromkeys(series, 0)
        for host, partition in nodes.items():
            allocated = NodeResources(*used[host])
            units = node_true_overhead(
                capacity=partition.node, allocated=allocated, unit=partition.canonical_unit
            )
            totals[partition.name] += units
            counts = histogram[partition.name]
            counts[units] = counts.get(units, 0) + TICK * 60
            occupied, allocated_seconds, billable_seconds = billing[partition.name]
            capacity = (partition.node.cores, partition.node.memory_mb, partition.node.gpus)
            for resource, threshold in enumerate(partition.canonical_unit.thresholds):
                allocated_seconds[resource] += used[host][resource] * TICK * 60
                if running[host]:
                    billable = capacity[resource] - units * threshold
                    billable_seconds[resource] += billable * TICK * 60
            if running[host]:
                billing[partition.name][0] = occupied + TICK * 60
        for name, units in totals.items():
            series[name].append(units * TICK * 60)
    return series, histogram, billing


@settings(max_examples=150, deadline=None)
@given(case=small_clusters())
def test_the_sweep_agrees_with_a_tick_by_tick_replay(case):
    partitions, jobs = case
    report = true_overhead_report(
        jobs=jobs, partitions=partitions, start=START, end=START + timedelta(hours=5)
    )
    per_hour = 60 // TICK
    series, histogram, billing = replay(partitions, jobs, 5 * per_hour)
    for name, partition in report.partitions.items():
        by_hour = [sum(series[name][hour * per_hour : (hour + 1) * per_hour]) for hour in range(5)]
        assert [bucket.unit_seconds for bucket in partition.buckets] == by_hour
        assert dict(partition.histogram) == histogram[name]
        assert sum(partition.histogram.values()) == partition.node_count * 5 * HOUR
        occupied, allocated, billable = billing[name]
        assert partition.occupied_node_seconds == occupied
        assert partition.allocated == ResourceSeconds(*allocated)
        assert partition.billable == ResourceSeconds(*billable)


# Fair shares per job (section 3.3 along the sweep) --------------------------------------------


def shares_of(report) -> dict[str, FairShare]:
    return {share.job_id: share for share in report.fair_shares}


def exactly_rounded(billed: int, exact: Fraction) -> bool:
    """Cumulative rounding gives each job its exact share rounded down or up."""
    return math.floor(exact) <= billed <= math.ceil(exact)


def test_all_cpus_used_bills_each_jobs_memory_at_143_percent():
    node = NodeResources(cores=8, memory_mb=20 * GIB)
    report = true_overhead_report(
        jobs=[
            node_job("A", 0, 1, cores=5, memory_gib=10),
            node_job("B", 0, 1, cores=3, memory_gib=4),
        ],
        partitions=[OverheadPartition("cpu", "n1", node)],
        start=at(0),
        end=at(1),
        fair_shares=True,
    )
    shares = shares_of(report)
    for job_id, cores, memory_gib in (("A", 5, 10), ("B", 3, 4)):
        share = shares[job_id]
        assert share.allocated == ResourceSeconds(cores * HOUR, memory_gib * GIB * HOUR, 0)
        assert share.billed_core_seconds == cores * HOUR  # 100 %
        exact = Fraction(memory_gib * GIB * HOUR * 10, 7)
        assert exactly_rounded(share.billed_memory_mb_seconds, exact)
        cores_factor, memory_factor, gpus_factor = share.factors
        assert (percent(cores_factor), percent(memory_factor), gpus_factor) == (100, 143, None)
    assert sum(s.billed_memory_mb_seconds for s in shares.values()) == 20 * GIB * HOUR


def test_half_the_cpus_free_bills_each_jobs_cpus_at_200_percent():
    report = true_overhead_report(
        jobs=[
            node_job("A", 0, 1, cores=1, memory_gib=8),
            node_job("B", 0, 1, cores=3, memory_gib=8),
        ],
        partitions=[OverheadPartition("cpu", "n1", NODE)],
        start=at(0),
        end=at(1),
        fair_shares=True,
    )
    shares = shares_of(report)
    assert shares["A"].billed == ResourceSeconds(2 * HOUR, 8 * GIB * HOUR, 0)
    assert shares["B"].billed == ResourceSeconds(6 * HOUR, 8 * GIB * HOUR, 0)
    assert [percent(rate) for rate in shares["B"].factors[:2]] == [200, 100]


def test_three_units_of_overhead_are_not_billed_to_the_job_leaving_memory_at_111_percent():
    report = true_overhead_report(
        jobs=[node_job("A", 0, 1, cores=5, memory_gib=9)],
        partitions=[OverheadPartition("cpu", "n1", NODE)],
        start=at(0),
        end=at(1),
        fair_shares=True,
    )
    (share,) = report.fair_shares
    assert share.billed == ResourceSeconds(5 * HOUR, 10 * GIB * HOUR, 0)  # minus 3 cores, 6 GB
    assert share.factors == (1, Fraction(10, 9), None)
    assert [percent(rate) for rate in share.factors[:2]] == [100, 111]


def test_a_resource_no_job_holds_is_split_equally_among_the_jobs_on_the_node():
    # Both jobs hold all the cores together and no memory: no true overhead, so the 16 GB are
    # billable; nobody holds memory, so each pays half.
    report = true_overhead_report(
        jobs=[node_job("A", 0, 1, cores=6), node_job("B", 0, 1, cores=2)],
        partitions=[OverheadPartition("cpu", "n1", NODE)],
        start=at(0),
        end=at(1),
        fair_shares=True,
    )
    shares = shares_of(report)
    assert shares["A"].billed_memory_mb_seconds == shares["B"].billed_memory_mb_seconds
    assert shares["A"].billed_memory_mb_seconds == 8 * GIB * HOUR
    assert shares["A"].factors[1] is None  # it held none: no factor


def test_fair_shares_follow_the_node_as_jobs_come_and_go():
    # 0-1 h: A alone (5 cores, 9 GB: 3 units) pays 5 cores and 10 GB; 1-2 h: A and B fill the
    # cores (8 cores, 15 GB: no overhead) and share 16 GB 9:6; 2-3 h: B alone (3 cores, 6 GB:
    # 5 units) pays 3 cores and 6 GB.
    report = true_overhead_report(
        jobs=[
            node_job("A", 0, 2, cores=5, memory_gib=9),
            node_job("B", 1, 3, cores=3, memory_gib=6),
        ],
        partitions=[OverheadPartition("cpu", "n1", NODE)],
        start=at(0),
        end=at(4),
        fair_shares=True,
    )
    shares = shares_of(report)
    assert shares["A"].billed_core_seconds == 10 * HOUR
    assert shares["B"].billed_core_seconds == 6 * HOUR
    assert exactly_rounded(
        shares["A"].billed_memory_mb_seconds, 10 * GIB * HOUR + Fraction(9 * 16 * GIB * HOUR, 15)
    )
    cpu = report.partitions["cpu"]
    assert (
        sum(s.billed_memory_mb_seconds for s in shares.values()) == cpu.billable.memory_mb_seconds
    )


def test_asking_for_fair_shares_leaves_the_aggregates_alone():
    jobs = [node_job("A", 0, 2, cores=5, memory_gib=9), node_job("B", 1, 3, cores=3, memory_gib=6)]
    partitions = [OverheadPartition("cpu", "n1", NODE)]
    plain = true_overhead_report(jobs=jobs, partitions=partitions, start=at(0), end=at(4))
    with_shares = true_overhead_report(
        jobs=jobs, partitions=partitions, start=at(0), end=at(4), fair_shares=True
    )
    assert plain.fair_shares == ()
    assert plain.partitions == with_shares.partitions


# Property: fair shares add up to what is billable and are exact to within rounding ------------


@st.composite
def packed_clusters(draw: st.DrawFn) -> tuple[list[OverheadPartition], list[NodeJob]]:
    """Jobs in lanes (slices of nodes run one job at a time), so no node is ever over-full."""
    partitions = [
        OverheadPartition("cpu", "c[1-3]", NodeResources(cores=8, memory_mb=16 * GIB)),
        OverheadPartition("gpu", "g[1-2]", NodeResources(cores=16, memory_mb=8 * GIB, gpus=4)),
    ]
    # (node list, node count, cores, MiB, GPUs per node of the lane)
    lanes = [
        *((f"c{n}", 1, 3, 6 * GIB, 0) for n in (1, 2, 3) for _ in range(2)),
        ("c[1-3]", 3, 2, 4 * GIB, 0),
        *((f"g{n}", 1, 8, 4 * GIB, 2) for n in (1, 2)),
        ("g[1-2]", 2, 8, 4 * GIB, 2),
    ]
    jobs: list[NodeJob] = []
    for nodelist, count, cores, memory_mb, gpus in lanes:
        clock = draw(st.integers(-3, 10))
        while clock < 30 and draw(st.booleans()):
            length = draw(st.integers(1, 12))
            jobs.append(
                NodeJob(
                    job_id=str(len(jobs)),
                    start=START + timedelta(minutes=clock * TICK),
                    end=START + timedelta(minutes=(clock + length) * TICK),
                    nodelist=nodelist,
                    cores=draw(st.integers(0, cores * count)),
                    memory_mb=draw(
                        st.one_of(
                            st.sampled_from([0, memory_mb * count]),
                            st.integers(0, memory_mb * count),
                        )
                    ),
                    gpus=draw(st.integers(0, gpus * count)),
                )
            )
            clock += length + draw(st.integers(0, 4))
    return partitions, jobs


def exact_shares(partitions, jobs, ticks) -> dict[str, list[Fraction]]:
    """Each job's section 3.3 billing, tick by tick, in exact fractions."""
    nodes = {}
    for partition in partitions:
        for host in hostlist.expand_hostlist(partition.nodelist):
            nodes[host] = partition
    exact = {job.job_id: [Fraction(0)] * 3 for job in jobs}
    for tick in range(ticks):
        now = START + timedelta(minutes=tick * TICK)
        on_node: dict[str, list[tuple[str, list[int]]]] = {host: [] for host in nodes}
        for job in jobs:
            if job.start <= now < job.end:
                hosts = hostlist.expand_hostlist(job.nodelist)
                for index, host in enumerate(hosts):
                    held = []
                    for total in (job.cores, job.memory_mb, job.gpus):
                        share, extra = divmod(total, len(hosts))
                        held.append(share + (index < extra))
                    on_node[host].append((job.job_id, held))
        for host, running in on_node.items():
            if not running:
                continue
            partition = nodes[host]
            capacity = (partition.node.cores, partition.node.memory_mb, partition.node.gpus)
            held_total = [sum(held[r] for _, held in running) for r in range(3)]
            units = node_true_overhead(
                capacity=partition.node, allocated=NodeResources(*held_total),
                unit=partition.canonical_unit,
            )  # fmt: skip
            for r, threshold in enumerate(partition.canonical_unit.thresholds):
                billable = (capacity[r] - units * threshold) * TICK * 60
                for job_id, held in running:
                    if held_total[r]:
                        exact[job_id][r] += Fraction(billable * held[r], held_total[r])
                    else:
                        exact[job_id][r] += Fraction(billable, len(running))
    return exact


@settings(max_examples=100, deadline=None)
@given(case=packed_clusters())
def test_fair_shares_add_up_to_the_billable_total_and_never_bill_less_than_held(case):
    partitions, jobs = case
    report = true_overhead_report(
        jobs=jobs, partitions=partitions, start=START, end=START + timedelta(hours=5),
        fair_shares=True,
    )  # fmt: skip
    shares = shares_of(report)
    exact = exact_shares(partitions, jobs, 5 * 60 // TICK)
    billed_total, allocated_total = [0, 0, 0], [0, 0, 0]
    for job in jobs:
        share = shares.get(job.job_id)
        if share is None:  # it ran outside the window
            assert exact[job.job_id] == [0, 0, 0]
            continue
        nodes = len(hostlist.expand_hostlist(job.nodelist))
        for r, (billed, allocated) in enumerate(
            zip(
                dataclasses.astuple(share.billed), dataclasses.astuple(share.allocated), strict=True
            )
        ):
            assert billed >= allocated
            assert abs(billed - exact[job.job_id][r]) < nodes  # rounded once per node
            billed_total[r] += billed
            allocated_total[r] += allocated
    billable = [0, 0, 0]
    allocated = [0, 0, 0]
    for partition in report.partitions.values():
        for r in range(3):
            billable[r] += dataclasses.astuple(partition.billable)[r]
            allocated[r] += dataclasses.astuple(partition.allocated)[r]
    assert billed_total == billable
    assert allocated_total == allocated


@settings(max_examples=60, deadline=None)
@given(case=packed_clusters(), cut=st.integers(1, 5 * 60 // TICK - 1))
def test_a_window_cut_in_two_and_combined_gives_the_same_report(case, cut):
    partitions, jobs = case
    end = START + timedelta(hours=5)
    middle = START + timedelta(minutes=cut * TICK)
    whole = true_overhead_report(
        jobs=jobs, partitions=partitions, start=START, end=end, fair_shares=True
    )
    combined = overhead_reports_combine(
        reports=[
            true_overhead_report(
                jobs=jobs, partitions=partitions, start=START, end=middle, fair_shares=True
            ),
            true_overhead_report(
                jobs=jobs, partitions=partitions, start=middle, end=end, fair_shares=True
            ),
        ]
    )
    assert combined.partitions == whole.partitions
    assert sorted(s.job_id for s in combined.fair_shares) == sorted(
        s.job_id for s in whole.fair_shares
    )
    whole_shares = shares_of(whole)
    for share in combined.fair_shares:
        assert share.allocated == whole_shares[share.job_id].allocated
        for billed, once in zip(
            dataclasses.astuple(share.billed),
            dataclasses.astuple(whole_shares[share.job_id].billed),
            strict=True,
        ):
            assert abs(billed - once) <= 2 * 3  # each side rounds once per node (3 at most)


def test_combining_windows_that_do_not_meet_is_refused():
    partitions = [OverheadPartition("cpu", "n1", NODE)]
    first = true_overhead_report(jobs=[], partitions=partitions, start=at(0), end=at(1))
    third = true_overhead_report(jobs=[], partitions=partitions, start=at(2), end=at(3))
    with pytest.raises(CanonicalError, match="follow each other"):
        overhead_reports_combine(reports=[first, third])

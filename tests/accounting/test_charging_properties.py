"""Properties of the charging engine (hypothesis): monotone, capped by whole nodes, additive,
memory charged in steps of M / C. Pure: no database."""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import ROUND_FLOOR, Decimal
from fractions import Fraction

from hypothesis import assume, given
from hypothesis import strategies as st

from accounting.clusters.charging import (
    MODELS,
    SU_QUANTUM,
    NodeUsage,
    PartitionSpec,
    SpecError,
    charge,
    charge_rate,
    energy_weight,
    node_share_even,
    service_units,
    split_evenly,
)

NVME = "nvme_gb"


@st.composite
def partitions(draw: st.DrawFn) -> PartitionSpec:
    """CPU and GPU partitions of any shape, some with node-local NVMe."""
    gpus = draw(st.sampled_from([0, 0, 1, 2, 4, 8]))
    nvme = draw(st.one_of(st.none(), st.integers(1, 8000)))
    return PartitionSpec(
        name="p",
        sockets=draw(st.integers(1, 4)),
        cores_per_socket=draw(st.integers(1, 96)),
        memory_mb=draw(st.integers(1, 2_000_000)),
        gpus=gpus,
        cpu_tdp_watts=Decimal(draw(st.integers(1, 500))),
        gpu_tdp_watts=Decimal(draw(st.integers(1, 800))) if gpus else Decimal(0),
        node_local={NVME: Decimal(nvme)} if nvme else {},
    )


@st.composite
def usages(draw: st.DrawFn, spec: PartitionSpec) -> NodeUsage:
    """Anything one node of ``spec`` can give a job, with decimal shares now and then."""
    cores = draw(
        st.one_of(
            st.integers(1, spec.cores),
            st.decimals(Decimal("0.001"), spec.cores, places=3),
        )
    )
    memory_mb = draw(
        st.one_of(st.integers(0, spec.memory_mb), st.decimals(0, spec.memory_mb, places=4))
    )
    node_local = {}
    if NVME in spec.node_local:
        node_local[NVME] = draw(st.decimals(0, spec.node_local[NVME], places=2))
    return NodeUsage(
        cores=cores,
        memory_mb=memory_mb,
        gpus=draw(st.integers(0, spec.gpus)),
        node_local=node_local,
    )


@st.composite
def jobs(draw: st.DrawFn) -> tuple[PartitionSpec, list[NodeUsage], int]:
    spec = draw(partitions())
    nodes = draw(st.lists(usages(spec), min_size=1, max_size=4))
    return spec, nodes, draw(st.integers(0, 30 * 86400))


def energy_su(spec: PartitionSpec, nodes: list[NodeUsage], seconds: int) -> Decimal:
    return charge(spec, nodes, elapsed_seconds=seconds).service_units


def whole(spec: PartitionSpec) -> NodeUsage:
    return NodeUsage(
        cores=spec.cores, memory_mb=spec.memory_mb, gpus=spec.gpus, node_local=spec.node_local
    )


# Oracle: eq 1 with eqs 8-9 computed independently, in exact fractions.
def oracle_su(spec: PartitionSpec, nodes: list[NodeUsage], seconds: int) -> Fraction:
    cores = spec.cores
    weight = (
        Fraction(energy_weight(spec))
        if spec.gpus == 0
        else Fraction(spec.gpus * spec.gpu_tdp_watts * cores)
        / Fraction(spec.sockets * spec.cpu_tdp_watts)
    )
    total = Fraction(0)
    for node in nodes:
        shares = [
            Fraction(node.cores) / cores,
            Fraction(node.gpus) / spec.gpus if spec.gpus else Fraction(0),
            Fraction(math.ceil(Fraction(node.memory_mb) / (Fraction(spec.memory_mb) / cores)))
            / cores,
        ]
        for name, capacity in spec.node_local.items():
            used = Fraction(node.node_local.get(name, 0))
            shares.append(Fraction(math.ceil(used * cores / Fraction(capacity))) / cores)
        total += max(shares)
    return weight * Fraction(seconds, 3600) * total


@given(jobs())
def test_charge_is_eq_1_rounded_to_the_ledger_quantum(job):
    spec, nodes, seconds = job
    exact = oracle_su(spec, nodes, seconds)
    assert abs(Fraction(energy_su(spec, nodes, seconds)) - exact) <= Fraction(SU_QUANTUM) / 2


@given(jobs(), st.sampled_from(["cores", "memory_mb", "gpus", NVME]), st.data())
def test_charge_never_falls_when_a_job_holds_more_of_any_resource(job, resource, data):
    spec, nodes, seconds = job
    node = nodes[0]
    if resource == NVME:
        assume(NVME in spec.node_local)
        current = node.node_local.get(NVME, Decimal(0))
        more = data.draw(st.decimals(current, spec.node_local[NVME], places=2))
        bigger = replace(node, node_local={NVME: more})
    else:
        limit = {"cores": spec.cores, "memory_mb": spec.memory_mb, "gpus": spec.gpus}[resource]
        current = getattr(node, resource)
        assume(current < limit)
        more = data.draw(st.integers(math.ceil(current), limit))
        bigger = replace(node, **{resource: more})
    assert energy_su(spec, [bigger, *nodes[1:]], seconds) >= energy_su(spec, nodes, seconds)


@given(jobs(), st.integers(0, 86400))
def test_charge_never_falls_when_a_job_runs_longer(job, extra_seconds):
    spec, nodes, seconds = job
    assert energy_su(spec, nodes, seconds + extra_seconds) >= energy_su(spec, nodes, seconds)


@given(jobs())
def test_charge_never_exceeds_the_whole_nodes(job):
    spec, nodes, seconds = job
    whole_nodes = energy_su(spec, [whole(spec)] * len(nodes), seconds)
    assert energy_su(spec, nodes, seconds) <= whole_nodes
    # and the whole nodes cost w * t * n (eq 1 with every max = 1)
    exact = Fraction(oracle_su(spec, [whole(spec)], 3600)) * len(nodes) * Fraction(seconds, 3600)
    assert abs(Fraction(whole_nodes) - exact) <= Fraction(SU_QUANTUM) / 2


@given(jobs())
def test_charge_is_additive_over_nodes(job):
    spec, nodes, seconds = job
    together = energy_su(spec, nodes, seconds)
    apart = sum(energy_su(spec, [node], seconds) for node in nodes)
    # Each separate charge is rounded once, so they may differ by one quantum per node.
    assert abs(together - apart) <= SU_QUANTUM * len(nodes)


@given(jobs())
def test_dominant_resource_has_the_largest_summed_share(job):
    spec, nodes, seconds = job
    result = charge(spec, nodes, elapsed_seconds=seconds)
    summed = {
        "gpus": sum(node.gpus for node in result.nodes),
        "cores": sum(node.cores for node in result.nodes),
        "memory": sum(node.memory for node in result.nodes),
    }
    for name in spec.node_local:
        summed[name] = sum(node.node_local[name] for node in result.nodes)
    # Decimal fractions carry 28 digits; compare with a tolerance far below any real difference.
    assert summed[result.dominant_resource] >= max(summed.values()) - Decimal("1e-20")


def _floor_micro(value: Fraction) -> Decimal:
    """The largest multiple of 0.000001 MB not above ``value``."""
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(
        Decimal("0.000001"), rounding=ROUND_FLOOR
    )


@given(partitions(), st.data())
def test_memory_is_charged_in_steps_of_memory_per_core(spec, data):
    # eqs 8-9: f_m is constant on (k-1, k] * M/C and jumps by 1/C just past k * M/C.
    cores = spec.cores
    assume(cores >= 2)
    k = data.draw(st.integers(1, cores - 1))
    per_core = Fraction(spec.memory_mb, cores)
    step_start = _floor_micro((k - 1) * per_core) + Decimal("0.000001")  # just past (k-1) M/C
    step_end = _floor_micro(k * per_core)  # k M/C, or just below it
    inside = data.draw(st.decimals(step_start, step_end, places=6))

    def memory_su(memory_mb: Decimal) -> Decimal:
        # One core and no GPUs, so memory dominates from k = 1 on.
        return energy_su(spec, [NodeUsage(cores=1, memory_mb=memory_mb)], 3600)

    step_su = memory_su(step_end)
    assert memory_su(step_start) == memory_su(inside) == step_su
    assert memory_su(step_end + Decimal("0.000001")) > step_su
    result = charge(spec, [NodeUsage(cores=1, memory_mb=inside)], elapsed_seconds=3600)
    assert result.nodes[0].memory == Decimal(k) / cores


@given(partitions())
def test_a_whole_node_for_an_hour_costs_the_weight(spec):
    result = charge(spec, [whole(spec)], elapsed_seconds=3600)
    assert result.service_units == result.weight.quantize(SU_QUANTUM)


@given(jobs())
def test_node_local_resource_changes_the_charge_only_when_it_dominates(job):
    spec, nodes, seconds = job
    assume(NVME in spec.node_local and seconds > 0)
    without_nvme_spec = replace(spec, node_local={})
    without_nvme = [replace(node, node_local={}) for node in nodes]
    base = charge(without_nvme_spec, without_nvme, elapsed_seconds=seconds)
    with_nvme = charge(spec, nodes, elapsed_seconds=seconds)
    nvme_dominates = any(
        fractions.node_local[NVME] > base_fractions.share
        for fractions, base_fractions in zip(with_nvme.nodes, base.nodes, strict=True)
    )
    if nvme_dominates:
        assert with_nvme.service_units >= base.service_units
        assert oracle_su(spec, nodes, seconds) > oracle_su(without_nvme_spec, without_nvme, seconds)
    else:
        assert with_nvme.service_units == base.service_units


@given(jobs(), st.sampled_from(sorted(MODELS)))
def test_service_units_alone_are_the_charges_to_the_last_place_under_every_model(job, model):
    """The lean pricing (a job's right-sized request is priced with it) is the charge's SU,
    and refuses what the charge refuses (a spec without the model's figures) with its words."""
    spec, nodes, seconds = job
    try:
        expected = str(charge(spec, nodes, elapsed_seconds=seconds, model=model).service_units)
    except SpecError as error:
        expected = f"refused: {error}"
    try:
        lean = str(service_units(spec, nodes, elapsed_seconds=seconds, model=model))
    except SpecError as error:
        lean = f"refused: {error}"
    assert lean == expected


@st.composite
def job_shapes(draw: st.DrawFn) -> tuple[PartitionSpec, int, int | Decimal, int | Decimal, int]:
    """A job's totals (sacct's AllocTRES) that its nodes can give, split evenly."""
    spec = replace(draw(partitions()), node_local={})
    nodes = draw(st.integers(1, 5))
    cores = draw(st.integers(1, spec.cores * nodes))
    memory_mb = draw(
        st.one_of(
            st.integers(0, spec.memory_mb * nodes),
            st.decimals(0, spec.memory_mb * nodes, places=3),
        )
    )
    gpus = draw(st.integers(0, spec.gpus)) * nodes
    return spec, nodes, cores, memory_mb, gpus


@given(job_shapes())
def test_a_jobs_node_share_is_the_max_fraction_its_charge_counts(shape):
    """``node_share_even`` x nodes x w x t is the job's SU (eq 1) exactly, and each node's
    fractions as shown to users give the same share to their 28 digits."""
    spec, nodes, cores, memory_mb, gpus = shape
    share = node_share_even(spec, nodes=nodes, cores=cores, memory_mb=memory_mb, gpus=gpus)
    assert 0 < share <= 1
    usage = split_evenly(nodes=nodes, cores=cores, memory_mb=memory_mb, gpus=gpus)
    rate = charge_rate(spec, usage)
    # w exactly: C on a CPU partition (IV-B), the TDP ratio times C on a GPU one (eq 15)
    weight = Fraction(spec.cores)
    if spec.gpus:
        weight *= Fraction(spec.node_gpu_tdp_watts) / Fraction(spec.node_cpu_tdp_watts)
    assert Fraction(*rate.service_units_per_second) == weight * share * nodes / 3600
    for node in charge(spec, usage, elapsed_seconds=0).nodes:
        assert abs(Fraction(node.share) - share) < Fraction(1, 10**25)

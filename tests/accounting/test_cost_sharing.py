"""Issue 29, item 1: a job pays for its share of each node. A cost model says whether its nodes
are ``exclusive`` (the PeCoH default: whole nodes) or ``shared`` (each node's time rates times
the job's max fraction of it, eq 1), and ``job_cost`` and ``coststats`` follow the one rule.
Pure: no database."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.clusters.charging import PartitionSpec, node_share_even
from accounting.costs.costmodels import (
    CostModelError,
    cost_model_load,
    cost_model_parse,
    job_cost,
    job_cost_as_dict,
    job_cost_verbose,
    share_text,
)
from accounting.costs.coststats import JobRecord, cost_statistics, cost_table_build, job_totals

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "costmodels"
HOUR = 3600
TINY = Decimal("1E-20")  # one cost against another summed in another order: 28-digit rounding

# A model of the demo cluster's nodes, shared: a GPU node-hour costs 3.847 Euro (as in
# examples/costmodels/slurm-testbed.cost), a CPU node-hour 0.9703.
SHARED = """\
nodes-are shared
currency Euro
nodes CPU nid[1001-1004]
rate Hardware 6 k/a
rate Staff 2.5 k/a
energy-rate Power 0.25 1/kWh
nodes GPU nid[2001-2002]
rate Hardware 24 k/a
rate Staff 9.7 k/a
energy-rate Power 0.25 1/kWh
"""
EXCLUSIVE = SHARED.replace("nodes-are shared\n", "")
GPU_NODE = PartitionSpec(
    name="gpu", sockets=1, cores_per_socket=64, memory_mb=245000, gpus=8,
    cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(280),
)  # fmt: skip
CPU_NODE = PartitionSpec(
    name="work", sockets=2, cores_per_socket=64, memory_mb=245000, cpu_tdp_watts=Decimal(280)
)


def _cost(text, *, nodes, seconds=HOUR, energy=None, share=None):
    model = cost_model_parse(text)
    return job_cost(
        model, nodes=nodes, runtime_seconds=seconds, energy_joules=energy, node_share=share
    )


# --- The format ---------------------------------------------------------------------------------


def test_a_model_without_nodes_are_is_exclusive_as_in_the_report():
    assert cost_model_parse(EXCLUSIVE).nodes_are == "exclusive"
    assert cost_model_parse(SHARED).nodes_are == "shared"
    assert cost_model_parse("nodes-are exclusive\nnodes A a1\nrate R 1 1/h\n").nodes_are == (
        "exclusive"
    )


def test_the_papers_mistral_models_stay_exclusive_and_the_demo_clusters_models_are_shared():
    for path in EXAMPLES.glob("mistral-*.cost"):
        assert cost_model_load(path).nodes_are == "exclusive", path
    for name in ("slurm-testbed", "setonix"):
        assert cost_model_load(EXAMPLES / f"{name}.cost").nodes_are == "shared", name


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("nodes-are sometimes\nnodes A a1\n", 1, "'sometimes': expected exclusive or shared"),
        ("nodes A a1\nnodes-are\n", 2, "nodes-are takes one word, exclusive or shared; got 0"),
        ("nodes A a1\nnodes-are shared exclusive\n", 2, "takes one word"),
        ("nodes-are shared\nnodes A a1\nnodes-are shared\n", 3, "set twice (first on line 1)"),
        ("nodes-are Shared\nnodes A a1\n", 1, "expected exclusive or shared"),
    ],
)  # fmt: skip
def test_a_bad_nodes_are_line_is_an_error_with_its_line(text, line, message):
    with pytest.raises(CostModelError) as raised:
        cost_model_parse(text, source="m.cost")
    assert raised.value.line_number == line
    assert message in str(raised.value)
    assert str(raised.value).startswith(f"m.cost:{line}: ")


# --- One job ------------------------------------------------------------------------------------


def test_a_one_gpu_job_pays_an_eighth_of_the_gpu_node_under_a_shared_model():
    """The issue's example: a 1-GPU job paid 3.85 Euro an hour, as much as an 8-GPU job."""
    share = node_share_even(GPU_NODE, nodes=1, cores=8, memory_mb=30625, gpus=1)
    assert share == Fraction(1, 8)
    whole = _cost(EXCLUSIVE, nodes=["nid2001"], share=share)
    part = _cost(SHARED, nodes=["nid2001"], share=share)
    assert whole.total == _cost(SHARED, nodes=["nid2001"], share=Fraction(1)).total
    assert part.total * 8 == whole.total
    assert part.node_share == Fraction(1, 8)
    assert (part.nodes_are, whole.nodes_are) == ("shared", "exclusive")
    assert whole.node_share == 1  # an exclusive model ignores the share: whole nodes


def test_a_memory_heavy_job_pays_its_memory_share_not_its_cores():
    # 1 core and 200 GiB of 245,000 MiB: ceil(204800 x 128 / 245000) = 107 core-equivalents
    share = node_share_even(CPU_NODE, nodes=1, cores=1, memory_mb=204800)
    assert share == Fraction(107, 128)
    cost = _cost(SHARED, nodes=["nid1001"], share=share)
    assert abs(cost.total - _cost(SHARED, nodes=["nid1001"]).total * 107 / 128) < TINY


def test_energy_rates_price_the_jobs_own_energy_whatever_its_share():
    share = Fraction(1, 8)
    shared = _cost(SHARED, nodes=["nid2001"], energy=7_200_000, share=share)
    exclusive = _cost(EXCLUSIVE, nodes=["nid2001"], energy=7_200_000, share=share)
    [shared_set], [exclusive_set] = shared.node_sets, exclusive.node_sets
    assert shared_set.rates[-1].cost == exclusive_set.rates[-1].cost == Decimal("0.5")
    assert shared_set.rates[0].cost * 8 == exclusive_set.rates[0].cost


def test_without_a_known_share_a_job_pays_whole_nodes():
    assert _cost(SHARED, nodes=["nid1001"]).total == _cost(EXCLUSIVE, nodes=["nid1001"]).total


@pytest.mark.parametrize("share", [Fraction(0), Fraction(-1, 2), Fraction(9, 8)])
def test_a_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(ValueError, match=r"must be in \(0, 1\]"):
        _cost(SHARED, nodes=["nid1001"], share=share)


def test_the_meters_forms_say_the_share_under_a_shared_model():
    cost = _cost(SHARED, nodes=["nid[2001-2002]"], share=Fraction(1, 4))
    assert "(nodes shared: the job pays 1/4 of each node)" in job_cost_verbose(cost)
    document = json.loads(json.dumps(job_cost_as_dict(cost)))
    assert (document["nodes_are"], document["node_share"]) == ("shared", "1/4")
    exclusive = _cost(EXCLUSIVE, nodes=["nid[2001-2002]"])
    assert "shared" not in job_cost_verbose(exclusive)  # Listing 5 stays as printed
    assert job_cost_as_dict(exclusive)["nodes_are"] == "exclusive"


def test_a_share_reads_as_a_fraction_or_a_percentage():
    assert share_text(Fraction(1)) == "all"
    assert share_text(Fraction(3, 8)) == "3/8"
    # 10 cores over 3 nodes: 3.33... cores of 128 on each, a fraction of 28 digits
    assert share_text(node_share_even(CPU_NODE, nodes=3, cores=10, memory_mb=0)) == "2.60 %"
    assert share_text(Fraction(1, 3 * 10**6)) == "0.00 %"


# --- The invariant: the jobs on a node set never pay more than the node set -----------------------

SLOT_SECONDS = 900
WINDOW_SLOTS = 24
CPU_NODES = tuple(f"nid{1001 + n}" for n in range(4))
GPU_NODES = ("nid2001", "nid2002")
PARTITIONS = {"work": (CPU_NODE, CPU_NODES), "gpu": (GPU_NODE, GPU_NODES)}


@st.composite
def schedules(draw: st.DrawFn) -> list[tuple[list[str], int, int, Fraction]]:
    """Jobs as a scheduler places them: each (nodes, start slot, slots, share) fits, that is
    the shares held on a node at any moment add up to at most the whole node."""
    held = {
        node: [Fraction(0)] * WINDOW_SLOTS for _, nodes in PARTITIONS.values() for node in nodes
    }
    jobs = []
    for _ in range(draw(st.integers(1, 40))):
        spec, names = PARTITIONS[draw(st.sampled_from(sorted(PARTITIONS)))]
        count = draw(st.integers(1, len(names)))
        cores = draw(st.integers(1, spec.cores)) * count
        memory_mb = draw(st.integers(0, spec.memory_mb)) * count
        gpus = draw(st.integers(0, spec.gpus)) * count
        share = node_share_even(spec, nodes=count, cores=cores, memory_mb=memory_mb, gpus=gpus)
        start = draw(st.integers(0, WINDOW_SLOTS - 1))
        slots = draw(st.integers(1, WINDOW_SLOTS - start))
        nodes = sorted(draw(st.permutations(names))[:count])
        if all(held[n][t] + share <= 1 for n in nodes for t in range(start, start + slots)):
            for node in nodes:
                for slot in range(start, start + slots):
                    held[node][slot] += share
            jobs.append((nodes, start, slots, share))
    return jobs


@settings(max_examples=150, deadline=None)
@given(schedules())
def test_the_jobs_that_fit_their_nodes_never_pay_more_than_the_nodes_time_rates(jobs):
    model = cost_model_parse(SHARED)
    paid = {node_set.name: Decimal(0) for node_set in model.node_sets}
    for nodes, _, slots, share in jobs:
        cost = job_cost(
            model, nodes=nodes, runtime_seconds=slots * SLOT_SECONDS, energy_joules=None,
            node_share=share,
        )  # fmt: skip
        for node_set in cost.node_sets:
            paid[node_set.name] += sum(
                rate.cost for rate in node_set.rates if rate.kind == "time" and rate.cost
            )
    for node_set in model.node_sets:
        bound = node_set.time_unit_cost * node_set.node_count * WINDOW_SLOTS * SLOT_SECONDS
        assert paid[node_set.name] <= Decimal(bound.numerator) / bound.denominator
    # coststats prices the same jobs by the same rule (its fast per-signature path).
    records = [
        JobRecord(str(n), ",".join(nodes), slots * SLOT_SECONDS, None, share)
        for n, (nodes, _, slots, share) in enumerate(jobs)
    ]
    totals = job_totals(cost_table_build(model, records))
    for total, (nodes, _, slots, share) in zip(totals, jobs, strict=True):
        one = job_cost(
            model, nodes=nodes, runtime_seconds=slots * SLOT_SECONDS, energy_joules=None,
            node_share=share,
        )  # fmt: skip
        assert abs(total - one.total) < TINY


@given(st.fractions(min_value=0, max_value=1).filter(bool), st.integers(0, 10**6))
def test_an_exclusive_model_ignores_any_share(share, seconds):
    model = cost_model_parse(EXCLUSIVE)
    given_share = job_cost(
        model, nodes=["nid1001", "nid2001"], runtime_seconds=seconds, energy_joules=5,
        node_share=share,
    )  # fmt: skip
    without = job_cost(
        model, nodes=["nid1001", "nid2001"], runtime_seconds=seconds, energy_joules=5
    )
    assert given_share == without


# --- coststats ----------------------------------------------------------------------------------

BATCH = [
    JobRecord("1", "nid1001", 3600, None, Fraction(1, 128)),
    JobRecord("2", "nid1001", 3600, None, Fraction(1, 2)),
    JobRecord("3", "nid[1001-1004]", 7200, 3_600_000, Fraction(1)),
    JobRecord("4", "nid2001", 1800, None, Fraction(1, 8)),
    JobRecord("5", "nid2001", 1800, None, None),
]


def test_coststats_prices_each_job_as_the_meter_does_under_a_shared_model():
    model = cost_model_parse(SHARED)
    rows = []
    table = cost_table_build(model, BATCH, on_row=rows.append)
    assert len(table.signatures) == 5  # one node list, two shares: two signatures
    expected = [
        job_cost(
            model, nodes=[record.nodelist] if "[" not in record.nodelist else CPU_NODES,
            runtime_seconds=record.runtime_seconds, energy_joules=record.energy_joules,
            node_share=record.node_share,
        ).total
        for record in BATCH
    ]  # fmt: skip
    assert [row.total for row in rows] == expected
    assert all(abs(a - b) < TINY for a, b in zip(job_totals(table), expected, strict=True))
    stats = cost_statistics(table)
    sums = {
        column.key: column_stats.sum
        for column, column_stats in zip(stats.columns, stats.statistics, strict=True)
    }
    assert abs(sums["total"] - sum(expected)) < TINY
    # The rate columns are the share-weighted node-seconds x the rate.
    cpu_hours = Fraction(1, 128) + Fraction(1, 2) + 4 * 2
    hardware = model.node_sets[0].rates[0].exact_unit_cost * 3600 * cpu_hours
    assert sums["rate:CPU:Hardware"] == Decimal(hardware.numerator) / hardware.denominator


def test_coststats_under_an_exclusive_model_ignores_the_shares():
    exclusive = cost_model_parse(EXCLUSIVE)
    with_shares = cost_statistics(cost_table_build(exclusive, BATCH))
    without = cost_statistics(
        cost_table_build(exclusive, [record._replace(node_share=None) for record in BATCH])
    )
    assert with_shares == without


def test_coststats_refuses_a_share_outside_zero_to_one_naming_the_job():
    with pytest.raises(ValueError, match=r"job 7: a job's share of a node must be in \(0, 1\]"):
        cost_table_build(
            cost_model_parse(SHARED), [JobRecord("7", "nid1001", 60, None, Fraction(2))]
        )

"""The maths of a rate draft's impact (accounting.ledger.impact): re-pricing from per-shape sums
against re-pricing every job with ``charge()``, the slurm.conf lines a draft changes, and money
per node-second. Pure: no database."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from accounting.clusters.charging import (
    SU_QUANTUM,
    PartitionSpec,
    charge,
    node_share_even,
    split_evenly,
)
from accounting.clusters.specs import cluster_definition_parse
from accounting.costs.costmodels import cost_model_parse
from accounting.ledger.impact import (
    Shape,
    node_second_cost,
    rounded,
    shape_rate,
    shapes_repriced,
    weights_diff,
)
from tests.accounting.test_repricing_properties import partitions

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "examples" / "clusters" / "slurm-testbed.json"


@st.composite
def ledgers(draw: st.DrawFn) -> tuple[PartitionSpec, list[tuple[int, dict[str, Any], int]]]:
    """A draft partition and jobs of a few projects and shapes it can hold: (project, shape,
    elapsed seconds), as the ledger keeps them (memory to 3 places)."""
    spec = draw(partitions())
    shapes = []
    for _ in range(draw(st.integers(1, 4))):
        nodes = draw(st.integers(1, 4))
        shapes.append(
            {
                "nodes": nodes,
                "cores": draw(st.integers(nodes, nodes * spec.cores)),
                "memory_mb": draw(st.decimals(0, nodes * spec.memory_mb, places=3)),
                "gpus": draw(st.integers(0, nodes * spec.gpus)),
            }
        )
    jobs = draw(
        st.lists(
            st.tuples(st.integers(1, 3), st.sampled_from(shapes), st.integers(0, 10**7)),
            min_size=1,
            max_size=80,
        )
    )
    return spec, jobs


def _shape(project: int, shape: dict[str, Any], jobs: int, seconds: int) -> Shape:
    return Shape(
        project_id=project, partition="p", nnodes=shape["nodes"], cpus=shape["cores"],
        gpus=shape["gpus"], memory_mb=shape["memory_mb"], jobs=jobs, elapsed_seconds=seconds,
        service_units=Decimal(0),
    )  # fmt: skip


def _sums(jobs: list[tuple[int, dict[str, Any], int]]) -> list[Shape]:
    """The shape roll-up of ``jobs``: one row per project and shape, seconds summed."""
    sums: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
    for project, shape, seconds in jobs:
        row = sums.setdefault((project, tuple(sorted(shape.items()))), [shape, 0, 0])
        row[1] += 1
        row[2] += seconds
    return [
        _shape(project, shape, count, seconds)
        for (project, _), (shape, count, seconds) in sums.items()
    ]


@given(ledgers())
def test_per_shape_repricing_is_every_job_repriced_with_charge_and_summed(ledger) -> None:
    """Exact: each job's ``charge()`` is its shape's exact rate times its seconds rounded once,
    so the per-shape sum is the exact sum of the jobs' charges before their rounding; the
    rounded figure is within half a quantum per job (and one more half) of the rounded sum."""
    spec, jobs = ledger
    repriced = shapes_repriced(_sums(jobs), {"p": spec})

    for project in {project for project, _, _ in jobs}:
        mine = [(shape, seconds) for owner, shape, seconds in jobs if owner == project]
        exact = Fraction(0)
        each = Decimal(0)
        for shape, seconds in mine:
            usage = split_evenly(**shape)
            billed = charge(spec, usage, elapsed_seconds=seconds).service_units
            job_exact = Fraction(*shape_rate(spec, _shape(project, shape, 1, seconds))) * seconds
            assert rounded(job_exact) == billed  # the rate reproduces charge() to the last place
            exact += job_exact
            each += billed
        group = repriced[(project, "p")]
        assert group.jobs == len(mine)
        assert group.unpriced_jobs == 0
        assert group.draft_su_exact == exact
        assert abs(group.draft_su - each) <= (len(mine) + 1) * SU_QUANTUM / 2


def test_a_shape_the_draft_cannot_hold_is_counted_not_priced() -> None:
    cpu_only = PartitionSpec(name="p", sockets=2, cores_per_socket=64, memory_mb=256_000)
    shapes = [
        Shape(1, "p", 1, 8, 2, Decimal(1000), 3, 3600, Decimal(24)),  # 2 GPUs on a CPU node
        Shape(1, "p", 1, 8, 0, Decimal(1000), 1, 3600, Decimal(8)),
    ]
    group = shapes_repriced(shapes, {"p": cpu_only})[(1, "p")]
    assert (group.jobs, group.unpriced_jobs, group.charged_su) == (4, 3, Decimal(32))
    assert group.draft_su == Decimal(8)  # 8 of 128 cores of a 128-SU node for an hour
    assert len(group.problems) == 1


def _testbed() -> dict[str, PartitionSpec]:
    definition = cluster_definition_parse(json.loads(TESTBED.read_text()))
    return {item.name: item.charging for item in definition.partitions}


def test_a_new_gpu_tdp_changes_only_the_gpu_partitions_billing_weights_line() -> None:
    current = _testbed()
    draft = {**current, "gpu": replace(current["gpu"], gpu_tdp_watts=Decimal(560))}

    lines = weights_diff(current, draft)

    # eq 15: w = 8 * 560 / 280 * 64 = 1024 SU per node-hour (was 512): 16 per core, 128 per GPU
    assert [(line.partition, line.before, line.after) for line in lines] == [
        (
            "gpu",
            'PartitionName=gpu TRESBillingWeights="CPU=8,Mem=0.0020897959183674,GRES/gpu=64"',
            'PartitionName=gpu TRESBillingWeights="CPU=16,Mem=0.0041795918367347,GRES/gpu=128"',
        )
    ]


def test_an_unchanged_draft_changes_no_line_and_a_new_partition_adds_one() -> None:
    current = _testbed()
    assert weights_diff(current, current) == []
    added = weights_diff(current, {**current, "big": current["work"]})
    assert [(line.partition, line.before) for line in added] == [("big", None)]
    assert added[0].after.startswith("PartitionName=big ")


def test_money_per_node_second_is_the_partitions_average_node_hour_cost() -> None:
    model = cost_model_parse(
        "currency EUR\nnodes cheap nid[1001-1002]\nrate node 1 1/h\n"
        "nodes dear nid[1003-1004]\nrate node 3 1/h\n"
    )
    # two nodes at 1 EUR and two at 3 EUR per node-hour: 2 EUR per node-hour on average
    assert node_second_cost(model, "nid[1001-1004]") * 3600 == 2
    assert node_second_cost(model, "nid[1003-1004]") * 3600 == 3


@given(ledgers())
def test_money_node_seconds_follow_the_cost_models_one_rule(ledger) -> None:
    """A shared model charges each job's share of its nodes (eq 1's max fraction), as the cost
    pages do; an exclusive one whole nodes: the rate-change impact prices money by the same
    rule (``CostModel.charged_share``), not by whole node-seconds under every model."""
    spec, jobs = ledger
    (group,) = shapes_repriced(_sums([(1, shape, s) for _, shape, s in jobs]), {"p": spec}).values()
    exclusive = cost_model_parse("currency EUR\nnodes all n[1-4]\nrate node 1 1/h\n")
    shared = cost_model_parse("currency EUR\nnodes-are shared\nnodes all n[1-4]\nrate node 1 1/h\n")
    whole = sum(shape["nodes"] * seconds for _, shape, seconds in jobs)
    held = sum(
        (
            node_share_even(
                spec, nodes=shape["nodes"], cores=shape["cores"],
                memory_mb=shape["memory_mb"], gpus=shape["gpus"],
            ) * shape["nodes"] * seconds
            for _, shape, seconds in jobs
        ),
        Fraction(0),
    )  # fmt: skip
    assert group.paid_node_seconds(exclusive) == whole == group.node_seconds
    assert group.paid_node_seconds(shared) == held
    assert held <= whole

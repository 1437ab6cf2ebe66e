"""The rounding bound of re-pricing by shape (accounting.ledger.repricing): the engine rounds
each job once, to SU_QUANTUM, and a shape's summed seconds priced once can differ from the sum
of its jobs' prices by at most half a quantum per job and half a quantum more, so never by more
than one quantum per job. Pure: no database."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from accounting.clusters.charging import SU_QUANTUM, PartitionSpec, service_units, split_evenly

# The ledger prices with "energy"; the others are linear in the seconds too.
LINEAR_MODELS = ("energy", "core-hour", "whole-node", "linear")


@st.composite
def partitions(draw: st.DrawFn) -> PartitionSpec:
    """CPU and GPU partitions, some with a staff weight of six decimal places (a price per
    second that rarely terminates)."""
    gpus = draw(st.sampled_from([0, 0, 1, 4, 8]))
    override = draw(st.one_of(st.none(), st.decimals(Decimal("0.000001"), 2000, places=6)))
    return PartitionSpec(
        name="p",
        sockets=draw(st.integers(1, 4)),
        cores_per_socket=draw(st.integers(1, 96)),
        memory_mb=draw(st.integers(1, 2_000_000)),
        gpus=gpus,
        cpu_tdp_watts=Decimal(draw(st.integers(1, 500))),
        gpu_tdp_watts=Decimal(draw(st.integers(1, 800))) if gpus else Decimal(0),
        weight_override=override,
    )


@st.composite
def jobs_of_one_shape(draw: st.DrawFn) -> tuple[PartitionSpec, dict[str, object], list[int]]:
    """A partition, a shape its nodes can hold (sacct's totals, as the ledger keeps them:
    memory to 3 places) and the elapsed seconds of the jobs of that shape."""
    spec = draw(partitions())
    nodes = draw(st.integers(1, 4))
    shape = {
        "nodes": nodes,
        "cores": draw(st.integers(nodes, nodes * spec.cores)),
        "memory_mb": draw(st.decimals(0, nodes * spec.memory_mb, places=3)),
        "gpus": draw(st.integers(0, nodes * spec.gpus)),
    }
    seconds = draw(st.lists(st.integers(0, 10**7), min_size=1, max_size=60))
    return spec, shape, seconds


@given(jobs_of_one_shape(), st.sampled_from(LINEAR_MODELS))
def test_a_shape_priced_once_is_within_one_quantum_per_job_of_its_jobs_priced_each(
    jobs: tuple[PartitionSpec, dict[str, object], list[int]], model: str
) -> None:
    spec, shape, seconds = jobs
    usage = split_evenly(**shape)  # type: ignore[arg-type]

    each = sum(
        (service_units(spec, usage, elapsed_seconds=t, model=model) for t in seconds),
        Decimal(0),
    )
    once = service_units(spec, usage, elapsed_seconds=sum(seconds), model=model)

    difference = abs(each - once)
    assert difference <= len(seconds) * SU_QUANTUM
    assert difference <= (len(seconds) + 1) * SU_QUANTUM / 2


@given(st.lists(st.integers(0, 10**4), min_size=1, max_size=60))
def test_whole_hours_at_a_whole_number_weight_price_the_same_either_way(hours: list[int]) -> None:
    """Where no job's price needs rounding, the shape's price is exactly the jobs' sum."""
    spec = PartitionSpec(
        name="p", sockets=1, cores_per_socket=64, memory_mb=256_000,
        weight_override=Decimal(100),
    )  # fmt: skip
    usage = split_evenly(nodes=1, cores=16, memory_mb=Decimal(1000))
    seconds = [h * 3600 for h in hours]

    each = sum((service_units(spec, usage, elapsed_seconds=t) for t in seconds), Decimal(0))

    assert each == service_units(spec, usage, elapsed_seconds=sum(seconds))
    assert each == Decimal(25) * sum(hours)

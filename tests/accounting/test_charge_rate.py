"""``charge_rate``: the exact SU and Wh per second of a job's shape, which the columnar import
multiplies by each row's elapsed time. Property: ``rate.at(t)`` is ``charge(...)`` to the last
place, for every model, shape and time (hypothesis). Pure: no database."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounting.clusters.charging import (
    MODELS,
    ChargeError,
    PartitionSpec,
    SpecError,
    charge,
    charge_rate,
    split_evenly,
)
from tests.accounting.test_charging_properties import jobs

SETONIX_CPU = PartitionSpec(
    name="work", sockets=2, cores_per_socket=64, memory_mb=245760, gpus=0,
    cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(0),
)  # fmt: skip


@given(jobs(), st.sampled_from(sorted(MODELS)), st.integers(0, 10**9))
def test_the_rate_times_any_elapsed_time_is_the_charge_to_the_last_place(
    job: tuple[PartitionSpec, list, int], model: str, more_seconds: int
) -> None:
    spec, nodes, seconds = job
    try:
        charge(spec, nodes, elapsed_seconds=seconds, model=model)
    except SpecError as error:  # a model this spec lacks figures for: refused alike
        with pytest.raises(SpecError, match=re.escape(str(error))):
            charge_rate(spec, nodes, model=model)
        return
    rate = charge_rate(spec, nodes, model=model)
    for elapsed in (0, 1, seconds, seconds + more_seconds):
        expected = charge(spec, nodes, elapsed_seconds=elapsed, model=model)
        assert rate.at(elapsed) == (expected.service_units, expected.energy_wh)
        assert (rate.weight, rate.nodes, rate.dominant_resource) == (
            expected.weight, expected.nodes, expected.dominant_resource,
        )  # fmt: skip


@given(
    nodes=st.integers(1, 8),
    cores=st.integers(1, 128),
    memory_mb=st.integers(0, 245760),
    elapsed=st.integers(0, 366 * 86400),
)
def test_an_even_split_of_sacct_totals_is_priced_like_charge(
    nodes: int, cores: int, memory_mb: int, elapsed: int
) -> None:
    # The import's case: AllocTRES totals split evenly over NNodes (shares may not terminate).
    usage = split_evenly(nodes=nodes, cores=cores * nodes, memory_mb=memory_mb * nodes)
    rate = charge_rate(SETONIX_CPU, usage)
    expected = charge(SETONIX_CPU, usage, elapsed_seconds=elapsed)
    assert rate.at(elapsed) == (expected.service_units, expected.energy_wh)


def test_one_core_with_its_memory_for_an_hour_is_one_su_per_hour() -> None:
    rate = charge_rate(SETONIX_CPU, split_evenly(nodes=1, cores=1, memory_mb=1920))
    assert rate.service_units_per_second[0] * 3600 == rate.service_units_per_second[1]
    assert rate.at(3600)[0] == Decimal("1.000000")


def test_a_shape_the_partition_cannot_hold_is_refused_as_charge_refuses_it() -> None:
    with pytest.raises(ChargeError, match="129 cores"):
        charge_rate(SETONIX_CPU, split_evenly(nodes=1, cores=129, memory_mb=0))
    with pytest.raises(ChargeError, match="must not be negative"):
        charge_rate(SETONIX_CPU, split_evenly(nodes=1, cores=1, memory_mb=0)).at(-1)

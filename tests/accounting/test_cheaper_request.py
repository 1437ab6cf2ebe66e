"""The job page's "could have cost less" hint is a quote: the request it names, priced by
``quotes.quote_compute``, costs what the hint says. Pure: no database (unsaved models)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.clusters import charging
from accounting.clusters.quotes import QuoteRequest, cheaper_request, hours_of, quote_compute
from accounting.ledger.pages import _cheaper_request
from accounting.models import Job, Partition, PartitionVersion

# A GPU node whose GPUs' share of cores is not whole: 36 cores / 8 GPUs = 4.5 per GPU.
ODD_GPU_SPEC = charging.PartitionSpec(
    name="odd", sockets=1, cores_per_socket=36, memory_mb=256_000, gpus=8,
    cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(280),
)  # fmt: skip
# Setonix's CPU nodes: M / C = 1914.0625 MiB, which the old rule floored to 1914.
WORK_SPEC = charging.PartitionSpec(
    name="work", sockets=2, cores_per_socket=64, memory_mb=245_000, cpu_tdp_watts=Decimal(280)
)
GPU_SPEC = charging.PartitionSpec(
    name="gpu", sockets=1, cores_per_socket=64, memory_mb=245_000, gpus=8,
    cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(280),
)  # fmt: skip


def _version(spec: charging.PartitionSpec) -> PartitionVersion:
    """An unsaved rate version of ``spec``: the page reads it, nothing touches the database."""
    return PartitionVersion(
        partition=Partition(name=spec.name), sockets=spec.sockets,
        cores_per_socket=spec.cores_per_socket, memory_mb=spec.memory_mb, gpus=spec.gpus,
        cpu_tdp_watts=spec.cpu_tdp_watts, gpu_tdp_watts=spec.gpu_tdp_watts,
    )  # fmt: skip


def _job(spec: charging.PartitionSpec, *, nodes: int, cores: int, gpus: int, memory_mb,
         elapsed_seconds: int = 3600) -> Job:  # fmt: skip
    charge = charging.charge(
        spec,
        charging.split_evenly(nodes=nodes, cores=cores, memory_mb=memory_mb, gpus=gpus),
        elapsed_seconds=elapsed_seconds,
    )
    return Job(
        nnodes=nodes, cpus=cores, gpus=gpus, memory_mb=Decimal(memory_mb),
        elapsed_seconds=elapsed_seconds, service_units=charge.service_units,
        dominant_resource=charge.dominant_resource, charge_state=Job.ChargeState.CHARGED,
    )  # fmt: skip


def test_the_gpus_share_of_cores_on_the_page_is_the_one_a_gpu_quote_brings():
    version = _version(ODD_GPU_SPEC)
    spec = version.spec
    job = _job(spec, nodes=1, cores=36, gpus=1, memory_mb=1000)
    hint = _cheaper_request(job, version)
    assert hint is not None
    # `quote --gpus-per-node 1` with the cores left out: the GPU brings ceil(4.5) = 5 cores.
    quoted = quote_compute(
        spec,
        QuoteRequest(nodes=1, hours=Decimal(1), gpus_per_node=1, memory_per_node_mb=Decimal(1000)),
    )
    assert quoted.nodes[0].cores == Decimal(5) / 36
    assert hint.service_units == quoted.service_units
    assert "(5 per node instead of 36)" in hint.what


def test_the_cores_share_of_memory_on_the_page_is_exact():
    version = _version(WORK_SPEC)
    spec = version.spec
    job = _job(spec, nodes=1, cores=64, gpus=0, memory_mb=200_000)
    hint = _cheaper_request(job, version)
    assert hint is not None
    # 64 cores' share of 245,000 MiB over 128 cores is 122,500 MiB (not 64 x 1914 = 122,496).
    assert "(122,500 MiB per node instead of 200,000 MiB)" in hint.what
    quoted = quote_compute(
        spec,
        QuoteRequest(nodes=1, hours=Decimal(1), cores_per_node=Decimal(64),
                     memory_per_node_mb=Decimal(122_500)),
    )  # fmt: skip
    assert hint.service_units == quoted.service_units == 64


# --------------------------------------------------------------------------------------------
# The rule itself (quotes.cheaper_request): each suggestion is the quote of the request it names


def _suggest(spec, *, nodes, cores, gpus, memory_mb, elapsed_seconds=3600):
    """The rule for a job of this shape, charged by the engine as the ledger charges it."""
    usage = charging.split_evenly(nodes=nodes, cores=cores, memory_mb=memory_mb, gpus=gpus)
    charged = charging.charge(spec, usage, elapsed_seconds=elapsed_seconds)
    suggestion = cheaper_request(
        spec, nodes=nodes, cores=cores, gpus=gpus, memory_mb=memory_mb,
        elapsed_seconds=elapsed_seconds, service_units=charged.service_units,
        dominant_resource=charged.dominant_resource,
    )  # fmt: skip
    return charged, suggestion


def _quoted(spec, **request) -> Decimal:
    return quote_compute(spec, QuoteRequest(**request)).service_units


TINY = charging.PartitionSpec(name="tiny", sockets=1, cores_per_socket=4, memory_mb=10)


# (spec, the job: nodes, cores, GPUs, MiB, hours; the request per node: cores, GPUs, MiB)
@pytest.mark.parametrize(
    ("spec", "job", "per_node"),
    [
        # 4 cores' share of memory: 4 x 1914.0625 MiB
        pytest.param(WORK_SPEC, (1, 4, 0, 100_000, 2), (4, 0, "7656.25"),
                     id="memory-dominated CPU job"),
        pytest.param(WORK_SPEC, (4, 64, 0, 600_000, 1), (16, 0, 30_625),
                     id="memory-dominated CPU job on 4 nodes"),
        # one GCD brings 8 cores and an eighth of the memory
        pytest.param(GPU_SPEC, (1, 8, 1, 100_000, 1), (8, 1, 30_625),
                     id="memory-dominated GPU job"),
        # one core and two GCDs: the GPUs' share of memory is the larger
        pytest.param(GPU_SPEC, (1, 1, 2, 150_000, 1), (1, 2, 61_250),
                     id="memory-dominated GPU job, GPUs' share"),
        # 64 cores with 2 GCDs: their share is 16 cores; memory already below it stays
        pytest.param(GPU_SPEC, (1, 64, 2, 50_000, 1), (16, 2, 50_000), id="core-heavy GPU job"),
        # memory above the 16 cores' share is cut to it
        pytest.param(GPU_SPEC, (2, 128, 4, 400_000, 1), (16, 2, 61_250),
                     id="core-heavy GPU job on 2 nodes"),
        # the old rule floored M / C: 64 x 1914 = 122,496 MiB
        pytest.param(WORK_SPEC, (1, 64, 0, 200_000, 1), (64, 0, 122_500),
                     id="old floor: exact cores' share of memory"),
        # ... and 2.5 MiB for 1.25 cores per node (1 core-equivalent); exactly 3.125 is 2
        pytest.param(TINY, (4, 5, 0, 40, 1), (Decimal("1.25"), 0, "3.125"),
                     id="old floor: a fractional core's exact share"),
        # the old rule rounded 4.5 cores half-even, to 4
        pytest.param(ODD_GPU_SPEC, (1, 36, 1, 1000, 1), (5, 1, 1000),
                     id="old half-even: GPUs' share of cores rounds up"),
        # ... and took 9 cores over both nodes: 4.5 per node
        pytest.param(ODD_GPU_SPEC, (2, 72, 2, 2000, 1), (5, 1, 1000),
                     id="old totals: GPUs' share of cores per node"),
    ],
)  # fmt: skip
def test_the_suggestion_costs_what_quote_says_for_the_request_it_names(spec, job, per_node):
    nodes, cores, gpus, memory_mb, hours = job
    charged, suggestion = _suggest(
        spec, nodes=nodes, cores=cores, gpus=gpus, memory_mb=memory_mb,
        elapsed_seconds=hours * 3600,
    )  # fmt: skip
    request = QuoteRequest(
        nodes=nodes, hours=Decimal(hours), cores_per_node=Decimal(per_node[0]),
        gpus_per_node=per_node[1], memory_per_node_mb=Decimal(per_node[2]),
    )  # fmt: skip
    assert suggestion is not None
    assert suggestion.request == request
    assert suggestion.service_units == quote_compute(spec, request).service_units
    assert suggestion.service_units < charged.service_units
    assert suggestion.saving == charged.service_units - suggestion.service_units


def test_a_memory_suggestion_is_the_quote_with_memory_left_out():
    # One rule: the quote's default memory is the cores' share the hint names.
    _, suggestion = _suggest(WORK_SPEC, nodes=2, cores=6, gpus=0, memory_mb=90_000)
    assert suggestion is not None
    assert suggestion.service_units == _quoted(
        WORK_SPEC, nodes=2, hours=Decimal(1), cores_per_node=Decimal(3)
    )


def test_a_cores_suggestion_is_the_quote_with_cores_left_out():
    # One rule: the quote's default cores for a GPU request are the GPUs' share the hint names.
    _, suggestion = _suggest(ODD_GPU_SPEC, nodes=1, cores=30, gpus=3, memory_mb=1000)
    assert suggestion is not None
    assert suggestion.request.cores_per_node == 14  # ceil(3 x 36 / 8) = ceil(13.5)
    assert suggestion.service_units == _quoted(
        ODD_GPU_SPEC, nodes=1, hours=Decimal(1), gpus_per_node=3,
        memory_per_node_mb=Decimal(1000),
    )  # fmt: skip


@pytest.mark.parametrize(
    "job",
    [
        {"nodes": 1, "cores": 4, "gpus": 0, "memory_mb": 1000},  # cores dominate on a CPU node
        {"nodes": 1, "cores": 128, "gpus": 0, "memory_mb": 245_000},  # a whole node
    ],
)
def test_no_suggestion_when_no_share_rule_applies(job):
    assert _suggest(WORK_SPEC, **job)[1] is None


def test_no_suggestion_for_a_gpu_job_within_its_gpus_share_of_cores():
    assert _suggest(GPU_SPEC, nodes=1, cores=8, gpus=1, memory_mb=1000)[1] is None


def test_no_suggestion_for_gpus_that_do_not_split_whole_over_the_nodes():
    # --gpus-per-node names whole GPUs: 3 GPUs on 2 nodes is no request's shape.
    assert _suggest(GPU_SPEC, nodes=2, cores=128, gpus=3, memory_mb=1000)[1] is None


def test_no_suggestion_for_a_job_that_cost_nothing_or_held_no_node():
    kwargs = {"cores": 4, "gpus": 0, "memory_mb": 100_000, "elapsed_seconds": 60,
                  "dominant_resource": "memory"}  # fmt: skip
    assert cheaper_request(WORK_SPEC, nodes=1, service_units=Decimal(0), **kwargs) is None
    assert cheaper_request(WORK_SPEC, nodes=0, service_units=Decimal(5), **kwargs) is None


# --------------------------------------------------------------------------------------------
# Properties


@st.composite
def partitions(draw: st.DrawFn) -> charging.PartitionSpec:
    """CPU and GPU partitions, shares whole or not (36 cores / 8 GPUs, M / C non-terminating)."""
    gpus = draw(st.sampled_from([0, 0, 1, 3, 4, 8]))
    return charging.PartitionSpec(
        name="p",
        sockets=draw(st.integers(1, 2)),
        cores_per_socket=draw(st.integers(1, 64)),
        memory_mb=draw(st.integers(1, 1_000_000)),
        gpus=gpus,
        cpu_tdp_watts=Decimal(draw(st.integers(1, 400))),
        gpu_tdp_watts=Decimal(draw(st.integers(1, 800))) if gpus else Decimal(0),
    )


@st.composite
def jobs(draw: st.DrawFn) -> tuple[charging.PartitionSpec, dict]:
    spec = draw(partitions())
    nodes = draw(st.integers(1, 4))
    return spec, {
        "nodes": nodes,
        "cores": draw(st.integers(1, nodes * spec.cores)),
        "gpus": draw(st.integers(0, nodes * spec.gpus)),
        "memory_mb": draw(
            st.one_of(
                st.integers(0, nodes * spec.memory_mb),
                st.decimals(0, nodes * spec.memory_mb, places=3),
            )
        ),
        "elapsed_seconds": draw(st.integers(1, 10**7)),
    }


@settings(max_examples=300)
@given(jobs())
def test_a_suggestion_never_costs_more_than_the_charge_and_is_the_quote_of_its_request(job):
    spec, shape = job
    charged, suggestion = _suggest(spec, **shape)
    if suggestion is None:
        return
    assert 0 < suggestion.saving == charged.service_units - suggestion.service_units
    quoted = quote_compute(spec, suggestion.request)
    assert quoted.service_units == suggestion.service_units
    assert quoted.hours == charged.hours  # the same seconds, not one more
    # What would not save is not suggested: the same job charged no more than the suggestion.
    again = cheaper_request(
        spec, **shape, service_units=suggestion.service_units,
        dominant_resource=charged.dominant_resource,
    )  # fmt: skip
    assert again is None


@given(st.integers(1, 10**12))
def test_hours_of_gives_the_quote_back_the_same_seconds(elapsed_seconds):
    charge = quote_compute(WORK_SPEC, QuoteRequest(nodes=1, hours=hours_of(elapsed_seconds)))
    assert charge.hours == Decimal(elapsed_seconds) / 3600

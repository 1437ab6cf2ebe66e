"""Job efficiency and the right-sized charge: worked examples and the properties a user checks
(never more than the charge, the charge itself for a job that used all it held)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import assume, given
from hypothesis import strategies as st

from accounting.clusters.charging import charge, split_evenly
from accounting.clusters.efficiency import (
    MEMORY_SUMMED,
    Held,
    JobUsage,
    Request,
    job_efficiency,
    right_sized_request,
    right_sized_service_units,
    waste_named,
)
from tests.accounting.test_charging import SETONIX_GPU, SETONIX_WORK

HOUR = 3600


def _charged(spec, held: Held) -> Decimal:
    nodes = split_evenly(
        nodes=held.nnodes, cores=held.cpus, memory_mb=held.memory_mb, gpus=held.gpus
    )
    return charge(spec, nodes, elapsed_seconds=held.elapsed_seconds).service_units


def test_a_job_that_asked_for_64_cores_and_used_4_would_have_cost_a_sixteenth():
    held = Held(nnodes=1, cpus=64, memory_mb=Decimal(64 * 1914), gpus=0, elapsed_seconds=HOUR,
                timelimit_minutes=120)  # fmt: skip
    usage = JobUsage(cpu_seconds=Decimal("3.9") * HOUR, memory_peak_mb=Decimal(3000))

    efficiency = job_efficiency(held, usage)
    request = right_sized_request(SETONIX_WORK, held, usage)
    right = right_sized_service_units(
        SETONIX_WORK, held, usage, service_units=_charged(SETONIX_WORK, held)
    )

    assert efficiency.cpu == Decimal("0.0609")  # 3.9 / 64
    assert efficiency.memory == Decimal("0.0245")  # 3000 / 122496
    assert efficiency.walltime == Decimal("0.5000")
    assert efficiency.gpu is None  # no GPUs held
    # 4 whole cores; 3000 MiB is 2 core-equivalents (1914.0625 MiB each): cores dominate.
    assert request == Request(cores=4, memory_mb=Decimal(3000).max(request.memory_mb), gpus=0)
    assert request.memory_mb == 2 * SETONIX_WORK.memory_per_core_mb
    assert _charged(SETONIX_WORK, held) == Decimal(64)  # 64 / 128 of a node at 128 SU/h
    assert right == Decimal(4)
    assert waste_named(SETONIX_WORK, held, usage, request) == "asked for 64 cores, used 3.9"


def test_memory_rounds_up_to_whole_core_equivalents_and_can_be_the_waste():
    held = Held(nnodes=1, cpus=8, memory_mb=Decimal(200_000), gpus=0, elapsed_seconds=HOUR)
    usage = JobUsage(cpu_seconds=Decimal(8 * HOUR), memory_peak_mb=Decimal(20_000))

    request = right_sized_request(SETONIX_WORK, held, usage)

    # 20,000 MiB / 1914.0625 = 10.45 -> 11 core-equivalents; cores were all used.
    assert request == Request(cores=8, memory_mb=11 * SETONIX_WORK.memory_per_core_mb, gpus=0)
    assert job_efficiency(held, usage).memory == Decimal("0.1000")
    assert waste_named(SETONIX_WORK, held, usage, request) == (
        "asked for 195.3 GiB of memory, used at most 19.5 GiB"
    )
    right = right_sized_service_units(
        SETONIX_WORK, held, usage, service_units=_charged(SETONIX_WORK, held)
    )
    assert right == Decimal(11)  # 11 core-equivalents dominate 8 cores: 11 SU for the hour


def test_gpus_are_right_sized_only_where_their_use_is_measured():
    held = Held(nnodes=1, cpus=32, memory_mb=Decimal(120_000), gpus=4, elapsed_seconds=HOUR)
    unmeasured = JobUsage(cpu_seconds=Decimal(HOUR), memory_peak_mb=Decimal(1000))
    measured = JobUsage(
        cpu_seconds=Decimal(HOUR), memory_peak_mb=Decimal(1000), gpu_utilisation=Decimal(30)
    )

    assert right_sized_request(SETONIX_GPU, held, unmeasured).gpus == 4
    assert job_efficiency(held, unmeasured).gpu is None
    assert right_sized_request(SETONIX_GPU, held, measured).gpus == 2  # 4 x 30 % = 1.2 -> 2
    assert job_efficiency(held, measured).gpu == Decimal("0.3000")


def test_a_job_without_usage_data_has_no_efficiency_and_no_right_sized_charge():
    held = Held(nnodes=2, cpus=256, memory_mb=Decimal(490_000), gpus=0, elapsed_seconds=HOUR,
                timelimit_minutes=60)  # fmt: skip
    usage = JobUsage(memory_peak_mb=Decimal(1000))  # steps without TotalCPU

    assert job_efficiency(held, usage).walltime is None
    assert right_sized_request(SETONIX_WORK, held, usage) is None
    assert right_sized_service_units(SETONIX_WORK, held, usage, service_units=Decimal(1)) is None
    assert waste_named(SETONIX_WORK, held, usage, None) == ""


def test_a_refunded_job_leaves_nothing_on_the_table():
    held = Held(nnodes=1, cpus=64, memory_mb=Decimal(1000), gpus=0, elapsed_seconds=HOUR)
    usage = JobUsage(cpu_seconds=Decimal(HOUR))

    right = right_sized_service_units(SETONIX_WORK, held, usage, service_units=Decimal(0))

    assert right == 0


def test_merging_keeps_the_largest_of_each_measurement_in_any_order():
    a = JobUsage(cpu_seconds=Decimal(10), memory_peak_mb=Decimal(5))
    b = JobUsage(memory_peak_mb=Decimal(7), gpu_utilisation=Decimal(40))

    assert a.merged(b) == b.merged(a) == JobUsage(Decimal(10), Decimal(7), Decimal(40), None)
    assert a.merged(b).merged(b) == a.merged(b)
    assert a.merged(None) is a


# --- properties --------------------------------------------------------------------------------

SPECS = st.sampled_from([SETONIX_WORK, SETONIX_GPU])


@st.composite
def jobs(draw: st.DrawFn) -> tuple[object, Held, JobUsage]:
    spec = draw(SPECS)
    nnodes = draw(st.integers(min_value=1, max_value=4))
    cores_per_node = draw(st.integers(min_value=1, max_value=spec.cores))
    memory_per_node = draw(st.integers(min_value=1, max_value=spec.memory_mb))
    gpus_per_node = draw(st.integers(min_value=0, max_value=spec.gpus))
    elapsed = draw(st.integers(min_value=1, max_value=48 * HOUR))
    held = Held(
        nnodes=nnodes, cpus=cores_per_node * nnodes, memory_mb=Decimal(memory_per_node * nnodes),
        gpus=gpus_per_node * nnodes, elapsed_seconds=elapsed,
        timelimit_minutes=draw(st.one_of(st.none(), st.integers(min_value=1, max_value=5000))),
    )  # fmt: skip
    share = st.decimals(min_value=0, max_value=Decimal("1.2"), places=4)
    usage = JobUsage(
        cpu_seconds=draw(share) * held.cpus * elapsed,
        memory_peak_mb=draw(st.one_of(st.none(), share.map(lambda s: s * held.memory_mb))),
        gpu_utilisation=draw(st.one_of(st.none(), share.map(lambda s: s * 100))),
    )
    return spec, held, usage


@given(jobs())
def test_the_right_sized_charge_never_exceeds_the_charge(job):
    spec, held, usage = job
    charged = _charged(spec, held)

    right = right_sized_service_units(spec, held, usage, service_units=charged)

    assert right is not None
    assert 0 <= right <= charged
    efficiency = job_efficiency(held, usage)
    for ratio in (efficiency.cpu, efficiency.memory, efficiency.gpu, efficiency.walltime):
        assert ratio is None or 0 <= ratio <= 1


@given(jobs())
def test_a_job_that_used_all_it_held_is_right_sized_to_its_charge(job):
    spec, held, _ = job
    assume(held.memory_mb > 0)
    full = JobUsage(
        cpu_seconds=Decimal(held.cpus * held.elapsed_seconds),
        memory_peak_mb=held.memory_mb,
        gpu_utilisation=Decimal(100),
    )
    charged = _charged(spec, held)

    assert right_sized_request(spec, held, full) == Request(held.cpus, held.memory_mb, held.gpus)
    assert right_sized_service_units(spec, held, full, service_units=charged) == charged
    assert waste_named(spec, held, full, right_sized_request(spec, held, full)) == ""


# --- reading usage from sacct's columns ----------------------------------------------------------


def test_a_steps_gpu_use_is_read_where_slurms_gpu_plugin_records_it():
    """The testbed has no NVML, so its dumps never carry gres/gpuutil: the shapes here are those
    sacct prints when AcctGatherProfile measures GPUs (a percent, and memory in its units)."""
    from accounting.ledger.sacct import usage_from_columns

    usage = usage_from_columns(
        "01:02:03",
        "2048K",
        "cpu=01:02:03,energy=0,fs/disk=1,gres/gpumem=3G,gres/gpuutil=140,mem=4096K,vmem=1K",
        "cpu=00:31:00,gres/gpumem=2G,gres/gpuutil=90,mem=3072K",
        "cpu=00:31:00,gres/gpumem=1536M,gres/gpuutil=45,mem=2048K",
    )

    assert usage == JobUsage(
        cpu_seconds=Decimal(3723),
        memory_peak_mb=Decimal(4),  # TRESUsageInTot mem, the sum over tasks; not MaxRSS
        gpu_utilisation=Decimal(45),  # the step's mean
        gpu_memory_peak_mb=Decimal(2048),  # the largest task's
        memory_basis=MEMORY_SUMMED,
    )


def test_a_step_without_a_usage_sample_says_nothing_of_memory():
    """Seen on the testbed (tests/data/efficiency/README.md): MaxRSS empty, TRESUsageInTot just
    energy=0."""
    from accounting.ledger.sacct import usage_from_columns

    usage = usage_from_columns("00:00.001", "", "energy=0", "", "energy=0")

    assert usage == JobUsage(cpu_seconds=Decimal("0.001"))


def test_a_json_steps_usage_is_read_from_what_sacct_calls_requested():
    """sacct --json names TRESUsageIn "tres.requested" (raw units: bytes, percent), and a
    step's time.total has microseconds that are not normalised."""
    from accounting.ledger.sacct_json import _step_usage

    step = {
        "time": {"total": {"seconds": 14, "microseconds": 1038175}},
        "tres": {
            "requested": {
                "total": [{"type": "mem", "name": "", "count": 1090125824}],
                "max": [{"type": "gres", "name": "gpumem", "count": 2 * 1024**3}],
                "average": [{"type": "gres", "name": "gpuutil", "count": 45}],
            }
        },
    }

    assert _step_usage(step) == JobUsage(
        cpu_seconds=Decimal("15.038175"),
        memory_peak_mb=Decimal(1090125824) / 1024**2,
        gpu_utilisation=Decimal(45),
        gpu_memory_peak_mb=Decimal(2048),
        memory_basis=MEMORY_SUMMED,
    )

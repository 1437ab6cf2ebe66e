"""Peak performance, Q(T) paper eqs 1-8, against published hardware. Pure: no database."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from accounting.clusters.specs import (
    CpuPeak,
    GpuPeak,
    cluster_definition_load,
    cluster_definition_parse,
)
from accounting.utilisation.peak import (
    DevicePeak,
    NodePeak,
    PeakError,
    PeakPeriod,
    PeakSource,
    cluster_peak_flops,
    cluster_peak_steps,
    cpu_peak_flops,
    epoch_seconds,
    from_epoch_seconds,
    gpu_peak_flops,
    node_peak,
    node_peak_from_definition,
    peak_timeline,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"
MILAN = CpuPeak(n_stream=1, n_unit=16, frequency_hz=Decimal("2.45e9"))
V100 = GpuPeak(n_cuda=5120, n_tensor=640, matrix_order=4, frequency_hz=Decimal("1.53e9"))


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2024, 3, 1, hour, minute, tzinfo=UTC)


# eq 3 and eq 7 -------------------------------------------------------------------------------


def test_epyc_7763_peak_is_2_5088_tflops_by_eq_3():
    # 64 cores * 1 thread * 16 FLOP per cycle * 2.45 GHz
    assert cpu_peak_flops(cores=64, n_stream=1, n_unit=16, frequency_hz=Decimal("2.45e9")) == (
        Decimal("2.5088e12")
    )


def test_v100_peak_by_eq_7_counts_cuda_and_tensor_cores():
    # (5120 + 640 * 4^2 * (2*4 - 1)) * 1.53e9 = 76800 * 1.53e9
    flops = gpu_peak_flops(
        n_cuda=5120, n_tensor=640, matrix_order=4, frequency_hz=Decimal("1.53e9")
    )
    assert flops == Decimal("117.504e12")


def test_a_gpu_without_tensor_cores_is_its_cuda_cores_times_the_clock():
    assert gpu_peak_flops(n_cuda=2048, n_tensor=0, matrix_order=0, frequency_hz=10**9) == (
        Decimal("2.048e12")
    )


def test_tensor_cores_without_a_matrix_order_are_refused():
    with pytest.raises(PeakError, match="matrix_order"):
        gpu_peak_flops(n_cuda=0, n_tensor=640, matrix_order=0, frequency_hz=10**9)


def test_a_float_frequency_is_refused():
    with pytest.raises(PeakError, match="Decimal or an int"):
        cpu_peak_flops(cores=64, n_stream=1, n_unit=16, frequency_hz=2.45e9)


# eqs 2, 8 and 1 ------------------------------------------------------------------------------


def test_node_peak_from_parameters_says_it_used_the_formula():
    node = node_peak(sockets=2, cores_per_socket=64, cpu_parameters=MILAN)
    assert node.cpu == DevicePeak(Decimal("2.5088e12"), PeakSource.FORMULA)
    assert node.host_flops == Decimal("5.0176e12")  # eq 2: 2 * P_cpu
    assert node.sources == {PeakSource.FORMULA}


def test_a_vendor_peak_replaces_the_parameters_and_says_so():
    node = node_peak(
        sockets=1,
        cores_per_socket=64,
        cpu_parameters=MILAN,
        cpu_vendor_flops=Decimal("2.0e12"),
        gpus=4,
        gpu_parameters=V100,
    )
    assert node.cpu == DevicePeak(Decimal("2.0e12"), PeakSource.VENDOR)
    assert node.gpu == DevicePeak(Decimal("117.504e12"), PeakSource.FORMULA)
    assert node.sources == {PeakSource.VENDOR, PeakSource.FORMULA}


def test_host_peak_counts_every_gpu_as_eq_2_says_not_one_as_eq_8_prints():
    node = node_peak(
        sockets=2, cores_per_socket=20, cpu_vendor_flops=10**12, gpus=4, gpu_parameters=V100
    )
    assert node.host_flops == 2 * Decimal(10**12) + 4 * Decimal("117.504e12")


def test_a_node_without_any_cpu_peak_is_refused():
    with pytest.raises(PeakError, match="no CPU peak"):
        node_peak(sockets=2, cores_per_socket=64)


def test_a_gpu_node_without_any_gpu_peak_is_refused():
    with pytest.raises(PeakError, match="no GPU peak"):
        node_peak(sockets=1, cores_per_socket=64, cpu_parameters=MILAN, gpus=8)


def test_one_core_has_the_cpu_peak_divided_by_the_cores_of_one_cpu_exactly():
    # eq 10's P_cpu / n for a Xeon Gold 6240 (18 cores, 1.5e12): no decimal holds 1.5e12 / 18
    node = node_peak(sockets=2, cores_per_socket=18, cpu_vendor_flops=Decimal("1.5e12"))
    assert node.core_flops == Fraction(1_500_000_000_000, 18)
    assert node.core_flops * node.cores == 2 * Decimal("1.5e12")


def test_setonix_spec_file_gives_the_peaks_it_implies():
    definition = cluster_definition_load(EXAMPLES / "setonix.json")
    nodes = {
        part.name: (part.node_count, node_peak_from_definition(part))
        for part in definition.partitions
    }
    work_count, work = nodes["work"]
    gpu_count, gpu = nodes["gpu"]
    assert work.host_flops == Decimal("5.0176e12")  # 2 x EPYC 7763
    assert work.sources == {PeakSource.FORMULA}
    # 1 x 64 cores at 2.0 GHz (eq 3) + 8 GCDs at the vendor's 23.95 TFLOP/s
    assert gpu.host_flops == Decimal("2.048e12") + 8 * Decimal("23.95e12")
    assert gpu.sources == {PeakSource.FORMULA, PeakSource.VENDOR}
    # eq 1 over the whole machine: 1592 + 8 CPU nodes and 154 GPU nodes
    assert cluster_peak_flops(nodes.values()) == Decimal("37.849952e15")
    assert (work_count, gpu_count) == (1592, 154)


def test_a_spec_partition_without_peak_data_is_named_in_the_error():
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    del document["partitions"][1]["cpu_peak"]  # highmem
    highmem = cluster_definition_parse(document).partitions[1]
    with pytest.raises(PeakError, match="partition 'highmem': no CPU peak"):
        node_peak_from_definition(highmem)


# P_peak over time ----------------------------------------------------------------------------

NODE = NodePeak(
    sockets=1, cores_per_socket=4, cpu=DevicePeak(Decimal(4 * 10**9), PeakSource.VENDOR)
)


def test_peak_is_a_step_function_of_the_node_count():
    timeline = peak_timeline([PeakPeriod(at(11), 20, NODE), PeakPeriod(at(10), 10, NODE)])
    assert timeline.peak_at(at(9)) == 0  # before the first period: no nodes
    assert timeline.peak_at(at(10)) == Decimal(40 * 10**9)
    assert timeline.peak_at(at(10, 59)) == Decimal(40 * 10**9)
    assert timeline.peak_at(at(11)) == Decimal(80 * 10**9)
    assert [(step.start, step.end, step.peak_flops) for step in timeline.steps(at(9), at(12))] == [
        (at(9), at(10), 0),
        (at(10), at(11), Decimal(40 * 10**9)),
        (at(11), at(12), Decimal(80 * 10**9)),
    ]


def test_operations_integrate_the_peak_over_the_window_by_eq_9():
    timeline = peak_timeline([PeakPeriod(at(10), 10, NODE), PeakPeriod(at(11), 20, NODE)])
    assert timeline.operations(at(10, 30), at(12)) == 40 * 10**9 * 1800 + 80 * 10**9 * 3600


def test_removing_every_node_leaves_no_capacity():
    timeline = peak_timeline([PeakPeriod(at(10), 10, NODE), PeakPeriod(at(11), 0, NODE)])
    assert timeline.operations(at(11), at(12)) == 0


def test_two_periods_at_the_same_instant_are_refused():
    with pytest.raises(PeakError, match="two periods"):
        peak_timeline([PeakPeriod(at(10), 10, NODE), PeakPeriod(at(10), 12, NODE)])


def test_a_naive_datetime_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        PeakPeriod(datetime(2024, 3, 1), 10, NODE)


def test_cluster_peak_steps_add_the_partitions():
    cpu = peak_timeline([PeakPeriod(at(10), 10, NODE)])
    more = peak_timeline([PeakPeriod(at(11), 5, NODE)])
    steps = cluster_peak_steps([cpu, more], at(10), at(12))
    assert [step.peak_flops for step in steps] == [Decimal(40 * 10**9), Decimal(60 * 10**9)]


def test_epoch_seconds_round_trip():
    assert from_epoch_seconds(epoch_seconds(at(10, 30))) == at(10, 30)

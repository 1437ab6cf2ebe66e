"""The explorer's "my application": a tie is called a tie, in SU and in energy. Pure."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from accounting.clusters.charging import PartitionSpec
from accounting.clusters.cost_ratio import paper_test_system
from accounting.clusters.explorer import (
    comparison_problem,
    lower_side,
    my_application,
    usable_models,
)

# Setonix as examples/clusters/setonix.json has it: the energy model weighs a CPU node 128 SU
# and a GPU node 512 SU, and their TDPs are 2 x 280 W and 8 x 280 W, so at speedup 4 one CPU
# node-hour and a quarter GPU node-hour both cost 128 SU and 560 Wh.
SETONIX_WORK = PartitionSpec(
    name="work", sockets=2, cores_per_socket=64, memory_mb=245000, cpu_tdp_watts=Decimal(280)
)
SETONIX_GPU = PartitionSpec(
    name="gpu", sockets=1, cores_per_socket=64, memory_mb=245000, gpus=8,
    cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(280),
)  # fmt: skip


def _on_setonix(speedup: str):
    return my_application(
        SETONIX_WORK, SETONIX_GPU, cpu_node_hours=Decimal(1), gpu_node_hours=1 / Decimal(speedup)
    )


@pytest.mark.parametrize(
    ("speedup", "fewer_su", "less_energy", "headline", "sentence"),
    [
        ("3", "cpu", "cpu", "Pick the CPU partition (work)",
         "It costs fewer SU on the CPU node, and it uses less energy there too."),
        ("3.99", "cpu", "cpu", "Pick the CPU partition (work)",
         "It costs fewer SU on the CPU node, and it uses less energy there too."),
        ("4", "same", "same", "Either partition: the same SU and energy",
         "It costs the same SU and uses the same energy on both nodes."),
        ("4.01", "gpu", "gpu", "Pick the GPU partition (gpu)",
         "It costs fewer SU on the GPU node, and it uses less energy there too."),
        ("5", "gpu", "gpu", "Pick the GPU partition (gpu)",
         "It costs fewer SU on the GPU node, and it uses less energy there too."),
    ],
)  # fmt: skip
def test_around_setonixs_break_even_the_pick_and_its_reason_are_true(
    speedup, fewer_su, less_energy, headline, sentence
):
    result = _on_setonix(speedup)
    assert (result.fewer_su, result.less_energy) == (fewer_su, less_energy)
    assert result.headline == headline
    assert result.sentence == sentence


def test_at_speedup_4_both_nodes_cost_128_su_and_560_wh_and_nothing_is_called_fewer():
    result = _on_setonix("4")
    assert result.cpu.service_units == result.gpu.service_units == 128
    assert result.cpu.energy_wh == result.gpu.energy_wh == 560
    assert result.recommended == "same"
    assert "fewer" not in result.sentence
    assert "less" not in result.sentence


# The paper's CPU node against a GPU node of 2 x 36 cores: eq 15 weighs it 1600/300 x 72 = 384 SU,
# so SU break even at speedup 32/3 while energy (300 Wh against 1600/s Wh) does at 16/3.
PAPER_CPU, PAPER_GPU = paper_test_system()
WIDE_GPU = replace(PAPER_GPU, cores_per_socket=36)


@pytest.mark.parametrize(
    ("cpu_node_hours", "gpu_node_hours", "fewer_su", "less_energy", "sentence"),
    [
        # speedup 16/3: the same energy (600 Wh), fewer SU on the CPU node (72 against 144)
        ("2", "0.375", "cpu", "same",
         "It costs fewer SU on the CPU node, and it uses the same energy on both."),
        # speedup 32/3: the same SU (72), less energy on the GPU node (300 Wh against 600 Wh)
        ("2", "0.1875", "same", "gpu",
         "It costs the same SU on both, and uses less energy on the GPU node."),
        # speedup 8: between the two, the SU pick and the energy pick differ
        ("2", "0.25", "cpu", "gpu",
         "It costs fewer SU on the CPU node, although it would use less energy on the GPU node."),
    ],
)  # fmt: skip
def test_a_tie_in_one_figure_only_is_named_as_such(
    cpu_node_hours, gpu_node_hours, fewer_su, less_energy, sentence
):
    result = my_application(
        PAPER_CPU, WIDE_GPU,
        cpu_node_hours=Decimal(cpu_node_hours), gpu_node_hours=Decimal(gpu_node_hours),
    )  # fmt: skip
    assert (result.fewer_su, result.less_energy) == (fewer_su, less_energy)
    assert result.sentence == sentence


def test_an_su_tie_is_settled_by_energy():
    result = my_application(
        PAPER_CPU, WIDE_GPU, cpu_node_hours=Decimal(2), gpu_node_hours=Decimal("0.1875")
    )
    assert result.recommended == "gpu"
    assert result.headline == "Pick the GPU partition (gpu)"


@pytest.mark.parametrize(
    ("on_cpu", "on_gpu", "shown", "side"),
    [
        ("128.004", "128.001", "0.01", "same"),  # both shown as 128.00
        ("128.005", "128.004", "0.01", "gpu"),  # 128.01 against 128.00
        ("559.6", "560.4", "1", "same"),  # both shown as 560 Wh
        ("559.4", "560.4", "1", "cpu"),
    ],
)
def test_figures_are_compared_as_the_user_sees_them(on_cpu, on_gpu, shown, side):
    assert lower_side(Decimal(on_cpu), Decimal(on_gpu), shown=Decimal(shown)) == side


def test_a_cpu_partition_without_a_tdp_cannot_be_compared_and_says_why_in_words():
    side, sentence = comparison_problem(replace(PAPER_CPU, cpu_tdp_watts=Decimal(0)), PAPER_GPU)
    assert side == "cpu"
    assert sentence.startswith("Partition cpu gives no power (TDP) for its CPUs")
    assert comparison_problem(PAPER_GPU, PAPER_GPU) == (
        "cpu",
        "Partition gpu has GPUs: choose a partition without GPUs.",
    )
    assert comparison_problem(PAPER_CPU, PAPER_GPU) is None


def test_a_model_the_gpu_partition_cannot_feed_says_what_its_specification_lacks():
    # A CPU node weighs C under every model; the peak model needs both peaks on the GPU node.
    models, reasons = usable_models(PAPER_CPU, replace(PAPER_GPU, cpu_peak_flops=None))
    assert models == ["energy", "sm"]
    assert reasons == {
        "peak": "It needs the peak FLOP/s of the CPUs and, on a GPU partition, of the GPUs, "
        "which the specification of partition gpu does not give."
    }

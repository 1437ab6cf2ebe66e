"""The CPU-versus-GPU cost ratio explorer's maths (energy paper section V). Pure module.

Built on :mod:`accounting.clusters.cost_ratio` and :mod:`accounting.clusters.charging`: which
models can price a pair of partitions, Figure 1's series, the speedups where only the energy model
leads a user who minimises SU to the energy-efficient node, and "my application" (CPU-node hours and
GPU-node hours in; SU, energy and CO2 on both, and the partition to pick, out).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction
from typing import Final

from accounting.clusters import charging, cost_ratio
from accounting.clusters.charging import MODELS, PartitionSpec, SpecError

COMPARED_MODELS: Final = ("energy", "sm", "peak")
DEFAULT_GRID_G_PER_KWH: Final = Decimal(500)


def usable_models(
    cpu: PartitionSpec, gpu: PartitionSpec, models: Sequence[str] = COMPARED_MODELS
) -> tuple[list[str], dict[str, str]]:
    """The models that can weigh both partitions, and why each of the others cannot."""
    usable, reasons = [], {}
    for name in models:
        try:
            MODELS[name].weight(cpu)
            MODELS[name].weight(gpu)
        except SpecError as error:
            reasons[name] = str(error)
        else:
            usable.append(name)
    return usable, reasons


def figure1_speedups(
    cpu: PartitionSpec, gpu: PartitionSpec, models: Sequence[str], *, low: int = 1, high: int = 39
) -> list[Fraction]:
    """Speedups to draw Figure 1 with: quarter steps, plus each model's switch point and a hair
    after it, so that the jump from the CPU to the GPU node shows where it happens."""
    points = {Fraction(low) + Fraction(step, 4) for step in range((high - low) * 4 + 1)}
    switches = [Fraction(cost_ratio.switch_speedup(cpu, gpu, model)) for model in models]
    switches.append(Fraction(cost_ratio.energy_optimal_switch_speedup(cpu, gpu)))
    for switch in switches:
        if low <= switch < high:
            points.update({switch, switch + Fraction(1, 1000)})
    return sorted(points)


def figure1_series(
    cpu: PartitionSpec,
    gpu: PartitionSpec,
    models: Sequence[str],
    speedups: Sequence[int | Fraction],
) -> tuple[dict[str, list[tuple[float, float]]], list[tuple[float, float]]]:
    """Energy (Wh) of the SU-minimising choice per model (eqs 28-30), and the lowest possible
    energy (the better of the two nodes) for the same speedups."""
    series = {
        model: [
            (float(s), float(cost_ratio.chosen_energy_wh(cpu, gpu, model, s))) for s in speedups
        ]
        for model in models
    }
    optimal = []
    for s in speedups:
        gpu_wh = Fraction(gpu.node_gpu_tdp_watts) / s
        optimal.append((float(s), float(min(Fraction(cpu.node_cpu_tdp_watts), gpu_wh))))
    return series, optimal


def only_energy_model_regions(
    cpu: PartitionSpec,
    gpu: PartitionSpec,
    models: Sequence[str],
    *,
    low: int = 1,
    high: int = 40,
) -> list[tuple[float, float]]:
    """Speedup intervals where the energy model's pick is the energy-efficient node and every
    other model's pick is not (6 to 12 on the paper's test system: 16/3 < s <= 12)."""
    others = [model for model in models if model != "energy"]
    if not others:
        return []
    points = {Fraction(low), Fraction(high)}
    for model in models:
        switch = Fraction(cost_ratio.switch_speedup(cpu, gpu, model))
        if low < switch < high:
            points.add(switch)
    optimal_switch = Fraction(cost_ratio.energy_optimal_switch_speedup(cpu, gpu))
    if low < optimal_switch < high:
        points.add(optimal_switch)
    edges = sorted(points)
    regions: list[tuple[Fraction, Fraction]] = []
    for left, right in itertools.pairwise(edges):
        middle = (left + right) / 2
        best = cost_ratio.energy_optimal_partition(cpu, gpu, middle)
        energy_right = cost_ratio.cheaper_partition(cpu, gpu, "energy", middle) == best
        others_wrong = all(
            cost_ratio.cheaper_partition(cpu, gpu, model, middle) != best for model in others
        )
        if energy_right and others_wrong:
            if regions and regions[-1][1] == left:
                regions[-1] = (regions[-1][0], right)
            else:
                regions.append((left, right))
    return [(float(left), float(right)) for left, right in regions]


@dataclass(frozen=True)
class NodeRun:
    """One way to run the application: node-hours on one partition and what they cost."""

    partition: str
    node_hours: Decimal
    service_units: Decimal
    energy_wh: Decimal
    co2_kg: Decimal


@dataclass(frozen=True)
class Recommendation:
    cpu: NodeRun
    gpu: NodeRun
    speedup: Decimal
    recommended: str  # "cpu" or "gpu": fewer SU (the CPU when equal, as in eq 29)
    also_less_energy: bool


def _run(spec: PartitionSpec, node_hours: Decimal, grid_g_per_kwh: Decimal) -> NodeRun:
    # Whole nodes for ``node_hours``: one node for that long prices the same under eq 1.
    seconds = int((node_hours * 3600).to_integral_value(ROUND_CEILING))
    whole = charging.NodeUsage(cores=spec.cores, memory_mb=spec.memory_mb, gpus=spec.gpus)
    charge = charging.charge(spec, (whole,), elapsed_seconds=seconds)
    co2_kg = (charge.energy_wh / 1000 * grid_g_per_kwh / 1000).quantize(Decimal("0.001"))
    return NodeRun(
        partition=spec.name,
        node_hours=node_hours,
        service_units=charge.service_units,
        energy_wh=charge.energy_wh,
        co2_kg=co2_kg,
    )


def my_application(
    cpu: PartitionSpec,
    gpu: PartitionSpec,
    *,
    cpu_node_hours: Decimal,
    gpu_node_hours: Decimal,
    grid_g_per_kwh: Decimal = DEFAULT_GRID_G_PER_KWH,
) -> Recommendation:
    """SU (energy model), energy (TDP, eq 29) and CO2 of the application on both partitions,
    and the one a user minimising SU picks."""
    if cpu_node_hours <= 0 or gpu_node_hours <= 0:
        raise ValueError("node-hours must be positive")
    on_cpu = _run(cpu, cpu_node_hours, grid_g_per_kwh)
    on_gpu = _run(gpu, gpu_node_hours, grid_g_per_kwh)
    recommended = "cpu" if on_cpu.service_units <= on_gpu.service_units else "gpu"
    cheaper, other = (on_cpu, on_gpu) if recommended == "cpu" else (on_gpu, on_cpu)
    return Recommendation(
        cpu=on_cpu,
        gpu=on_gpu,
        speedup=cpu_node_hours / gpu_node_hours,
        recommended=recommended,
        also_less_energy=cheaper.energy_wh <= other.energy_wh,
    )

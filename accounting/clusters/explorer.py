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
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Final, Literal

from accounting.clusters import charging, cost_ratio
from accounting.clusters.charging import MODELS, PartitionSpec, SpecError

COMPARED_MODELS: Final = ("energy", "sm", "peak")
DEFAULT_GRID_G_PER_KWH: Final = Decimal(500)


@dataclass(frozen=True)
class NumberField:
    """A number the explorer asks for: its label as the form shows it and its allowed range, so
    the page and the API say the same sentence when a value is out of range."""

    label: str
    low: Decimal
    high: Decimal
    low_allowed: bool  # False: the value must be more than ``low``
    decimal_places: int
    example: str
    unit: str = ""

    @property
    def range_message(self) -> str:
        high = f"{self.high:,}{self.unit}"
        if self.low_allowed:
            return f"{self.label} must be between {self.low:,} and {high}."
        return f"{self.label} must be more than {self.low:,} and at most {high}."

    @property
    def number_message(self) -> str:
        return f"{self.label} must be a number, e.g. {self.example}."

    @property
    def decimals_message(self) -> str:
        digits = "one digit" if self.decimal_places == 1 else f"{self.decimal_places} digits"
        return f"{self.label} takes at most {digits} after the point."

    def problem(self, value: Decimal) -> str | None:
        """The sentence to show when ``value`` is out of range, or None."""
        too_low = value < self.low if self.low_allowed else value <= self.low
        return self.range_message if too_low or value > self.high else None


_ZERO: Final = Decimal(0)
FIELDS: Final = {
    "cpu_node_hours": NumberField("CPU-node hours", _ZERO, Decimal(1_000_000), False, 3, "10"),
    "gpu_node_hours": NumberField("GPU-node hours", _ZERO, Decimal(1_000_000), False, 4, "2.5"),
    "speedup": NumberField("Speedup", _ZERO, Decimal(10_000), False, 3, "8"),
    "grid_intensity": NumberField(
        "Grid intensity", _ZERO, Decimal(2000), True, 1, "500", " g CO\u2082/kWh"
    ),
}
# An example application's speedup: CPU nodes that match one GPU node (Tables II-IV).
EXAMPLE_SPEEDUP: Final = NumberField("Speedup", _ZERO, Decimal(100_000), False, 3, "41")


# What each model needs from a specification, in words, for a model that cannot price one.
MODEL_NEEDS: Final = {
    "energy": "the power (TDP) of the CPUs and, on a GPU partition, of the GPUs",
    "sm": "the number of streaming multiprocessors per GPU (at least 1)",
    "peak": "the peak FLOP/s of the CPUs and, on a GPU partition, of the GPUs",
}


def usable_models(
    cpu: PartitionSpec, gpu: PartitionSpec, models: Sequence[str] = COMPARED_MODELS
) -> tuple[list[str], dict[str, str]]:
    """The models that can weigh both partitions, and why each of the others cannot, in words."""
    usable, reasons = [], {}
    for name in models:
        unpriced = []
        for spec in (cpu, gpu):
            try:
                MODELS[name].weight(spec)
            except SpecError:
                unpriced.append(spec.name)
        if unpriced:
            reasons[name] = model_unavailable_reason(name, unpriced)
        else:
            usable.append(name)
    return usable, reasons


def comparison_problem(cpu: PartitionSpec, gpu: PartitionSpec) -> tuple[str, str] | None:
    """(side, sentence) when the pair cannot be compared at all: the explorer weighs energy with
    the CPU node's power, so a CPU partition without one has nothing to compare."""
    if cpu.is_gpu:
        return "cpu", f"Partition {cpu.name} has GPUs: choose a partition without GPUs."
    if not gpu.is_gpu:
        return "gpu", f"Partition {gpu.name} has no GPUs: choose a partition with GPUs."
    if cpu.node_cpu_tdp_watts <= 0:
        return "cpu", (
            f"Partition {cpu.name} gives no power (TDP) for its CPUs, which the comparison of "
            "energy needs; staff can add it to the partition's specification."
        )
    return None


def model_unavailable_reason(model: str, partitions: Sequence[str]) -> str:
    """Why ``model`` cannot price ``partitions``: what it needs that their specification lacks."""
    needs = MODEL_NEEDS.get(model, "figures")
    names = " and ".join(partitions)
    whose = "partition" if len(partitions) == 1 else "partitions"
    return f"It needs {needs}, which the specification of {whose} {names} does not give."


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


Side = Literal["cpu", "gpu", "same"]

# The precision the explorer shows SU and energy in: a tie is what the user sees as one, so the
# sentence never says "fewer" beside two equal figures.
SHOWN_SERVICE_UNITS: Final = Decimal("0.01")
SHOWN_ENERGY_WH: Final = Decimal(1)


def lower_side(on_cpu: Decimal, on_gpu: Decimal, *, shown: Decimal) -> Side:
    """The side with the lower figure as shown (rounded half-up to ``shown``), or "same"."""
    cpu_shown = on_cpu.quantize(shown, rounding=ROUND_HALF_UP)
    gpu_shown = on_gpu.quantize(shown, rounding=ROUND_HALF_UP)
    if cpu_shown == gpu_shown:
        return "same"
    return "cpu" if cpu_shown < gpu_shown else "gpu"


@dataclass(frozen=True)
class Recommendation:
    """The application on both partitions, and which one costs fewer SU and uses less energy."""

    cpu: NodeRun
    gpu: NodeRun
    speedup: Decimal
    fewer_su: Side
    less_energy: Side

    @property
    def recommended(self) -> Side:
        """Fewer SU; on an SU tie the one that uses less energy; "same" when both tie."""
        return self.less_energy if self.fewer_su == "same" else self.fewer_su

    @property
    def recommended_partition(self) -> str:
        return {"cpu": self.cpu.partition, "gpu": self.gpu.partition}.get(self.recommended, "")

    @property
    def headline(self) -> str:
        """The pick, in a few words: "Pick the GPU partition (gpu)" or "Either partition"."""
        if self.recommended == "same":
            return "Either partition: the same SU and energy"
        return f"Pick the {self.recommended.upper()} partition ({self.recommended_partition})"

    @property
    def sentence(self) -> str:
        """Why, in one sentence that never calls equal figures "fewer" or "less"."""
        su, energy = self.fewer_su, self.less_energy
        if su == "same" and energy == "same":
            return "It costs the same SU and uses the same energy on both nodes."
        if su == "same":
            return f"It costs the same SU on both, and uses less energy on the {_node(energy)}."
        cheaper = f"It costs fewer SU on the {_node(su)}"
        if energy == su:
            return f"{cheaper}, and it uses less energy there too."
        if energy == "same":
            return f"{cheaper}, and it uses the same energy on both."
        return f"{cheaper}, although it would use less energy on the {_node(energy)}."


def _node(side: Side) -> str:
    return f"{side.upper()} node"


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
    gpu_node_hours: Decimal | None = None,
    speedup: Decimal | None = None,
    grid_g_per_kwh: Decimal = DEFAULT_GRID_G_PER_KWH,
) -> Recommendation:
    """SU (energy model), energy (TDP, eq 29) and CO2 of the application on both partitions,
    and the one a user minimising SU picks (on an SU tie, the one that uses less energy).

    The GPU-node hours are given, or the CPU-node hours over the speedup."""
    if gpu_node_hours is None:
        if speedup is None or speedup <= 0:
            raise ValueError("give the GPU-node hours or a positive speedup")
        gpu_node_hours = cpu_node_hours / speedup
    if cpu_node_hours <= 0 or gpu_node_hours <= 0:
        raise ValueError("node-hours must be positive")
    on_cpu = _run(cpu, cpu_node_hours, grid_g_per_kwh)
    on_gpu = _run(gpu, gpu_node_hours, grid_g_per_kwh)
    return Recommendation(
        cpu=on_cpu,
        gpu=on_gpu,
        speedup=cpu_node_hours / gpu_node_hours,
        fewer_su=lower_side(on_cpu.service_units, on_gpu.service_units, shown=SHOWN_SERVICE_UNITS),
        less_energy=lower_side(on_cpu.energy_wh, on_gpu.energy_wh, shown=SHOWN_ENERGY_WH),
    )

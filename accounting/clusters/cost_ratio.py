"""CPU-versus-GPU comparisons of the energy paper's section V: Tables II-IV and Figure 1.

Pure module built on :mod:`accounting.clusters.charging`: no Django, no settings, no ORM.

A table row prices one hour of an application on ``perf_ratio`` CPU nodes (the CPU nodes that
match one GPU node) against one hour of one GPU node, under one charging model. Figure 1 (eqs
28-30) follows a user who runs application X, 1 h on a CPU node or ``1/s`` h on a GPU node, on
whichever partition costs fewer SU, and reports the energy that choice uses.

Choices compare exact fractions, so a tie (``SU_cpu == SU_gpu``) goes to the CPU as in eq 29.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, Final, Literal

from accounting.clusters.charging import MODELS, ChargingModel, PartitionSpec, SpecError

DEFAULT_BENCHMARKS_PATH: Final = Path(__file__).resolve().parent / "data" / "paper_benchmarks.json"
FIGURE1_SPEEDUPS: Final = range(1, 40)  # the speedups plotted in Figure 1

Partition = Literal["cpu", "gpu"]
Speedup = Decimal | Fraction | int

_WHOLE: Final = Decimal(1)
_CENTS: Final = Decimal("0.01")
_REQUIRED: Final = frozenset({"application", "perf_ratio"})
_OPTIONAL: Final = frozenset({"cpu", "gpu", "source", "source_url"})


@dataclass(frozen=True)
class Benchmark:
    """An application and how many CPU nodes match the performance of one GPU node, with the
    CPU node and GPU node that was measured on and where the figure comes from (when known)."""

    application: str
    perf_ratio: Decimal
    cpu: str = ""
    gpu: str = ""
    source: str = ""
    source_url: str = ""


@dataclass(frozen=True)
class CostRatioRow:
    """One row of Tables II-IV: one hour on ``perf_ratio`` CPU nodes against one GPU node-hour."""

    application: str
    perf_ratio: Decimal
    cpu_charge: Decimal
    gpu_charge: Decimal
    cost_ratio: Decimal  # cpu_charge / gpu_charge, unrounded


@dataclass(frozen=True)
class CostRatioTable:
    """Tables II-IV for one model: node weights, switch speedup and one row per application.

    ``gpu_node_weight`` is rounded to whole SU, as the paper prints (and charges) 466 for the
    peak model's 465.6; ``gpu_node_weight_exact`` keeps the model's value.
    """

    model: str
    cpu_node_weight: Decimal
    gpu_node_weight: Decimal
    gpu_node_weight_exact: Decimal
    switch_speedup: Decimal
    rows: tuple[CostRatioRow, ...]


def load_benchmarks(path: Path | str | None = None) -> tuple[Benchmark, ...]:
    """Read ``{"source": ..., "benchmarks": [{"application", "perf_ratio"}, ...]}``; each entry
    may also name the ``cpu`` and ``gpu`` node it was measured on, ``source`` and ``source_url``.

    Defaults to the shipped Tables II-IV list. Raises ``ValueError`` naming the file and entry.
    """
    path = Path(path) if path is not None else DEFAULT_BENCHMARKS_PATH
    with path.open(encoding="utf-8") as handle:
        try:
            document = json.load(handle, parse_float=Decimal)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None
    entries = document.get("benchmarks") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f'{path}: expected an object with a non-empty "benchmarks" list')
    benchmarks = []
    for position, entry in enumerate(entries, start=1):
        where = f"{path}: benchmark {position}"
        if not isinstance(entry, dict) or not _REQUIRED <= set(entry) <= _REQUIRED | _OPTIONAL:
            raise ValueError(
                f'{where}: expected "application" and "perf_ratio", and optionally '
                + ", ".join(f'"{key}"' for key in sorted(_OPTIONAL))
            )
        described = {key: entry.get(key, "") for key in _OPTIONAL}
        if not all(isinstance(text, str) for text in described.values()):
            raise ValueError(f"{where}: {', '.join(sorted(_OPTIONAL))} must be strings")
        application, perf_ratio = entry["application"], entry["perf_ratio"]
        if not isinstance(application, str) or not application.strip():
            raise ValueError(f"{where}: application must be a non-empty string")
        if isinstance(perf_ratio, bool) or not isinstance(perf_ratio, int | Decimal):
            raise ValueError(f"{where} ({application}): perf_ratio must be a number")
        if not perf_ratio > 0:
            raise ValueError(f"{where} ({application}): perf_ratio must be positive")
        benchmarks.append(Benchmark(application.strip(), Decimal(perf_ratio), **described))
    return tuple(benchmarks)


def paper_test_system() -> tuple[PartitionSpec, PartitionSpec]:
    """The (CPU, GPU) partitions of Table I: 2 x Xeon Gold 6240 per node, plus 4 x A100 on GPUs."""
    cpu = PartitionSpec(
        name="cpu",
        sockets=2,
        cores_per_socket=18,
        memory_mb=192000,
        cpu_tdp_watts=Decimal(150),
        cpu_peak_flops=Decimal("1.5e12"),
    )
    gpu = PartitionSpec(
        name="gpu",
        sockets=2,
        cores_per_socket=18,
        memory_mb=192000,
        gpus=4,
        cpu_tdp_watts=Decimal(150),
        gpu_tdp_watts=Decimal(400),
        gpu_streaming_multiprocessors=108,
        cpu_peak_flops=Decimal("1.5e12"),
        gpu_peak_flops=Decimal("9.7e12"),
    )
    return cpu, gpu


def _model(model: str | ChargingModel) -> ChargingModel:
    if isinstance(model, ChargingModel):
        return model
    try:
        return MODELS[model]
    except KeyError:
        raise ValueError(f"unknown charging model {model!r} (known: {', '.join(MODELS)})") from None


def _check_pair(cpu: PartitionSpec, gpu: PartitionSpec) -> None:
    if cpu.is_gpu:
        raise SpecError(f"partition {cpu.name!r} has GPUs; the CPU side needs a CPU partition")
    if not gpu.is_gpu:
        raise SpecError(f"partition {gpu.name!r} has no GPUs; the GPU side needs a GPU partition")


def _exact_weight(spec: PartitionSpec, model: ChargingModel) -> Fraction:
    numerator, denominator = model.weight_ratio(spec)
    return Fraction(numerator) / Fraction(denominator)


def _decimal(value: Fraction) -> Decimal:
    return Decimal(value.numerator) / Decimal(value.denominator)


def cost_ratio_table(
    *,
    cpu: PartitionSpec,
    gpu: PartitionSpec,
    model: str | ChargingModel,
    benchmarks: Sequence[Benchmark] | None = None,
) -> CostRatioTable:
    """Tables II-IV for ``model``: each application's 1 h CPU charge against one GPU node-hour.

    Weights are the model's for the two specs, so a staff override of the energy weight counts.
    """
    _check_pair(cpu, gpu)
    charging_model = _model(model)
    if benchmarks is None:
        benchmarks = load_benchmarks()
    cpu_node_weight = _decimal(_exact_weight(cpu, charging_model))
    gpu_node_weight_exact = _decimal(_exact_weight(gpu, charging_model))
    # The paper charges a GPU node-hour in whole SU (466, not 465.6) when it builds the tables.
    gpu_charge = gpu_node_weight_exact.quantize(_WHOLE, rounding=ROUND_HALF_UP)
    rows = []
    for benchmark in benchmarks:
        cpu_charge = benchmark.perf_ratio * cpu_node_weight
        rows.append(
            CostRatioRow(
                application=benchmark.application,
                perf_ratio=benchmark.perf_ratio,
                cpu_charge=cpu_charge,
                gpu_charge=gpu_charge,
                cost_ratio=cpu_charge / gpu_charge,
            )
        )
    return CostRatioTable(
        model=charging_model.name,
        cpu_node_weight=cpu_node_weight,
        gpu_node_weight=gpu_charge,
        gpu_node_weight_exact=gpu_node_weight_exact,
        switch_speedup=switch_speedup(cpu, gpu, charging_model),
        rows=tuple(rows),
    )


def switch_speedup(cpu: PartitionSpec, gpu: PartitionSpec, model: str | ChargingModel) -> Decimal:
    """The speedup above which a GPU node-hour costs fewer SU than a CPU node-hour.

    SU_gpu < SU_cpu  <=>  w_g / s < w_c  <=>  s > w_g / w_c; for Table I: energy 16/3, SM 12,
    peak 12.93.
    """
    _check_pair(cpu, gpu)
    charging_model = _model(model)
    return _decimal(_exact_weight(gpu, charging_model) / _exact_weight(cpu, charging_model))


def energy_optimal_switch_speedup(cpu: PartitionSpec, gpu: PartitionSpec) -> Decimal:
    """The speedup above which the GPU node uses less energy: sum_j E_g^j / sum_i E_c^i (eq 29).

    16/3 for Table I (1600 W / 300 W). The energy model switches at the same speedup whenever
    the GPU node's CPUs have the CPU node's watts per core (eq 15 then cancels the cores).
    """
    _check_pair(cpu, gpu)
    return _decimal(_energy_switch(cpu, gpu))


def _energy_switch(cpu: PartitionSpec, gpu: PartitionSpec) -> Fraction:
    if cpu.node_cpu_tdp_watts <= 0:
        raise SpecError(f"partition {cpu.name!r}: cpu_tdp_watts must be positive to compare energy")
    return Fraction(gpu.node_gpu_tdp_watts) / Fraction(cpu.node_cpu_tdp_watts)


def _check_speedup(speedup: Speedup) -> Fraction:
    if isinstance(speedup, bool) or not isinstance(speedup, Decimal | Fraction | int):
        raise ValueError(f"speedup must be an int, Decimal or Fraction, got {speedup!r}")
    exact = Fraction(speedup)
    if exact <= 0:
        raise ValueError(f"speedup must be positive, got {speedup}")
    return exact


def cheaper_partition(
    cpu: PartitionSpec, gpu: PartitionSpec, model: str | ChargingModel, speedup: Speedup
) -> Partition:
    """The partition a user minimising SU picks for application X (eq 29's condition).

    X takes 1 h on a CPU node and 1/s h on a GPU node (eq 28); the CPU wins ties.
    """
    _check_pair(cpu, gpu)
    charging_model = _model(model)
    # SU_cpu <= SU_gpu  <=>  w_c * 1 h <= w_g * (1/s) h  <=>  s * w_c <= w_g
    cpu_su = _check_speedup(speedup) * _exact_weight(cpu, charging_model)
    return "cpu" if cpu_su <= _exact_weight(gpu, charging_model) else "gpu"


def energy_optimal_partition(cpu: PartitionSpec, gpu: PartitionSpec, speedup: Speedup) -> Partition:
    """The partition on which application X uses less energy (the CPU when equal)."""
    _check_pair(cpu, gpu)
    # 1 h * sum E_c <= (1/s) h * sum E_g  <=>  s <= sum E_g / sum E_c
    return "cpu" if _check_speedup(speedup) <= _energy_switch(cpu, gpu) else "gpu"


def chosen_energy_wh(
    cpu: PartitionSpec, gpu: PartitionSpec, model: str | ChargingModel, speedup: Speedup
) -> Decimal:
    """Energy (Wh) of application X on the partition the SU-minimising user picks (eqs 29-30).

    The CPU node's CPU TDPs for 1 h, or the GPU node's GPU TDPs for 1/s h.
    """
    if cheaper_partition(cpu, gpu, model, speedup) == "cpu":
        return cpu.node_cpu_tdp_watts
    return _decimal(Fraction(gpu.node_gpu_tdp_watts) / _check_speedup(speedup))


def _json_number(value: Decimal) -> int | float:
    # Whole values print as ints ("1,476"), the rest as floats; the API is JSON, not a ledger.
    return int(value) if value == value.to_integral_value() else float(value)


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")


def cost_ratio_report(
    *,
    cpu: PartitionSpec,
    gpu: PartitionSpec,
    models: Sequence[str] = ("energy", "sm", "peak"),
    benchmarks: Sequence[Benchmark] | None = None,
    speedups: Iterable[int] = FIGURE1_SPEEDUPS,
) -> dict[str, Any]:
    """Tables II-IV and Figure 1 for a CPU and a GPU partition, as plain JSON-ready data.

    ``{"models": {name: {"cpu_node_weight", "gpu_node_weight", "gpu_node_weight_exact",
    "switch_speedup", "rows": [{"application", "perf_ratio", "cpu_charge", "gpu_charge",
    "cost_ratio"}]}}, "energy_optimal_switch_speedup": float, "figure1": [{"speedup",
    "energy_wh": {name: float}}], "benchmarks": [{"application", "perf_ratio", "cpu", "gpu",
    "source", "source_url"}]}``: each application with the hardware its ratio was measured on
    ("" when not stated); cost ratios rounded half-up to 2 decimals.
    """
    if benchmarks is None:
        benchmarks = load_benchmarks()
    tables = {}
    for name in models:
        table = cost_ratio_table(cpu=cpu, gpu=gpu, model=name, benchmarks=benchmarks)
        tables[name] = {
            "cpu_node_weight": _json_number(table.cpu_node_weight),
            "gpu_node_weight": _json_number(table.gpu_node_weight),
            "gpu_node_weight_exact": _plain(table.gpu_node_weight_exact),
            "switch_speedup": float(table.switch_speedup),
            "rows": [
                {
                    "application": row.application,
                    "perf_ratio": _json_number(row.perf_ratio),
                    "cpu_charge": _json_number(row.cpu_charge),
                    "gpu_charge": _json_number(row.gpu_charge),
                    "cost_ratio": float(row.cost_ratio.quantize(_CENTS, rounding=ROUND_HALF_UP)),
                }
                for row in table.rows
            ],
        }
    figure1 = [
        {
            "speedup": speedup,
            "energy_wh": {
                name: float(chosen_energy_wh(cpu, gpu, name, speedup)) for name in models
            },
        }
        for speedup in speedups
    ]
    measured_on = [
        {
            "application": benchmark.application, "perf_ratio": _json_number(benchmark.perf_ratio),
            "cpu": benchmark.cpu, "gpu": benchmark.gpu,
            "source": benchmark.source, "source_url": benchmark.source_url,
        }
        for benchmark in benchmarks
    ]  # fmt: skip
    return {
        "models": tables,
        "energy_optimal_switch_speedup": float(energy_optimal_switch_speedup(cpu, gpu)),
        "figure1": figure1,
        "benchmarks": measured_on,
    }

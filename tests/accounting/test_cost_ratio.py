"""Section V of the energy paper: Tables II-IV and Figure 1, data-driven. Pure: no database."""

from __future__ import annotations

import json
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounting.clusters.charging import PartitionSpec, SpecError
from accounting.clusters.cost_ratio import (
    Benchmark,
    cheaper_partition,
    chosen_energy_wh,
    cost_ratio_report,
    cost_ratio_table,
    energy_optimal_partition,
    energy_optimal_switch_speedup,
    load_benchmarks,
    paper_test_system,
    switch_speedup,
)

CPU, GPU = paper_test_system()

# The tables as printed: application, perf ratio, CPU charge, GPU charge, cost ratio (as text,
# so that its number of decimals is kept).
TABLE_II_SM = [
    ("FUN3D", 41, 1476, 432, "3.42"),
    ("RTM", 32, 1152, 432, "2.67"),
    ("SPECFEM3D", 105, 3780, 432, "8.75"),
    ("AMBER", 153, 5508, 432, "12.7"),
    ("GROMACS", 23, 828, 432, "1.92"),
    ("LAMMPS", 59, 2124, 432, "4.92"),
    ("NAMD", 36, 1296, 432, "3.00"),
    ("Relion", 12, 432, 432, "1.00"),
    ("GTC", 53, 1908, 432, "4.42"),
    ("MILC", 108, 3888, 432, "9.00"),
    ("Chroma", 99, 3564, 432, "8.25"),
    ("Quantum Expresso", 13, 468, 432, "1.08"),
    ("ICON", 15, 540, 432, "1.25"),
]
TABLE_III_PEAK = [
    ("FUN3D", 41, 1476, 466, "3.17"),
    ("RTM", 32, 1152, 466, "2.47"),
    ("SPECFEM3D", 105, 3780, 466, "8.11"),
    ("AMBER", 153, 5508, 466, "11.8"),
    ("GROMACS", 23, 828, 466, "1.78"),
    ("LAMMPS", 59, 2124, 466, "4.56"),
    ("NAMD", 36, 1296, 466, "2.78"),
    ("Relion", 12, 432, 466, "0.93"),
    ("GTC", 53, 1908, 466, "4.09"),
    ("MILC", 108, 3888, 466, "8.34"),
    ("Chroma", 99, 3564, 466, "7.64"),
    ("Quantum Expresso", 13, 468, 466, "1.00"),
    ("ICON", 15, 540, 466, "1.16"),
]
TABLE_IV_ENERGY = [
    ("FUN3D", 41, 1476, 192, "7.69"),
    ("RTM", 32, 1152, 192, "6"),
    ("SPECFEM3D", 105, 3780, 192, "19.69"),
    ("AMBER", 153, 5508, 192, "28.68"),
    ("GROMACS", 23, 828, 192, "4.31"),
    ("LAMMPS", 59, 2124, 192, "11.06"),
    ("NAMD", 36, 1296, 192, "6.75"),
    ("Relion", 12, 432, 192, "2.25"),
    ("GTC", 53, 1908, 192, "9.94"),
    ("MILC", 108, 3888, 192, "20.25"),
    ("Chroma", 99, 3564, 192, "18.56"),
    ("Quantum Expresso", 13, 468, 192, "2.44"),
    ("ICON", 15, 540, 192, "2.81"),
]
TABLES = {"sm": TABLE_II_SM, "peak": TABLE_III_PEAK, "energy": TABLE_IV_ENERGY}

# Rows the paper truncated instead of rounding (half-up would print the other value):
#   Table II  AMBER  5508 / 432 = 12.75      printed 12.7  (rounded: 12.8)
#   Table III Chroma 3564 / 466 = 7.6480...  printed 7.64  (rounded: 7.65)
#   Table IV  AMBER  5508 / 192 = 28.6875    printed 28.68 (rounded: 28.69)
TRUNCATED_ROWS = {("sm", "AMBER"), ("peak", "Chroma"), ("energy", "AMBER")}


def _rounded(value: Decimal, places: int, rounding: str) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-places), rounding=rounding)


@pytest.mark.parametrize(
    ("model", "application", "perf_ratio", "cpu_charge", "gpu_charge", "printed_ratio"),
    [(model, *row) for model, rows in TABLES.items() for row in rows],
)
def test_cost_ratio_tables_match_the_paper(
    model, application, perf_ratio, cpu_charge, gpu_charge, printed_ratio
):
    table = cost_ratio_table(cpu=CPU, gpu=GPU, model=model)
    row = next(row for row in table.rows if row.application == application)
    assert row.perf_ratio == perf_ratio
    assert row.cpu_charge == cpu_charge
    assert row.gpu_charge == gpu_charge
    printed = Decimal(printed_ratio)
    places = len(printed_ratio.partition(".")[2])  # decimals as printed
    rounded = _rounded(row.cost_ratio, places, ROUND_HALF_UP)
    truncated = _rounded(row.cost_ratio, places, ROUND_DOWN)
    # "To the printed precision": the paper rounded half-up, except where it truncated.
    assert printed in {rounded, truncated}
    assert (printed != rounded) == ((model, application) in TRUNCATED_ROWS)


@pytest.mark.parametrize("model", ["sm", "peak", "energy"])
def test_cost_ratio_tables_have_the_13_applications_in_the_paper_order(model):
    table = cost_ratio_table(cpu=CPU, gpu=GPU, model=model)
    assert [row.application for row in table.rows] == [row[0] for row in TABLES[model]]


def test_gpu_node_weight_is_shown_whole_with_the_exact_value_kept():
    table = cost_ratio_table(cpu=CPU, gpu=GPU, model="peak")
    assert table.cpu_node_weight == 36
    assert table.gpu_node_weight == 466
    assert table.gpu_node_weight_exact == Decimal("465.6")


def test_shipped_benchmarks_are_the_13_applications_of_tables_ii_to_iv():
    benchmarks = load_benchmarks()
    assert [(b.application, b.perf_ratio) for b in benchmarks] == [
        (application, perf_ratio) for application, perf_ratio, *_ in TABLE_IV_ENERGY
    ]


def test_benchmarks_file_can_be_replaced(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"source": "local runs", "benchmarks": [
        {"application": "MyCode", "perf_ratio": 2.5},
    ]}))  # fmt: skip
    benchmarks = load_benchmarks(path)
    assert benchmarks == (Benchmark("MyCode", Decimal("2.5")),)
    table = cost_ratio_table(cpu=CPU, gpu=GPU, model="energy", benchmarks=benchmarks)
    assert table.rows[0].cpu_charge == 90
    assert table.rows[0].cost_ratio == Decimal("0.46875")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("[]", 'non-empty "benchmarks" list'),
        ('{"benchmarks": [{"application": "X"}]}', 'benchmark 1: expected "application"'),
        ('{"benchmarks": [{"application": "X", "perf_ratio": 3, "cpu": 6240}]}', "must be strings"),
        ('{"benchmarks": [{"application": "X", "perf_ratio": 3, "gpus": "A100"}]}', "optionally"),
        ('{"benchmarks": [{"application": "", "perf_ratio": 3}]}', "non-empty string"),
        ('{"benchmarks": [{"application": "X", "perf_ratio": 0}]}', r"\(X\): perf_ratio must be"),
        ('{"benchmarks": [{"application": "X", "perf_ratio": "3"}]}', "must be a number"),
        ("{", "not valid JSON"),
    ],
)
def test_bad_benchmarks_file_is_refused_naming_the_entry(tmp_path, document, message):
    path = tmp_path / "bad.json"
    path.write_text(document)
    with pytest.raises(ValueError, match=message):
        load_benchmarks(path)


# Figure 1 ------------------------------------------------------------------------------------


def test_switch_speedups_match_figure_1():
    assert switch_speedup(CPU, GPU, "energy") == Decimal(16) / 3  # 192 / 36
    assert switch_speedup(CPU, GPU, "sm") == 12  # 432 / 36
    assert switch_speedup(CPU, GPU, "peak") == Decimal("465.6") / 36
    assert str(switch_speedup(CPU, GPU, "peak")).startswith("12.93")
    assert energy_optimal_switch_speedup(CPU, GPU) == Decimal(16) / 3  # 1600 W / 300 W


@pytest.mark.parametrize(
    ("model", "switch"),
    [("energy", Fraction(16, 3)), ("sm", Fraction(12)), ("peak", Fraction(4656, 360))],
)
def test_gpu_becomes_the_cheaper_choice_just_above_the_switch_speedup(model, switch):
    assert cheaper_partition(CPU, GPU, model, switch) == "cpu"  # a tie goes to the CPU (eq 29)
    assert cheaper_partition(CPU, GPU, model, switch + Fraction(1, 10**9)) == "gpu"


@pytest.mark.parametrize("speedup", range(1, 40))
def test_for_speedups_6_to_12_only_the_energy_model_picks_the_energy_efficient_node(speedup):
    efficient = energy_optimal_partition(CPU, GPU, speedup)
    assert efficient == ("cpu" if speedup <= 5 else "gpu")  # 300 Wh against 1600/s Wh
    picking_efficient = {
        model for model in TABLES if cheaper_partition(CPU, GPU, model, speedup) == efficient
    }
    assert picking_efficient == ({"energy"} if 6 <= speedup <= 12 else {"energy", "sm", "peak"})


def test_figure_1_energy_is_300_wh_on_the_cpu_node_or_1600_over_s_on_the_gpu_node():
    assert chosen_energy_wh(CPU, GPU, "sm", 12) == 300
    assert chosen_energy_wh(CPU, GPU, "sm", 16) == 100
    assert chosen_energy_wh(CPU, GPU, "energy", 8) == 200
    assert chosen_energy_wh(CPU, GPU, "energy", Decimal("6.4")) == 250


def test_energy_model_never_picks_the_more_energy_hungry_node_in_figure_1():
    for speedup in range(1, 40):
        energies = {model: chosen_energy_wh(CPU, GPU, model, speedup) for model in TABLES}
        assert energies["energy"] == min(Decimal(300), Decimal(1600) / speedup)
        assert energies["energy"] <= min(energies.values())


@st.composite
def cpu_gpu_pairs(draw: st.DrawFn) -> tuple[PartitionSpec, PartitionSpec]:
    """A CPU node and a GPU node built on the same CPU model (Table I, Setonix), any shapes."""
    cores_per_socket = draw(st.integers(1, 128))
    cpu_tdp = draw(st.decimals(Decimal("0.5"), 1000, places=1))
    cpu = PartitionSpec(
        name="cpu",
        sockets=draw(st.integers(1, 8)),
        cores_per_socket=cores_per_socket,
        memory_mb=256000,
        cpu_tdp_watts=cpu_tdp,
    )
    gpu = PartitionSpec(
        name="gpu",
        sockets=draw(st.integers(1, 8)),
        cores_per_socket=cores_per_socket,
        memory_mb=512000,
        gpus=draw(st.integers(1, 16)),
        cpu_tdp_watts=cpu_tdp,
        gpu_tdp_watts=draw(st.decimals(Decimal("0.5"), 2000, places=1)),
    )
    return cpu, gpu


speedups = st.one_of(
    st.fractions(min_value=Fraction(1, 1000), max_value=1000),
    st.decimals(Decimal("0.001"), 1000, places=6),
)


@given(cpu_gpu_pairs(), speedups)
def test_energy_model_su_choice_is_the_energy_optimal_choice(pair, speedup):
    cpu, gpu = pair
    assert cheaper_partition(cpu, gpu, "energy", speedup) == energy_optimal_partition(
        cpu, gpu, speedup
    )


@given(cpu_gpu_pairs())
def test_energy_model_switches_exactly_at_the_energy_optimal_speedup(pair):
    cpu, gpu = pair
    switch = Fraction(gpu.node_gpu_tdp_watts) / Fraction(cpu.node_cpu_tdp_watts)
    assert cheaper_partition(cpu, gpu, "energy", switch) == "cpu"
    assert cheaper_partition(cpu, gpu, "energy", switch * Fraction(1_000_001, 1_000_000)) == "gpu"
    assert switch_speedup(cpu, gpu, "energy") == energy_optimal_switch_speedup(cpu, gpu)


def test_setonix_gpu_node_pays_off_above_speedup_4():
    work = PartitionSpec(
        name="work", sockets=2, cores_per_socket=64, memory_mb=245000, cpu_tdp_watts=Decimal(280)
    )
    gpu = PartitionSpec(
        name="gpu",
        sockets=1,
        cores_per_socket=64,
        memory_mb=245000,
        gpus=8,
        cpu_tdp_watts=Decimal(280),
        gpu_tdp_watts=Decimal(280),
    )
    assert switch_speedup(work, gpu, "energy") == 4 == energy_optimal_switch_speedup(work, gpu)


def test_comparison_needs_a_cpu_and_a_gpu_partition():
    with pytest.raises(SpecError, match="'cpu' has no GPUs; the GPU side needs a GPU partition"):
        switch_speedup(CPU, CPU, "energy")
    with pytest.raises(SpecError, match="'gpu' has GPUs; the CPU side needs a CPU partition"):
        switch_speedup(GPU, GPU, "energy")


def test_speedup_must_be_positive_and_exact():
    with pytest.raises(ValueError, match="speedup must be positive"):
        cheaper_partition(CPU, GPU, "energy", 0)
    with pytest.raises(ValueError, match="speedup must be an int, Decimal or Fraction"):
        cheaper_partition(CPU, GPU, "energy", 6.5)


# The report ---------------------------------------------------------------------------------


def test_report_is_plain_json_with_the_paper_numbers():
    report = cost_ratio_report(cpu=CPU, gpu=GPU)
    assert json.loads(json.dumps(report)) == report  # no Decimal, no Fraction
    energy = report["models"]["energy"]
    assert {key: value for key, value in energy.items() if key != "rows"} == {
        "cpu_node_weight": 36,
        "gpu_node_weight": 192,
        "gpu_node_weight_exact": "192",
        "switch_speedup": pytest.approx(16 / 3),
    }
    assert energy["rows"][0] == {
        "application": "FUN3D",
        "perf_ratio": 41,
        "cpu_charge": 1476,
        "gpu_charge": 192,
        "cost_ratio": 7.69,
    }
    peak = report["models"]["peak"]
    assert (peak["gpu_node_weight"], peak["gpu_node_weight_exact"]) == (466, "465.6")
    assert report["models"]["sm"]["switch_speedup"] == 12.0
    assert report["energy_optimal_switch_speedup"] == pytest.approx(16 / 3)


def test_report_rounds_cost_ratios_half_up_to_two_decimals():
    report = cost_ratio_report(cpu=CPU, gpu=GPU, models=("sm", "energy"))
    amber = {model: report["models"][model]["rows"][3] for model in ("sm", "energy")}
    assert amber["sm"]["cost_ratio"] == 12.75
    assert amber["energy"]["cost_ratio"] == 28.69


def test_report_has_figure_1_for_speedups_1_to_39():
    report = cost_ratio_report(cpu=CPU, gpu=GPU)
    figure = report["figure1"]
    assert [point["speedup"] for point in figure] == list(range(1, 40))
    assert figure[0] == {"speedup": 1, "energy_wh": {"energy": 300.0, "sm": 300.0, "peak": 300.0}}
    assert figure[7] == {"speedup": 8, "energy_wh": {"energy": 200.0, "sm": 300.0, "peak": 300.0}}
    assert figure[12]["energy_wh"] == pytest.approx(
        {"energy": 1600 / 13, "sm": 1600 / 13, "peak": 1600 / 13}
    )


def test_the_report_names_the_hardware_each_ratio_was_measured_on():
    measured = cost_ratio_report(cpu=CPU, gpu=GPU)["benchmarks"]
    assert [entry["application"] for entry in measured] == [
        benchmark.application for benchmark in load_benchmarks()
    ]
    assert measured[0] == {
        "application": "FUN3D", "perf_ratio": 41,
        "cpu": "2 x Intel Xeon Gold 6240 (18 cores)", "gpu": "4 x NVIDIA A100 SXM",
        "source": "NVIDIA HPC Application Performance (the energy paper's reference 14)",
        "source_url": "https://developer.nvidia.com/hpc-application-performance",
    }  # fmt: skip
    unstated = cost_ratio_report(cpu=CPU, gpu=GPU, benchmarks=[Benchmark("X", Decimal(3))])
    assert unstated["benchmarks"][0]["cpu"] == ""

"""The charging engine against the paper's numbers and DESIGN section 3. Pure: no database."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accounting.clusters.charging import (
    MAX_JOB_NODES,
    MODELS,
    SU_QUANTUM,
    ChargeError,
    LinearModel,
    NodeUsage,
    PartitionSpec,
    SpecError,
    WholeNodeModel,
    charge,
    energy_weight,
    node_fractions_even,
    node_fractions_folded,
    split_evenly,
)

HOUR = 3600

# Table I test system: 2 x Xeon Gold 6240 (18 cores, 150 W, 1.5e12 FLOP/s) per node; the GPU
# nodes add 4 x A100 SXM (108 SMs, 400 W, 9.7e12 FLOP/s).
TABLE_I_CPU = PartitionSpec(
    name="cpu",
    sockets=2,
    cores_per_socket=18,
    memory_mb=192000,
    cpu_tdp_watts=Decimal(150),
    cpu_peak_flops=Decimal("1.5e12"),
)
TABLE_I_GPU = PartitionSpec(
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

# Setonix: CPU nodes 2 x 64-core Milan at 280 W; GPU nodes 1 x 64 cores and 8 GCDs at 280 W.
SETONIX_WORK = PartitionSpec(
    name="work", sockets=2, cores_per_socket=64, memory_mb=245000, cpu_tdp_watts=Decimal(280)
)
SETONIX_GPU = PartitionSpec(
    name="gpu",
    sockets=1,
    cores_per_socket=64,
    memory_mb=245000,
    gpus=8,
    cpu_tdp_watts=Decimal(280),
    gpu_tdp_watts=Decimal(280),
)
SETONIX_NVME = PartitionSpec(
    name="work-nvme",
    sockets=2,
    cores_per_socket=64,
    memory_mb=245000,
    cpu_tdp_watts=Decimal(280),
    node_local={"nvme_gb": Decimal(3500)},
)


def su(
    spec: PartitionSpec, *nodes: NodeUsage, seconds: int = HOUR, model: str = "energy"
) -> Decimal:
    return charge(spec, nodes, elapsed_seconds=seconds, model=model).service_units


# Table I -------------------------------------------------------------------------------------


def test_table_i_node_has_36_cores():
    assert TABLE_I_CPU.cores == 36  # eq 16
    assert TABLE_I_GPU.cores == 36


@pytest.mark.parametrize(
    ("model", "gpu_node_weight"),
    [("sm", Decimal(432)), ("peak", Decimal("465.6")), ("energy", Decimal(192))],
)
def test_table_i_gpu_node_weight_matches_the_paper(model, gpu_node_weight):
    assert MODELS[model].weight(TABLE_I_CPU) == 36
    assert MODELS[model].weight(TABLE_I_GPU) == gpu_node_weight  # eqs 17, 22-24, 25-27


def test_table_i_peak_weight_prints_as_466_when_rounded_to_whole_su():
    assert MODELS["peak"].weight(TABLE_I_GPU).quantize(Decimal(1)) == 466


def test_a_gpu_node_hour_costs_the_model_weight():
    whole_gpu_node = NodeUsage(cores=36, memory_mb=192000, gpus=4)
    assert su(TABLE_I_GPU, whole_gpu_node, model="energy") == 192
    assert su(TABLE_I_GPU, whole_gpu_node, model="sm") == 432
    assert su(TABLE_I_GPU, whole_gpu_node, model="peak") == Decimal("465.6")


# Setonix worked check (DESIGN section 3) -----------------------------------------------------


def test_setonix_cpu_node_hour_is_128_su_and_gpu_node_hour_is_512_su():
    assert energy_weight(SETONIX_WORK) == 128  # IV-B: w = C
    assert energy_weight(SETONIX_GPU) == 512  # eq 15: 8 * 280 / 280 * 64


@pytest.mark.parametrize("memory_mb", [0, 1, 1914, Decimal("1914.0625")])
def test_one_core_with_its_memory_share_for_an_hour_is_one_su(memory_mb):
    # M / C = 245000 / 128 = 1914.0625 MB: anything up to that is one core-equivalent (eq 9).
    assert su(SETONIX_WORK, NodeUsage(cores=1, memory_mb=memory_mb)) == Decimal("1.000000")


def test_memory_heavy_job_is_charged_by_memory():
    result = charge(SETONIX_WORK, [NodeUsage(cores=1, memory_mb=122500)], elapsed_seconds=HOUR)
    assert result.service_units == 64
    assert result.dominant_resource == "memory"
    assert result.nodes[0].memory == Decimal("0.5")
    assert result.nodes[0].dominant == "memory"


@pytest.mark.parametrize("memory_mb", [1915, Decimal("1915.0625")])
def test_one_mb_over_the_core_share_rounds_up_to_two_core_equivalents(memory_mb):
    assert su(SETONIX_WORK, NodeUsage(cores=1, memory_mb=memory_mb)) == 2


def test_one_gpu_with_its_share_of_cores_and_memory_is_an_eighth_of_a_gpu_node():
    result = charge(
        SETONIX_GPU, [NodeUsage(cores=8, memory_mb=30625, gpus=1)], elapsed_seconds=HOUR
    )
    assert result.service_units == 64
    # f_g = f_c = f_m = 1/8: a tie goes to the GPUs.
    assert result.dominant_resource == "gpus"
    assert result.nodes[0].share == Decimal("0.125")


def test_gpu_heavy_job_is_charged_by_gpus_even_with_one_core():
    result = charge(SETONIX_GPU, [NodeUsage(cores=1, memory_mb=0, gpus=4)], elapsed_seconds=HOUR)
    assert result.service_units == 256
    assert result.dominant_resource == "gpus"


def test_charge_is_summed_over_nodes():
    nodes = [NodeUsage(cores=128, memory_mb=1000), NodeUsage(cores=1, memory_mb=61250)]
    result = charge(SETONIX_WORK, nodes, elapsed_seconds=2 * HOUR)
    assert result.service_units == 2 * (128 + 32)
    assert [node.dominant for node in result.nodes] == ["cores", "memory"]
    assert result.dominant_resource == "cores"  # 129/128 of a node of cores against 33/128


def test_a_few_core_seconds_keep_six_decimal_places():
    assert su(SETONIX_WORK, NodeUsage(cores=1, memory_mb=100), seconds=1) == Decimal("0.000278")
    assert su(SETONIX_WORK, NodeUsage(cores=3, memory_mb=100), seconds=2) == Decimal("0.001667")


def test_service_units_have_exactly_six_decimal_places():
    value = su(SETONIX_WORK, NodeUsage(cores=1, memory_mb=100))
    assert value.as_tuple().exponent == SU_QUANTUM.as_tuple().exponent


@pytest.mark.parametrize(
    ("weight", "expected"),
    [(Decimal("0.000064"), Decimal("0.000000")), (Decimal("0.000192"), Decimal("0.000002"))],
)
def test_ties_at_the_ledger_quantum_round_half_even(weight, expected):
    # 1 core of 128 for an hour: w / 128 = 0.0000005 and 0.0000015 exactly.
    spec = PartitionSpec(
        name="tiny", sockets=2, cores_per_socket=64, memory_mb=245000, weight_override=weight
    )
    assert su(spec, NodeUsage(cores=1, memory_mb=0)) == expected


def test_zero_elapsed_time_costs_nothing():
    assert su(SETONIX_WORK, NodeUsage(cores=64, memory_mb=1000), seconds=0) == 0


def test_charge_reports_hours_weight_and_model():
    result = charge(SETONIX_GPU, [NodeUsage(8, 1000, 1)], elapsed_seconds=5400)
    assert result.model == "energy"
    assert result.hours == Decimal("1.5")
    assert result.weight == 512
    assert result.service_units == 96


def test_staff_override_replaces_the_weight_but_not_the_derived_value():
    overridden = PartitionSpec(
        name="gpu",
        sockets=1,
        cores_per_socket=64,
        memory_mb=245000,
        gpus=8,
        cpu_tdp_watts=Decimal(280),
        gpu_tdp_watts=Decimal(280),
        weight_override=Decimal(400),
    )
    result = charge(overridden, [NodeUsage(8, 1000, 1)], elapsed_seconds=HOUR)
    assert result.service_units == 50
    assert result.weight == 400
    assert energy_weight(overridden) == 512


def test_energy_estimate_counts_cpu_tdp_on_cpu_nodes_and_gpu_tdp_on_gpu_nodes():
    # eq 29: a CPU node's 2 x 280 W for 1/128 of the node; a GPU node's 8 x 280 W for 1/8.
    cpu_job = charge(SETONIX_WORK, [NodeUsage(1, 1000)], elapsed_seconds=HOUR)
    gpu_job = charge(SETONIX_GPU, [NodeUsage(8, 1000, 1)], elapsed_seconds=HOUR)
    assert cpu_job.energy_wh == Decimal("4.375")
    assert gpu_job.energy_wh == 280


# Splitting sacct totals over nodes -----------------------------------------------------------


def test_totals_that_divide_evenly_stay_whole_numbers():
    nodes = split_evenly(nodes=4, cores=512, memory_mb=980000, gpus=0)
    assert nodes == (NodeUsage(cores=128, memory_mb=245000, gpus=0),) * 4
    assert su(SETONIX_WORK, *nodes) == 512


def test_uneven_totals_become_decimal_shares_that_sum_to_the_total_charge():
    nodes = split_evenly(nodes=3, cores=10, memory_mb=3000)
    assert len(nodes) == 3
    assert nodes[0].cores == Decimal("3.333333333333333333333333333")
    assert su(SETONIX_WORK, *nodes) == 10


def test_split_memory_on_a_core_boundary_does_not_spill_into_the_next_core_equivalent():
    # 32000 MB over 3 nodes is 2 core-equivalents of M / C = 5333.33 MB on each node; rounding
    # the share up would make it 3.
    nodes = split_evenly(nodes=3, cores=3, memory_mb=32000)
    result = charge(TABLE_I_CPU, nodes, elapsed_seconds=HOUR)
    assert [node.memory for node in result.nodes] == [Decimal(2) / 36] * 3
    assert result.service_units == 6


def test_split_spreads_node_local_resources_too():
    nodes = split_evenly(nodes=2, cores=2, memory_mb=0, node_local={"nvme_gb": Decimal(1000)})
    assert nodes[0].node_local == {"nvme_gb": Decimal(500)}


def test_split_needs_at_least_one_node():
    with pytest.raises(ChargeError, match="at least one node"):
        split_evenly(nodes=0, cores=1, memory_mb=0)


# Node-local resources (IV-E) are data ---------------------------------------------------------


def test_node_local_resource_that_does_not_dominate_leaves_the_charge_unchanged():
    plain = su(SETONIX_WORK, NodeUsage(cores=4, memory_mb=1000))
    with_nvme = su(SETONIX_NVME, NodeUsage(4, 1000, node_local={"nvme_gb": Decimal(100)}))
    # 100 GB of 3500 is ceil(3.66) = 4 core-equivalents: no more than the 4 cores.
    assert with_nvme == plain == 4


def test_node_local_resource_that_dominates_sets_the_charge():
    result = charge(
        SETONIX_NVME,
        [NodeUsage(1, 1000, node_local={"nvme_gb": Decimal(1750)})],
        elapsed_seconds=HOUR,
    )
    assert result.service_units == 64
    assert result.dominant_resource == "nvme_gb"
    assert result.nodes[0].node_local == {"nvme_gb": Decimal("0.5")}


def test_node_local_fractions_list_every_resource_of_the_partition():
    result = charge(SETONIX_NVME, [NodeUsage(1, 1000)], elapsed_seconds=HOUR)
    assert result.nodes[0].node_local == {"nvme_gb": 0}


def test_spec_with_node_local_dict_is_hashable_and_immune_to_later_edits():
    capacities = {"nvme_gb": Decimal(3500)}
    spec = PartitionSpec(
        name="n", sockets=1, cores_per_socket=8, memory_mb=8000, node_local=capacities
    )
    capacities["nvme_gb"] = Decimal(1)
    assert spec.node_local == {"nvme_gb": Decimal(3500)}
    assert hash(spec) == hash(
        PartitionSpec(
            name="n",
            sockets=1,
            cores_per_socket=8,
            memory_mb=8000,
            node_local={"nvme_gb": Decimal(3500)},
        )
    )


# Alternative models ---------------------------------------------------------------------------


def test_core_hour_model_ignores_memory_and_gpus():
    nodes = [NodeUsage(cores=4, memory_mb=245000)]
    result = charge(SETONIX_WORK, nodes, elapsed_seconds=2 * HOUR, model="core-hour")
    assert result.service_units == 8
    assert result.weight == 128


def test_whole_node_model_charges_every_node_whole():
    nodes = [NodeUsage(cores=1, memory_mb=0)] * 2
    assert su(SETONIX_WORK, *nodes, model="whole-node") == 256  # Magnus: w = C


def test_whole_node_model_takes_archer2_style_node_weight():
    archer2 = WholeNodeModel(node_weight=Decimal(1))  # 1 CU per node-hour
    nodes = [NodeUsage(cores=1, memory_mb=0)] * 2
    result = charge(SETONIX_WORK, nodes, elapsed_seconds=3 * HOUR, model=archer2)
    assert result.service_units == 6
    assert result.weight == 1


def test_sm_model_charges_a_gpu_by_its_streaming_multiprocessors():
    one_gpu = NodeUsage(cores=9, memory_mb=48000, gpus=1)
    assert su(TABLE_I_GPU, one_gpu, model="sm") == 108  # eq 17: 432 / 4
    assert su(TABLE_I_CPU, NodeUsage(cores=1, memory_mb=0), model="sm") == 1


def test_peak_model_charges_a_gpu_by_its_peak_flops():
    one_gpu = NodeUsage(cores=9, memory_mb=48000, gpus=1)
    assert su(TABLE_I_GPU, one_gpu, model="peak") == Decimal("116.4")  # eq 22: 465.6 / 4


def test_linear_model_uses_puhti_rates():
    puhti = PartitionSpec(
        name="gpu",
        sockets=2,
        cores_per_socket=20,
        memory_mb=384 * 1024,
        gpus=4,
        cpu_tdp_watts=Decimal(125),
        gpu_tdp_watts=Decimal(300),
        node_local={"nvme_gb": Decimal(3600)},
    )
    job = NodeUsage(cores=1, memory_mb=4 * 1024, gpus=1, node_local={"nvme_gb": Decimal(100)})
    result = charge(puhti, [job], elapsed_seconds=2 * HOUR, model="linear")
    assert result.service_units == (1 + Decimal("0.4") + Decimal("0.6") + 60) * 2
    # Reported weight: one whole node for an hour.
    assert result.weight == 40 + Decimal("38.4") + Decimal("21.6") + 240


def test_linear_model_rates_are_parameters():
    model = LinearModel(core_rate=Decimal(2), memory_gib_rate=Decimal(0))
    result = charge(SETONIX_WORK, [NodeUsage(3, 2048)], elapsed_seconds=HOUR, model=model)
    assert result.service_units == 6


def test_every_registered_model_prices_the_same_job():
    assert set(MODELS) == {"energy", "core-hour", "whole-node", "sm", "peak", "linear"}
    nodes = [NodeUsage(cores=9, memory_mb=48000, gpus=1)]
    for name, model in MODELS.items():
        result = charge(TABLE_I_GPU, nodes, elapsed_seconds=HOUR, model=name)
        assert result.model == name == model.name
        assert result.service_units > 0


def test_peak_model_needs_peak_flops():
    with pytest.raises(SpecError, match="cpu_peak_flops is required"):
        su(SETONIX_GPU, NodeUsage(8, 1000, 1), model="peak")


def test_sm_model_needs_streaming_multiprocessors():
    with pytest.raises(SpecError, match="gpu_streaming_multiprocessors must be positive"):
        su(SETONIX_GPU, NodeUsage(8, 1000, 1), model="sm")


# Bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "nodes", "message"),
    [
        (SETONIX_WORK, [NodeUsage(cores=0, memory_mb=10)], r"node 1: cores must be positive"),
        (SETONIX_WORK, [NodeUsage(cores=-2, memory_mb=10)], r"node 1: cores must be positive"),
        (SETONIX_WORK, [NodeUsage(cores=129, memory_mb=0)], r"129 cores requested .* has 128"),
        (
            SETONIX_WORK,
            [NodeUsage(cores=1, memory_mb=1), NodeUsage(cores=1, memory_mb=245001)],
            r"node 2: 245001 MB of memory requested .* has 245000 MB",
        ),
        (SETONIX_WORK, [NodeUsage(cores=1, memory_mb=-1)], r"memory_mb must not be negative"),
        (
            SETONIX_WORK,
            [NodeUsage(cores=1, memory_mb=0, gpus=1)],
            r"1 GPUs requested on partition 'work', which has no GPUs",
        ),
        (SETONIX_GPU, [NodeUsage(cores=1, memory_mb=0, gpus=9)], r"9 GPUs requested .* has 8"),
        (SETONIX_GPU, [NodeUsage(cores=1, memory_mb=0, gpus=-1)], r"gpus must not be negative"),
        (
            SETONIX_WORK,
            [NodeUsage(1, 0, node_local={"nvme_gb": Decimal(1)})],
            r"unknown node-local resource 'nvme_gb' on partition 'work' \(known: none\)",
        ),
        (
            SETONIX_NVME,
            [NodeUsage(1, 0, node_local={"nvme_gb": Decimal(3501)})],
            r"3501 nvme_gb requested .* has 3500",
        ),
        (SETONIX_WORK, [], r"at least one node; the node list is empty"),
        (SETONIX_WORK, [NodeUsage(cores=1.5, memory_mb=0)], r"cores must be an int or a Decimal"),  # type: ignore[arg-type]
        (SETONIX_WORK, [NodeUsage(Decimal("NaN"), 0)], r"node 1: usage must be finite numbers"),
    ],
)
def test_impossible_usage_is_refused_with_a_clear_message(spec, nodes, message):
    with pytest.raises(ChargeError, match=message):
        charge(spec, nodes, elapsed_seconds=HOUR)


def test_negative_elapsed_time_is_refused():
    with pytest.raises(ChargeError, match="elapsed_seconds must not be negative"):
        charge(SETONIX_WORK, [NodeUsage(1, 0)], elapsed_seconds=-1)


def test_unknown_model_is_refused():
    with pytest.raises(ChargeError, match=r"unknown charging model 'gold'.*known: core-hour"):
        charge(SETONIX_WORK, [NodeUsage(1, 0)], elapsed_seconds=HOUR, model="gold")


def _spec(**changes: object) -> PartitionSpec:
    fields: dict[str, object] = {
        "name": "gpu",
        "sockets": 1,
        "cores_per_socket": 64,
        "memory_mb": 245000,
        "gpus": 8,
        "cpu_tdp_watts": Decimal(280),
        "gpu_tdp_watts": Decimal(280),
    }
    fields.update(changes)
    return PartitionSpec(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": " "}, "name must be a non-empty string"),
        ({"sockets": 0}, "sockets must be a positive integer, got 0"),
        ({"cores_per_socket": -1}, "cores_per_socket must be a positive integer"),
        ({"memory_mb": 0}, "memory_mb must be a positive integer"),
        ({"gpus": -1}, "gpus must be an integer of at least 0"),
        ({"gpu_tdp_watts": Decimal(0)}, r"gpu_tdp_watts must be positive on a GPU partition"),
        ({"cpu_tdp_watts": Decimal(0)}, r"cpu_tdp_watts must be positive on a GPU partition"),
        ({"cpu_tdp_watts": Decimal(-5), "gpus": 0}, "cpu_tdp_watts must be a finite non-negative"),
        ({"weight_override": Decimal(0)}, "weight_override must be a finite positive"),
        ({"gpu_peak_flops": Decimal("Infinity")}, "gpu_peak_flops must be a finite positive"),
        ({"node_local": {"nvme_gb": Decimal(0)}}, r"node_local\['nvme_gb'\] must be a finite"),
        ({"node_local": {"memory": Decimal(10)}}, "clashes with a built-in resource"),
    ],
)
def test_invalid_spec_is_refused_naming_the_field(changes, message):
    spec = _spec(**changes)
    with pytest.raises(SpecError, match=message):
        spec.validate()
    with pytest.raises(SpecError, match=message):
        charge(spec, [NodeUsage(1, 0)], elapsed_seconds=HOUR)


def test_float_in_a_spec_is_refused_at_construction():
    with pytest.raises(SpecError, match=r"cpu_tdp_watts must be a Decimal or an int, got 280\.0"):
        _spec(cpu_tdp_watts=280.0)


def test_int_tdp_is_accepted_as_an_exact_decimal():
    spec = _spec(cpu_tdp_watts=280, gpu_tdp_watts=280)
    assert spec.cpu_tdp_watts == Decimal(280)
    assert isinstance(spec.cpu_tdp_watts, Decimal)
    assert energy_weight(spec) == 512


def test_spec_properties_describe_the_node():
    assert SETONIX_WORK.cores == 128
    assert SETONIX_WORK.memory_per_core_mb == Decimal("1914.0625")
    assert not SETONIX_WORK.is_gpu
    assert SETONIX_GPU.is_gpu
    assert SETONIX_WORK.node_cpu_tdp_watts == 560
    assert SETONIX_GPU.node_gpu_tdp_watts == 2240


def test_split_refuses_floats():
    with pytest.raises(ChargeError, match=r"memory_mb must be an int or a Decimal, got 1000\.5"):
        split_evenly(nodes=2, cores=2, memory_mb=1000.5)


def test_whole_node_weight_must_be_positive():
    with pytest.raises(SpecError, match="node_weight must be a finite positive number"):
        WholeNodeModel(node_weight=Decimal(0))


def test_decimal_usage_from_a_quote_is_charged_like_whole_numbers():
    as_decimals = NodeUsage(cores=Decimal(8), memory_mb=Decimal("30625.0"), gpus=Decimal(1))
    as_ints = NodeUsage(cores=8, memory_mb=30625, gpus=1)
    assert charge(SETONIX_GPU, [as_decimals], elapsed_seconds=HOUR) == charge(
        SETONIX_GPU, [as_ints], elapsed_seconds=HOUR
    )


def test_fractional_cores_from_a_split_are_charged_pro_rata():
    # 1 core over 2 nodes: half a core on each, and no memory
    nodes = split_evenly(nodes=2, cores=1, memory_mb=0)
    result = charge(SETONIX_WORK, nodes, elapsed_seconds=HOUR)
    assert [node.cores for node in result.nodes] == [Decimal("0.00390625")] * 2
    assert result.service_units == 1


def test_a_jobs_node_fractions_follow_from_its_shape_as_its_charge_shows_them():
    # The ledger keeps no copy of them (migration 0022): the pages derive them from the shape.
    usage = split_evenly(nodes=2, cores=96, memory_mb=Decimal("122500.000"), gpus=4)
    shown = charge(SETONIX_GPU, usage, elapsed_seconds=HOUR).nodes
    derived = node_fractions_even(
        SETONIX_GPU, nodes=2, cores=96, memory_mb=Decimal("122500.000"), gpus=4
    )
    assert derived == shown
    # 48 of 64 cores, 61,250 MiB = ceil(16.0) = 16 core-equivalents of 64, 2 of 8 GPUs
    assert node_fractions_folded(derived) == [
        {"nodes": "2", "cores": "0.75", "memory": "0.25", "gpus": "0.25"}
    ]


def test_nodes_that_hold_different_shares_are_folded_only_where_consecutive_nodes_agree():
    small, large = NodeUsage(cores=32, memory_mb=1000), NodeUsage(cores=64, memory_mb=1000)
    fractions = charge(SETONIX_GPU, (small, small, large), elapsed_seconds=HOUR).nodes
    assert node_fractions_folded(fractions) == [
        {"nodes": "2", "cores": "0.5", "memory": "0.015625", "gpus": "0"},
        {"nodes": "1", "cores": "1", "memory": "0.015625", "gpus": "0"},
    ]
    with pytest.raises(ChargeError):
        node_fractions_even(SETONIX_GPU, nodes=1, cores=65, memory_mb=0)


def test_a_job_of_more_nodes_than_any_cluster_has_is_refused_before_it_is_split():
    """Two billion nodes (a crafted sacct line, a typed-in quote) once built a tuple of two
    billion node usages and died of MemoryError; the count is refused at once."""
    with pytest.raises(ChargeError, match="2,000,000,000 nodes is more than any cluster"):
        split_evenly(nodes=2_000_000_000, cores=64, memory_mb=1000)
    assert len(split_evenly(nodes=MAX_JOB_NODES, cores=64, memory_mb=1)) == MAX_JOB_NODES

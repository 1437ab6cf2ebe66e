"""python manage.py quote: the machine-readable contract and the worked examples."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clusters():
    call_command("cluster_apply", *sorted(EXAMPLES.glob("*.json")), stdout=StringIO())


def _quote(*args):
    out = StringIO()
    call_command("quote", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_quote_json_has_the_contract_keys():
    quote = _quote("--cluster", "setonix", "--partition", "gpu", "--nodes", "1", "--hours", "1")
    assert {"service_units", "weight", "dominant_resource", "energy_wh", "nodes"} <= set(quote)
    assert quote["service_units"] == "512.000000"
    assert set(quote["nodes"][0]) >= {"cores", "memory", "gpus"}


def test_one_core_with_its_share_of_memory_for_an_hour_is_one_su():
    quote = _quote(
        "--cluster", "setonix", "--partition", "work", "--cores-per-node", "1", "--hours", "1"
    )
    assert quote["service_units"] == "1.000000"
    assert quote["dominant_resource"] == "cores"


def test_one_core_with_half_the_memory_costs_64_su_an_hour_and_memory_dominates():
    quote = _quote(
        "--cluster", "setonix", "--partition", "work", "--cores-per-node", "1",
        "--memory-per-node", "122500M", "--hours", "1",
    )  # fmt: skip
    assert quote["service_units"] == "64.000000"
    assert quote["dominant_resource"] == "memory"
    assert quote["nodes"] == [{"cores": "0.0078125", "memory": "0.5", "gpus": "0"}]


def test_a_gpu_request_brings_its_share_of_cores_and_gpus_dominate():
    quote = _quote(
        "--cluster", "setonix", "--partition", "gpu", "--gpus-per-node", "2", "--hours", "2",
        "--nodes", "2",
    )  # fmt: skip
    assert quote["service_units"] == str(512 * 2 * 2 * 2 // 8) + ".000000"  # w * t * n * 2/8
    assert quote["dominant_resource"] == "gpus"
    assert quote["energy_wh"] == "2240.000000"  # 2 nodes x 2 h x 2 GPUs x 280 W


def test_text_output_explains_the_weight():
    out = StringIO()
    call_command("quote", "--cluster", "setonix", "--partition", "gpu", "--hours", "1", stdout=out)
    assert "GPU node: (8 x 280 W GPU) / (1 x 280 W CPU) x 64 cores = 512" in out.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "nowhere", "--partition", "gpu"], "unknown cluster 'nowhere'"),
        (["--cluster", "setonix", "--partition", "debug"], "unknown partition 'debug'"),
        (["--cluster", "setonix", "--partition", "work", "--gpus-per-node", "1"], "GPU"),
        (["--cluster", "setonix", "--partition", "work", "--memory-per-node", "300G"], "memory"),
        (["--cluster", "setonix", "--partition", "work", "--cores-per-node", "0"], "cores"),
        (
            ["--cluster", "setonix", "--partition", "work", "--memory-per-node", "lots"],
            "--memory-per-node",
        ),
    ],
)
def test_bad_requests_are_clear_errors(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("quote", *args, "--hours", "1", stdout=StringIO())


def test_zero_hours_is_refused():
    with pytest.raises(CommandError, match="hours must be positive"):
        call_command(
            "quote",
            "--cluster",
            "setonix",
            "--partition",
            "work",
            "--hours",
            "0",
            stdout=StringIO(),
        )


def test_default_memory_is_slurms_per_core_share_and_never_tips_into_the_next_core():
    # 192000 MB / 36 cores is not a whole number; 2 cores with their default memory must
    # cost 2 core-hours, not 3 (a bug found by the engine's author, kept as a regression test).
    quote = _quote(
        "--cluster",
        "paper-test-system",
        "--partition",
        "cpu",
        "--cores-per-node",
        "2",
        "--hours",
        "1",
    )
    assert quote["service_units"] == "2.000000"
    assert quote["dominant_resource"] == "cores"

"""python manage.py cost_ratio: Tables II-IV and Figure 1 from the stored paper test system."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_parse

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clusters():
    call_command("cluster_apply", *sorted(EXAMPLES.glob("*.json")), stdout=StringIO())


def _report(*args):
    out = StringIO()
    call_command("cost_ratio", "--cluster", "paper-test-system", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_json_has_the_contract_shape_and_the_papers_weights():
    report = _report()
    assert set(report["models"]) == {"energy", "sm", "peak"}
    weights = {
        name: (m["cpu_node_weight"], m["gpu_node_weight"]) for name, m in report["models"].items()
    }
    assert weights == {"energy": (36, 192), "sm": (36, 432), "peak": (36, 466)}
    first = report["models"]["energy"]["rows"][0]
    assert first == {
        "application": "FUN3D", "perf_ratio": 41, "cpu_charge": 1476, "gpu_charge": 192,
        "cost_ratio": 7.69,
    }  # fmt: skip
    assert len(report["models"]["energy"]["rows"]) == 13


def test_figure1_runs_over_speedups_1_to_39_with_each_models_choice():
    figure = _report()["figure1"]
    assert [point["speedup"] for point in figure] == list(range(1, 40))
    at = {point["speedup"]: point["energy_wh"] for point in figure}
    assert at[5] == {"energy": 300.0, "sm": 300.0, "peak": 300.0}
    for speedup in range(6, 13):  # only the energy model picks the GPU node here
        assert at[speedup]["energy"] == pytest.approx(1600 / speedup)
        assert at[speedup]["sm"] == at[speedup]["peak"] == 300.0
    assert at[13]["sm"] == pytest.approx(1600 / 13)
    assert at[13]["peak"] == pytest.approx(1600 / 13)


def test_one_model_can_be_asked_for():
    assert set(_report("--model", "sm")["models"]) == {"sm"}


def test_text_output_prints_the_tables():
    out = StringIO()
    call_command("cost_ratio", "--cluster", "paper-test-system", stdout=out)
    text = out.getvalue()
    assert "Energy-based accounting (eq 15)" in text
    assert "GPU node: 466 SU/h" in text


def test_a_cluster_without_gpus_is_a_clear_error():
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    document["name"] = "cpu-only"
    document["partitions"] = document["partitions"][:1]
    cluster_apply(definition=cluster_definition_parse(document))
    with pytest.raises(CommandError, match="has no GPU partition"):
        call_command("cost_ratio", "--cluster", "cpu-only", stdout=StringIO())

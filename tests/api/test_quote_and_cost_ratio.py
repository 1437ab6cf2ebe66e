"""The quote contract: POST /api/v1/quote/ answers exactly what ``quote --json`` prints, and
/api/v1/cost-ratio/ what ``cost_ratio --json`` does."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.factories import UserFactory, api_token

pytestmark = pytest.mark.django_db

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"


@pytest.fixture
def client():
    call_command("cluster_apply", *sorted(EXAMPLES.glob("*.json")), stdout=StringIO())
    api = APIClient()
    user = UserFactory(username="researcher")
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user, scope='read')}")
    return api


def _command(*args):
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


QUOTES = [
    {"cluster": "setonix", "partition": "work", "cores_per_node": "1", "hours": "1"},
    {"cluster": "setonix", "partition": "work", "cores_per_node": "1",
     "memory_per_node": "122500M", "hours": "1"},
    {"cluster": "setonix", "partition": "work", "memory_per_node": "60G", "hours": "2.5"},
    {"cluster": "setonix", "partition": "gpu", "gpus_per_node": 2, "nodes": 2, "hours": "2"},
    {"cluster": "setonix", "partition": "gpu", "nodes": 1, "hours": "1"},
    {"cluster": "setonix", "partition": "highmem", "cores_per_node": "3", "hours": "0.25",
     "model": "core-hour"},
    {"cluster": "paper-test-system", "partition": "gpu", "gpus_per_node": 1, "hours": "3",
     "model": "peak"},
]  # fmt: skip


def _options(quote):
    options = []
    for name, value in quote.items():
        options += [f"--{name.replace('_', '-')}", str(value)]
    return options


@pytest.mark.parametrize("quote", QUOTES, ids=lambda quote: " ".join(map(str, quote.values())))
def test_the_api_quote_is_exactly_the_quote_commands_json(client, quote):
    response = client.post("/api/v1/quote/", quote, format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == _command("quote", *_options(quote))


def test_a_quote_at_a_past_time_uses_the_rates_then(client):
    quote = {"cluster": "setonix", "partition": "work", "hours": "1", "at": "2025-01-01T00:00Z"}
    response = client.post("/api/v1/quote/", quote, format="json")
    assert response.json() == _command("quote", *_options(quote))


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"cluster": "nowhere"}, "cluster", "unknown cluster 'nowhere'"),
        ({"partition": "debugq"}, "partition", "unknown partition 'debugq'"),
        ({"memory_per_node": "60Q"}, "memory_per_node", ""),
        ({"hours": "0"}, "hours", ""),
        ({"nodes": 0}, "nodes", ""),
        ({"model": "free"}, "model", ""),
    ],
)
def test_a_quote_that_cannot_be_priced_says_which_field_is_wrong(client, change, field, message):
    quote = {"cluster": "setonix", "partition": "work", "hours": "1", **change}
    response = client.post("/api/v1/quote/", quote, format="json")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [field]
    assert message in response.json()["errors"][field][0]


def test_a_quote_the_engine_refuses_is_a_400_with_its_reason(client):
    quote = {"cluster": "setonix", "partition": "work", "cores_per_node": "500", "hours": "1"}
    response = client.post("/api/v1/quote/", quote, format="json")
    assert response.status_code == 400
    assert "500" in response.json()["message"]


def test_the_cost_ratio_data_is_the_cost_ratio_commands_json(client):
    response = client.get("/api/v1/cost-ratio/?cluster=paper-test-system")
    assert response.status_code == 200
    body = response.json()
    assert body.pop("cluster") == "paper-test-system"
    assert (body.pop("cpu_partition"), body.pop("gpu_partition")) == ("cpu", "gpu")
    assert body.pop("unavailable_models") == {}
    assert body == _command("cost_ratio", "--cluster", "paper-test-system")
    energy = client.get("/api/v1/cost-ratio/?cluster=paper-test-system&model=energy").json()
    assert list(energy["models"]) == ["energy"]


def test_cost_ratio_of_an_unknown_cluster_is_a_400(client):
    response = client.get("/api/v1/cost-ratio/?cluster=nowhere")
    assert response.status_code == 400
    assert "unknown cluster 'nowhere'" in response.json()["errors"]["cluster"][0]


SM_REASON = (
    "It needs the number of streaming multiprocessors per GPU (at least 1), which the "
    "specification of partition gpu does not give."
)


def test_a_model_the_cluster_cannot_price_is_left_out_with_its_reason(client):
    body = client.get("/api/v1/cost-ratio/?cluster=setonix").json()
    assert "sm" not in body["models"]
    assert "energy" in body["models"]
    assert body["unavailable_models"]["sm"] == SM_REASON
    assert set(body["models"]) | set(body["unavailable_models"]) == {"energy", "sm", "peak"}
    response = client.get("/api/v1/cost-ratio/?cluster=setonix&model=sm")
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "model": [f"The SM model cannot price these partitions. {SM_REASON}"]
    }


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("cpu_partition=gpu", "cpu_partition",
         "Cluster setonix has no CPU partition named 'gpu'."),
        ("gpu_partition=work", "gpu_partition",
         "Cluster setonix has no GPU partition named 'work'."),
        ("speedup=0", "speedup", "Speedup must be more than 0 and at most 10,000."),
        ("speedup=10001", "speedup", "Speedup must be more than 0 and at most 10,000."),
        ("speedup=fast", "speedup", "Speedup must be a number, e.g. 8."),
        ("speedup=4.0001", "speedup", "Speedup takes at most 3 digits after the point."),
        ("speedup=4&cpu_node_hours=0", "cpu_node_hours",
         "CPU-node hours must be more than 0 and at most 1,000,000."),
        ("gpu_node_hours=2000000", "gpu_node_hours",
         "GPU-node hours must be more than 0 and at most 1,000,000."),
        ("speedup=4&grid_intensity=-1", "grid_intensity",
         "Grid intensity must be between 0 and 2,000 g CO₂/kWh."),
    ],
)  # fmt: skip
def test_an_out_of_range_field_is_a_400_keyed_by_it_in_a_sentence(client, query, field, message):
    response = client.get(f"/api/v1/cost-ratio/?cluster=setonix&{query}")
    assert response.status_code == 400
    assert response.json()["errors"] == {field: [message]}


@pytest.mark.parametrize(
    ("speedup", "fewer_su", "less_energy", "recommended", "sentence"),
    [
        ("3.99", "cpu", "cpu", "cpu",
         "It costs fewer SU on the CPU node, and it uses less energy there too."),
        ("4", "same", "same", "same",
         "It costs the same SU and uses the same energy on both nodes."),
        ("4.01", "gpu", "gpu", "gpu",
         "It costs fewer SU on the GPU node, and it uses less energy there too."),
    ],
)  # fmt: skip
def test_my_application_in_the_api_calls_setonixs_break_even_a_tie(
    client, speedup, fewer_su, less_energy, recommended, sentence
):
    body = client.get(f"/api/v1/cost-ratio/?cluster=setonix&speedup={speedup}").json()
    mine = body["my_application"]
    assert (mine["fewer_su"], mine["less_energy"]) == (fewer_su, less_energy)
    assert (mine["recommended"], mine["sentence"]) == (recommended, sentence)
    if speedup == "4":
        assert Decimal(mine["cpu"]["service_units"]) == Decimal(mine["gpu"]["service_units"]) == 128
        assert Decimal(mine["cpu"]["energy_wh"]) == Decimal(mine["gpu"]["energy_wh"]) == 560

"""The CPU-vs-GPU cost ratio explorer: the paper's numbers, Figure 1's shading, "my
application", user-added applications and the live JSON endpoint."""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from django.urls import reverse

from accounting.clusters import cost_ratio
from accounting.clusters.explorer import my_application, only_energy_model_regions, usable_models
from tests.pages.conftest import client_for

PAPER = {"system": "paper", "cpu_node_hours": "1", "speedup": "8", "grid_intensity": "500"}


def test_only_the_energy_model_picks_the_efficient_node_between_16_3_and_12_on_the_paper_system():
    cpu, gpu = cost_ratio.paper_test_system()
    regions = only_energy_model_regions(cpu, gpu, ["energy", "sm", "peak"])
    assert regions == [(pytest.approx(16 / 3), pytest.approx(12.0))]


def test_without_other_models_nothing_is_shaded():
    cpu, gpu = cost_ratio.paper_test_system()
    assert only_energy_model_regions(cpu, gpu, ["energy"]) == []


@pytest.mark.parametrize(("speedup", "pick"), [(4, "cpu"), (Fraction(16, 3), "same"), (6, "gpu")])
def test_my_application_goes_where_it_costs_fewer_su(speedup, pick):
    # At 16/3 both nodes cost 360 SU and use 3000 Wh: a tie, not the CPU.
    cpu, gpu = cost_ratio.paper_test_system()
    hours = Decimal(10)
    result = my_application(
        cpu, gpu, cpu_node_hours=hours, gpu_node_hours=hours / Decimal(speedup.numerator)
        * Decimal(getattr(speedup, "denominator", 1)),
    )  # fmt: skip
    assert result.recommended == pick
    assert result.cpu.service_units == 36 * hours  # w = C on the CPU node
    assert result.cpu.energy_wh == 300 * hours  # 2 x 150 W for 10 h
    assert result.cpu.co2_kg == Decimal("1.500")  # 3 kWh at 500 g/kWh


def test_a_model_that_lacks_data_is_named_with_its_reason():
    cpu, gpu = cost_ratio.paper_test_system()
    from dataclasses import replace

    models, reasons = usable_models(cpu, replace(gpu, gpu_streaming_multiprocessors=0))
    assert models == ["energy", "peak"]
    assert reasons["sm"] == (
        "It needs the number of streaming multiprocessors per GPU (at least 1), which the "
        "specification of partition gpu does not give."
    )


@pytest.mark.django_db
def test_the_explorer_reproduces_the_papers_weights_and_tables(site):
    page = client_for(site.users["member"]).get(reverse("accounting:cost-ratio"), PAPER)
    models = {model["name"]: model for model in page.context["models"]}
    assert models["energy"]["gpu_node_weight"] == 192
    assert models["sm"]["gpu_node_weight"] == 432
    assert models["peak"]["gpu_node_weight"] == 466
    amber = next(row for row in page.context["rows"] if row["application"] == "AMBER")
    assert amber["cpu_charge"] == 5508
    assert [m["cost_ratio"] for m in amber["models"]] == [28.69, 12.75, 11.82]
    figure = json.loads(page.context["chart"].figure_json)
    shapes = figure["layout"]["shapes"]
    shaded = [shape for shape in shapes if shape["type"] == "rect"]
    assert shaded[0]["x0"] == pytest.approx(16 / 3)
    assert shaded[0]["x1"] == pytest.approx(12)
    # Its words start at the band's left edge: centred, a phone's narrow band put them over
    # the y axis' "0".
    (words,) = [note for note in figure["layout"]["annotations"] if "only the" in note["text"]]
    assert (words["x"], words["xanchor"]) == (pytest.approx(16 / 3), "left")
    assert figure["layout"]["xaxis"]["title"]["text"].startswith("GPU speedup")
    assert figure["layout"]["yaxis"]["title"]["text"] == "energy (Wh)"


def test_the_examples_table_groups_its_charges_by_thousands(site):
    page = client_for(site.users["member"]).get(reverse("accounting:cost-ratio"), PAPER)
    amber = re.search(r"<tr[^>]*><td>AMBER</td>.*?</tr>", page.content.decode(), re.S)
    assert amber is not None
    assert '<td class="num">5,508</td>' in amber.group()


@pytest.mark.django_db
def test_added_applications_join_the_tables_and_the_csv(site):
    client = client_for(site.users["pi"])
    query = {**PAPER, "applications": "MyCode, 20\nTiny, 2.5"}
    page = client.get(reverse("accounting:cost-ratio"), query)
    mine = [row for row in page.context["rows"] if row["added"]]
    assert [row["application"] for row in mine] == ["MyCode", "Tiny"]
    assert mine[0]["cpu_charge"] == 720  # 20 CPU nodes x 36 SU
    rows = list(
        csv.reader(
            io.StringIO(
                client.get(
                    reverse("accounting:cost-ratio"), {**query, "csv": "tables"}
                ).content.decode()
            )
        )
    )
    assert rows[-1][:3] == ["Tiny", "2.5", "90"]


CODE_WORDS = re.compile(r"\beq \d|\w_\w|Ensure")  # equation numbers, code names, Django's words
BAD_SETTINGS = [
    ({"cpu_node_hours": "0"}, "CPU-node hours must be more than 0 and at most 1,000,000."),
    ({"cpu_node_hours": "1000001"}, "CPU-node hours must be more than 0 and at most 1,000,000."),
    ({"cpu_node_hours": "12345678901"}, "CPU-node hours must be more than 0 and at most 1,000,"),
    ({"cpu_node_hours": "lots"}, "CPU-node hours must be a number, e.g. 10."),
    ({"cpu_node_hours": "1.0005"}, "CPU-node hours takes at most 3 digits after the point."),
    ({"cpu_node_hours": ""}, "Give a number for CPU-node hours, e.g. 10."),
    ({"gpu_node_hours": "-1"}, "GPU-node hours must be more than 0 and at most 1,000,000."),
    ({"gpu_node_hours": "NaN"}, "GPU-node hours must be a number, e.g. 2.5."),
    ({"speedup": "0"}, "Speedup must be more than 0 and at most 10,000."),
    ({"speedup": "10000.5"}, "Speedup must be more than 0 and at most 10,000."),
    ({"speedup": "8x"}, "Speedup must be a number, e.g. 8."),
    ({"grid_intensity": "-5"}, "Grid intensity must be between 0 and 2,000 g CO₂/kWh."),
    ({"grid_intensity": "2001"}, "Grid intensity must be between 0 and 2,000 g CO₂/kWh."),
    ({"grid_intensity": "500.25"}, "Grid intensity takes at most one digit after the point."),
    ({"speedup": "", "gpu_node_hours": ""}, "Give the GPU-node hours or a speedup."),
    ({"applications": "no number here"}, "Your applications, line 1"),
    ({"applications": "Big, 100001"}, "(more than 0, at most 100,000)"),
    ({"system": "nowhere"}, "Choose a system from the list."),
]  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "message"), BAD_SETTINGS)
def test_bad_settings_get_a_sentence_naming_the_field_and_its_range(site, change, message):
    client = client_for(site.users["pi"])
    page = client.get(reverse("accounting:cost-ratio"), {**PAPER, **change})
    assert page.status_code == 200
    assert message in page.context["error_list"] or any(
        message in error for error in page.context["error_list"]
    )
    html = page.content.decode()
    assert "Ensure" not in html
    assert "Select a valid choice" not in html
    live = client.get(reverse("accounting:cost-ratio-live"), {**PAPER, **change}).json()
    assert live["valid"] is False
    assert "Check the settings" in live["html"]


@pytest.mark.django_db
def test_a_model_the_cluster_cannot_price_is_explained_without_code_names(site):
    page = client_for(site.users["pi"]).get(
        reverse("accounting:cost-ratio"), {**PAPER, "system": "setonix/work+gpu"}
    )
    html = page.content.decode()
    assert (
        "Not available. It needs the number of streaming multiprocessors per GPU (at least 1), "
        "which the specification of partition gpu does not give." in html
    )
    assert "gpu_streaming_multiprocessors" not in html
    assert "(eq 17)" not in html


@pytest.mark.django_db
def test_a_cluster_pair_can_be_explored_and_models_it_cannot_price_are_named(site):
    page = client_for(site.users["pi"]).get(
        reverse("accounting:cost-ratio"), {**PAPER, "system": "setonix/work+gpu"}
    )
    names = [model["name"] for model in page.context["models"]]
    assert "energy" in names
    weights = {model["name"]: model["gpu_node_weight"] for model in page.context["models"]}
    assert weights["energy"] == 512  # README: 8 x 280 W / 280 W x 64
    assert page.context["unavailable"]  # Setonix's spec has no SM count


@pytest.mark.django_db
def test_the_live_endpoint_returns_the_results_for_the_forms_values(site):
    client = client_for(site.users["pi"])
    answer = client.get(reverse("accounting:cost-ratio-live"), {**PAPER, "speedup": "4"}).json()
    assert answer["valid"] is True
    assert "Pick the CPU partition" in answer["html"]
    answer = client.get(reverse("accounting:cost-ratio-live"), {**PAPER, "speedup": "10"}).json()
    assert "Pick the GPU partition" in answer["html"]
    assert "your application: 10" in answer["html"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("speedup", "headline", "reason"),
    [
        ("3.99", "Pick the CPU partition (work)",
         "costs fewer SU on the CPU node, and it uses less energy there too"),
        ("4", "Either partition: the same SU and energy",
         "costs the same SU and uses the same energy on both nodes"),
        ("4.01", "Pick the GPU partition (gpu)",
         "costs fewer SU on the GPU node, and it uses less energy there too"),
    ],
)  # fmt: skip
def test_the_page_calls_setonixs_break_even_a_tie(site, speedup, headline, reason):
    query = {**PAPER, "system": "setonix/work+gpu", "speedup": speedup}
    client = client_for(site.users["pi"])
    for name in ("accounting:cost-ratio", "accounting:cost-ratio-live"):
        response = client.get(reverse(name), query)
        html = response.json()["html"] if name.endswith("live") else response.content.decode()
        assert f'id="recommended">{headline}</span>' in html
        assert reason in html
    if speedup == "4":
        assert html.count('<td class="num">128.00</td>') == 2
        assert html.count('<td class="num">560 Wh</td>') == 2
        assert "fewer" not in html.split('id="recommendation"')[1].split("</p>")[0]


def _opening_system(user) -> str:
    page = client_for(user).get(reverse("accounting:cost-ratio"))
    assert page.status_code == 200
    return page.context["form"]["system"].value()


@pytest.mark.django_db
def test_the_explorer_opens_on_the_cluster_with_the_latest_job_and_its_main_partitions(site):
    assert _opening_system(site.users["member"]) == f"{site.cluster.name}/work+gpu"
    page = client_for(site.users["member"]).get(reverse("accounting:cost-ratio"))
    assert page.context["system_label"] == f"{site.cluster.name}: work vs gpu"
    option = f'value="{site.cluster.name}/work+gpu" selected>'
    assert option in page.content.decode()


@pytest.mark.django_db
def test_every_example_names_the_hardware_its_speedup_was_measured_on_and_its_source(site):
    html = client_for(site.users["member"]).get(reverse("accounting:cost-ratio")).content.decode()
    rows = html.split('id="examples"')[1].split("</tbody>")[0].split("<tr>")[2:]
    assert len(rows) == len(cost_ratio.load_benchmarks()) == 13
    for example, row in zip(cost_ratio.load_benchmarks(), rows, strict=True):
        assert f'<th scope="row">{example.application}</th>' in row
        assert "<td>2 x Intel Xeon Gold 6240 (18 cores)</td><td>4 x NVIDIA A100 SXM</td>" in row
    assert html.count('href="https://developer.nvidia.com/hpc-application-performance"') == 13
    assert '<label class="sr-only" for="id_example_0">Speedup of FUN3D</label>' in html


@pytest.mark.django_db
def test_an_edited_example_speedup_recomputes_the_tables_and_the_csv(site):
    client = client_for(site.users["pi"])
    query = {**PAPER, "example_0": "20"}  # FUN3D: 20 CPU nodes per GPU node instead of 41
    page = client.get(reverse("accounting:cost-ratio"), query)
    fun3d = next(row for row in page.context["rows"] if row["application"] == "FUN3D")
    assert (fun3d["perf_ratio"], fun3d["cpu_charge"], fun3d["edited"]) == (20, 720, True)
    amber = next(row for row in page.context["rows"] if row["application"] == "AMBER")
    assert (amber["perf_ratio"], amber["edited"]) == (153, False)
    assert page.context["examples_edited"] is True
    live = client.get(reverse("accounting:cost-ratio-live"), query).json()
    assert (
        '<td>FUN3D <span class="badge role">edited</span></td><td class="num">20</td>'
        in (live["html"])
    )
    table = csv.reader(
        io.StringIO(client.get(reverse("accounting:cost-ratio"), {**query, "csv": "tables"})
                    .content.decode())
    )  # fmt: skip
    assert next(row for row in table if row[0] == "FUN3D")[1:3] == ["20", "720"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "Speedup of FUN3D must be more than 0 and at most 100,000."),
        ("100001", "Speedup of FUN3D must be more than 0 and at most 100,000."),
        ("many", "Speedup of FUN3D must be a number, e.g. 41."),
        ("", "Give a number for Speedup of FUN3D, e.g. 41."),
    ],
)
def test_an_example_speedup_out_of_range_is_named_with_its_range(site, value, message):
    page = client_for(site.users["pi"]).get(
        reverse("accounting:cost-ratio"), {**PAPER, "example_0": value}
    )
    assert page.context["error_list"] == [message]

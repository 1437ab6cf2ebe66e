"""Money on the pages: the cost model page (staff), money beside SU on the job, jobs and project
pages, and the cost distribution page (docs/costs.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time
from pathlib import Path

import plotly.graph_objects as go
import pytest
from django.urls import reverse

from accounting.costs.costmodels import expand_nodelist, share_text
from accounting.costs.services import BEGINNING, cost_model_version_create, job_costs_recompute
from accounting.models import CostModelVersion, Job
from tests.pages.conftest import client_for

ROOT = Path(__file__).resolve().parents[2]
MODEL = (ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text()

pytestmark = pytest.mark.django_db


@pytest.fixture
def priced(site):
    version = cost_model_version_create(cluster=site.cluster, name="demo", text=MODEL)
    job_costs_recompute(cluster=site.cluster, since=BEGINNING)
    site.job.refresh_from_db()
    return version


def _models_url(site):
    return reverse("accounting:cost-models", args=[site.cluster.name])


@pytest.mark.parametrize("role", ["member", "pi", "committee", "other"])
def test_the_cost_model_page_is_for_staff_only(site, role):
    # 404 like every staff page: their existence is not advertised (docs/pages.md)
    assert client_for(site.users[role]).get(_models_url(site)).status_code == 404
    distribution = client_for(site.users[role]).get(reverse("accounting:cost-distribution"))
    assert distribution.status_code == 404


def test_staff_check_then_save_a_model_and_see_its_node_hour_range(site):
    client = client_for(site.users["staff"])
    checked = client.post(_models_url(site), {"text": MODEL, "name": "demo", "action": "preview"})
    assert checked.status_code == 200
    assert "The model is valid" in checked.content.decode()
    assert "nodes shared" in checked.content.decode()
    assert not CostModelVersion.objects.exists()
    saved = client.post(_models_url(site), {"text": MODEL, "name": "demo", "action": "save"})
    assert saved.status_code == 302
    version = CostModelVersion.objects.get()
    assert (version.number, version.currency, version.created_by) == (
        1,
        "Euro",
        site.users["staff"],
    )
    page = client.get(_models_url(site)).content.decode()
    assert "v1 · demo" in page
    assert "Hardware" in page
    # CPU nodes 10.3 kEuro a year, GPU nodes 33.7: per node-hour (8760 h a year)
    assert "node-hour range: 1.18\u20133.85 Euro" in page  # to the cent
    assert "Nodes are shared: a job pays each node's time rates times its share" in page


def test_an_uploaded_model_with_an_error_shows_the_line_number(site):
    from django.core.files.uploadedfile import SimpleUploadedFile

    text = MODEL.replace("rate Staff 2.5 k/a\n", "rate Staff 2.5 k/fortnight\n", 1)
    line = text.splitlines().index("rate Staff 2.5 k/fortnight") + 1
    upload = SimpleUploadedFile("testbed.cost", text.encode())
    response = client_for(site.users["staff"]).post(
        _models_url(site), {"file": upload, "action": "save"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert f"Line {line}: rate Staff: bad unit" in page
    assert 'class="error-line"' in page
    assert not CostModelVersion.objects.exists()


def test_the_job_page_shows_money_beside_su_with_the_breakdown(site, priced):
    page = client_for(site.users["pi"]).get(reverse("accounting:job-detail", args=[site.job.pk]))
    html = page.content.decode()
    assert 'id="money"' in html
    assert f"{site.job.cost:.2f}" in html
    assert "Euro" in html
    assert "Hardware" in html
    assert "Infrastructure" in html
    # The generated history has no energy records: the energy rates are not priced.
    assert 'id="no-energy"' in html
    # The demo model's nodes are shared: the page says which part of each node the job paid.
    share = page.context["money"].breakdown.node_share
    assert 0 < share <= 1
    assert 'id="node-share"' in html
    assert f"pays the time rates for {share_text(share)} of each of its nodes" in html


def test_no_energy_notice_only_when_the_jobs_own_node_sets_have_energy_rates(site):
    # Energy rates on another node set (say, the GPU nodes) cannot go unpriced for this job.
    nodes_of_job = set(expand_nodelist(site.job.nodelist))
    other = "GPU" if nodes_of_job <= set(expand_nodelist("nid[1001-1004]")) else "CPU"
    lines = MODEL.splitlines(keepends=True)
    current, kept = "", []
    for line in lines:
        if line.startswith("nodes "):
            current = line.split()[1]
        if line.startswith("energy-rate") and current != other:
            continue
        kept.append(line)
    cost_model_version_create(cluster=site.cluster, name="partial", text="".join(kept))
    job_costs_recompute(cluster=site.cluster, since=BEGINNING)
    page = client_for(site.users["pi"]).get(reverse("accounting:job-detail", args=[site.job.pk]))
    html = page.content.decode()
    assert 'id="money"' in html
    assert 'id="no-energy"' not in html


def test_a_job_without_a_model_shows_no_money(site):
    page = client_for(site.users["pi"]).get(reverse("accounting:job-detail", args=[site.job.pk]))
    assert 'id="money"' not in page.content.decode()


def test_the_jobs_table_has_a_cost_column(site, priced):
    url = reverse("accounting:project-jobs", args=["pawsey0003"])
    html = client_for(site.users["pi"]).get(url).content.decode()
    assert '<th class="num hide-phone">Cost</th>' in html
    assert "Euro" in html
    rows = client_for(site.users["pi"]).get(url + "?format=csv")
    text = b"".join(rows.streaming_content).decode()
    header = text.splitlines()[0].split(",")
    assert header[-2:] == ["cost", "currency"]


def test_the_project_page_shows_the_money_spent_in_the_period(site, priced):
    html = (
        client_for(site.users["pi"])
        .get(reverse("allocations:project-detail", args=["pawsey0003"]))
        .content.decode()
    )
    assert f'id="money-{site.cpu.pk}"' in html
    assert "Money cost of this period's jobs" in html
    assert "Euro" in html


def test_money_adds_no_queries_to_the_pages(site, priced, django_assert_max_num_queries):
    client = client_for(site.users["pi"])
    for url, bound in (
        # with the grid intensity, and the job's end from the key table first
        (reverse("accounting:job-detail", args=[site.job.pk]), 6),
        (reverse("accounting:project-jobs", args=["pawsey0003"]), 9),
        (reverse("allocations:project-detail", args=["pawsey0003"]), 32),
    ):
        with django_assert_max_num_queries(bound):
            assert client.get(url).status_code == 200


def test_the_distribution_page_draws_quantile_and_share_charts(site, priced):
    client = client_for(site.users["staff"])
    response = client.get(reverse("accounting:cost-distribution"), {"cluster": "slurm-testbed"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "The most expensive 1&nbsp;% of jobs account for" in html
    charts = response.context["charts"]
    assert [chart.key for chart in charts] == [
        "quantiles-size", "quantiles-runtime", "quantiles-cost", "cost-share",
    ]  # fmt: skip
    for chart in charts:
        go.Figure(json.loads(chart.figure_json))  # valid against plotly's schema
    cost_curve = json.loads(charts[2].figure_json)
    assert cost_curve["layout"]["yaxis"]["type"] == "log"
    distribution = response.context["distribution"]
    assert distribution.source == "stored"
    assert distribution.job_count == (
        Job.objects.filter(cluster=site.cluster, end__isnull=False)
        .exclude(charge_state=Job.ChargeState.PENDING)
        .exclude(nodelist="")
        .filter(end__gte=datetime.combine(response.context["start"], time.min, tzinfo=UTC))
        .count()
    )
    csv = client.get(
        reverse("accounting:cost-distribution"), {"cluster": "slurm-testbed", "csv": "cost-share"}
    )
    assert csv.status_code == 200
    assert csv["Content-Type"].startswith("text/csv")


def test_the_distribution_page_without_a_model_says_so(site):
    response = client_for(site.users["staff"]).get(reverse("accounting:cost-distribution"))
    assert response.status_code == 200
    assert "No cluster has a cost model yet" in response.content.decode()

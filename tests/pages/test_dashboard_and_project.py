"""The dashboard's balance gauges and alerts, and the project page's charts and tables."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from allocations.grants.selectors import balance_get
from allocations.grants.services import adjustment_top_up
from allocations.models import BudgetPeriod
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def _chart(content: str, key: str) -> dict:
    marker = f'<script type="application/json" id="chart-{key}-data">'
    start = content.index(marker) + len(marker)
    return json.loads(content[start : content.index("</script>", start)])


def _shrink_budget(project, pool, percent_wanted: Decimal) -> None:
    balance = balance_get(project=project, pool=pool)
    assert balance is not None
    period = BudgetPeriod.objects.get(
        allocation__project=project, allocation__pool=pool, start=balance.start
    )
    period.budget_su = (balance.used_su * 100 / percent_wanted).quantize(Decimal(1))
    period.save(update_fields=["budget_su"])


def test_the_dashboard_shows_a_gauge_per_pool_of_each_of_my_projects(site):
    content = client_for(site.users["pi"]).get(reverse("home")).content.decode()
    for project in (site.projects["pawsey0001"], site.project):
        for pool in (site.cpu, site.gpu):
            gauge = _chart(content, f"gauge-{project.pk}-{pool.pk}")
            indicator = gauge["data"][0]
            assert indicator["type"] == "indicator"
            percent = balance_get(project=project, pool=pool).percent_used
            assert indicator["value"] == pytest.approx(float(percent), abs=0.05)
            assert gauge["layout"]["title"]["text"] == f"{pool.name}: budget period used"
    assert "pawsey0002" not in content  # bob's project


def test_the_dashboard_alerts_at_the_pools_thresholds(site):
    _shrink_budget(site.project, site.cpu, Decimal(92))
    _shrink_budget(site.project, site.gpu, Decimal(120))
    content = client_for(site.users["member"]).get(reverse("home")).content.decode()
    assert "past the 90&nbsp;% alert" in content
    assert "The budget period is used up" in content
    assert 'class="alert level-100"' in content


def test_a_user_in_no_project_is_told_how_to_join_one(site):
    content = client_for(site.users["committee"]).get(reverse("home")).content.decode()
    assert "You are not a member of any project yet." in content
    assert "Review requests" in content  # erin sits on the round's committee


def test_staff_see_every_project_listed_on_their_dashboard(site):
    content = client_for(site.users["staff"]).get(reverse("home")).content.decode()
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        assert code in content


def test_anonymous_visitors_get_the_landing_page_with_a_sign_in_button(site):
    content = client_for(None).get(reverse("home")).content.decode()
    assert reverse("login") in content
    assert "gauge" not in content


def test_the_project_page_draws_a_burn_down_with_budget_and_projection(site):
    url = reverse("allocations:project-detail", args=["pawsey0003"])
    content = client_for(site.users["member"]).get(url).content.decode()
    burn = _chart(content, f"burn-{site.cpu.pk}")
    names = [trace["name"] for trace in burn["data"]]
    assert names[:3] == ["available", "even pace", "used"]
    assert "service units (SU)" in burn["layout"]["yaxis"]["title"]["text"]
    balance = balance_get(project=site.project, pool=site.cpu)
    used = next(trace for trace in burn["data"] if trace["name"] == "used")
    assert used["y"][-1] == pytest.approx(float(balance.used_su), abs=0.01)
    assert all("hovertemplate" in trace for trace in burn["data"])


@pytest.mark.parametrize("step", ["day", "week", "month"])
def test_usage_is_stacked_by_partition_and_by_user_per_step(site, step):
    url = reverse("allocations:project-detail", args=["pawsey0003"])
    client = client_for(site.users["pi"])
    content = client.get(url, {"step": step}).content.decode()
    by_user = _chart(content, "usage-user")
    assert by_user["layout"]["barmode"] == "stack"
    assert {trace["name"] for trace in by_user["data"]} <= {"alice", "bob", "carol", "root"}
    rows = list(
        csv.reader(
            io.StringIO(client.get(url, {"step": step, "csv": "usage-user"}).content.decode())
        )
    )
    assert rows[0][1:] == ["user", "SU"]
    total = sum(Decimal(row[2]) for row in rows[1:])
    charted = sum(sum(trace["y"]) for trace in by_user["data"])
    assert float(total) == pytest.approx(charted, rel=1e-6)


def test_the_project_page_lists_top_jobs_adjustments_members_and_requests(site):
    adjustment_top_up(
        project=site.project, pool=site.cpu, amount=Decimal(500),
        actor=site.users["staff"], reason="campaign deadline",
    )  # fmt: skip
    url = reverse("allocations:project-detail", args=["pawsey0003"])
    content = client_for(site.users["member"]).get(url).content.decode()
    assert "campaign deadline" in content
    assert "carol" in content
    assert "member" in content
    assert reverse("allocations:request-detail", args=[site.request.pk]) in content
    assert reverse("accounting:job-detail", args=[site.job.pk]) in content or "Top jobs" in content
    assert "Apply for SU" not in content  # carol is not the PI


def test_charts_have_titles_axis_units_and_hover_values(site):
    url = reverse("allocations:project-detail", args=["pawsey0003"])
    content = client_for(site.users["pi"]).get(url).content.decode()
    for key in (f"burn-{site.cpu.pk}", "usage-partition", "usage-user"):
        figure = _chart(content, key)
        assert figure["layout"]["title"]["text"]
        assert figure["layout"]["xaxis"]["title"]["text"]
        assert "(SU)" in figure["layout"]["yaxis"]["title"]["text"]
        assert all("SU" in trace["hovertemplate"] for trace in figure["data"])
        assert f"?csv={key}" in content
    assert "cdn.plot.ly" not in content
    assert "/static/vendor/plotly/plotly-finance.min.js" in content
    assert timezone.now()  # the page rendered without a grant-free pool error

"""The pages in a real browser (Chromium via Playwright): sign in through the login form, see
the balance gauge drawn, change the explorer and see Figure 1 redrawn, export the jobs CSV."""

from __future__ import annotations

import csv
import io

import pytest

from accounting.models import Job
from tests.browser.test_accessibility import Audit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_researcher_signs_in_and_sees_the_balance_gauges_drawn(scenario, sign_in):
    page = sign_in("alice")
    assert page.locator("h1").inner_text() == "Your projects"
    gauge = page.locator(
        f"#chart-gauge-{scenario.projects['pawsey0001'].pk}-{scenario.pools['cpu'].pk}"
    )
    gauge.locator("svg.main-svg").first.wait_for()
    assert gauge.locator(".indicatorlayer").count() == 1
    assert "pawsey0002" not in page.content()
    assert page.errors == []


def test_changing_the_speedup_redraws_figure_1_in_place(live_server, scenario, sign_in):
    page = sign_in("carol")
    page.goto(f"{live_server.url}/accounting/cost-ratio/")
    annotation = page.locator("#chart-figure1 .annotation-text", has_text="your application")
    annotation.wait_for()
    assert "8\u00d7" in (annotation.text_content() or "")
    assert "Pick the GPU partition" in page.locator("#recommended").inner_text()
    # It opens on the cluster with the latest jobs, a mini-Setonix: both nodes cost the same at 4.
    page.fill("#id_speedup", "4")
    page.locator("#chart-figure1 .annotation-text", has_text="your application: 4\u00d7").wait_for()
    assert "Either partition" in page.locator("#recommended").inner_text()
    assert "Either partition" in page.locator("#explorer-status").inner_text()
    assert "speedup=4" in page.url  # the address follows, so a reload keeps the settings
    page.fill("#id_speedup", "3")
    page.locator("#chart-figure1 .annotation-text", has_text="your application: 3\u00d7").wait_for()
    assert "Pick the CPU partition" in page.locator("#recommended").inner_text()
    page.fill("#id_applications", "MyCode, 20")
    page.locator("#cost-ratio-table", has_text="MyCode").wait_for()
    assert page.errors == []


def test_an_example_speedup_edited_in_the_browser_recomputes_its_row(
    live_server, scenario, sign_in, axe_script
):
    page = sign_in("carol")
    page.goto(f"{live_server.url}/accounting/cost-ratio/")
    page.locator("#examples summary").click()
    assert "2 x Intel Xeon Gold 6240" in page.locator("#examples tbody tr").first.inner_text()
    page.fill("#id_example_0", "20")  # FUN3D: 20 CPU nodes per GPU node instead of 41
    row = page.locator("#cost-ratio-table tbody tr", has_text="edited")
    row.wait_for()
    assert row.locator("td").nth(1).inner_text() == "20"
    audit = Audit(str(axe_script))
    audit.page(page, "the explorer with its examples open and one edited")
    assert audit.problems == []
    page.fill("#id_example_0", "0")
    page.locator("#explorer-results .errorlist").wait_for()
    status = page.locator("#explorer-status").inner_text()
    assert "Speedup of FUN3D must be more than 0 and at most 100,000." in status
    assert page.errors == []


def test_the_jobs_table_exports_the_filtered_selection_as_csv(live_server, scenario, sign_in):
    page = sign_in("alice")
    page.goto(f"{live_server.url}/accounting/projects/pawsey0001/jobs/")
    page.select_option("#id_user", "alice")
    page.click("form[aria-label='Filter jobs'] button[type=submit]")
    page.wait_for_url("**user=alice**")
    with page.expect_download() as download_info:
        page.click("text=Export CSV")
    download = download_info.value
    assert download.suggested_filename == "pawsey0001-jobs.csv"
    with open(download.path(), encoding="utf-8") as handle:
        rows = list(csv.DictReader(io.StringIO(handle.read())))
    expected = Job.objects.filter(project=scenario.projects["pawsey0001"], username="alice")
    assert len(rows) == expected.count() > 0
    assert {row["user"] for row in rows} == {"alice"}
    assert page.errors == []


def test_staff_see_utilisation_overhead_costs_and_priorities_drawn(live_server, scenario, sign_in):
    from datetime import timedelta

    from django.utils import timezone

    from accounting.costs.services import cost_model_version_create
    from accounting.utilisation.overhead import overhead_run_compute
    from allocations.priorities.services import priority_policy_set, profiling_coefficient_post
    from tests.browser.conftest import ROOT

    cluster, staff = scenario.cluster, scenario.users["staff"]
    model = (ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text()
    cost_model_version_create(cluster=cluster, name="demo", text=model)  # prices the jobs
    today = timezone.localtime(timezone.now(), cluster.zoneinfo).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    run = overhead_run_compute(
        cluster=cluster, start=today - timedelta(days=3), end=today, step="hour"
    )
    priority_policy_set(
        cluster=cluster, base_priority=1000, k1="0.4", k2="0.7", c0="0.5", c1="1", c2="3",
        updated_by=staff,
    )  # fmt: skip
    profiling_coefficient_post(
        cluster=cluster, project=scenario.projects["pawsey0001"], k_prof="0.9", posted_by=staff
    )
    page = sign_in("staff")

    page.goto(f"{live_server.url}/accounting/utilisation/?cluster={cluster.name}&step=day")
    for chart in ("#chart-quality", "#chart-classical"):
        page.locator(f"{chart} svg.main-svg").first.wait_for()
    # one line per partition and the cluster total
    partitions = cluster.partitions.count()
    assert page.locator("#chart-quality .scatterlayer .trace").count() == partitions + 1

    page.goto(f"{live_server.url}/accounting/costs/?cluster={cluster.name}")
    for chart in ("#chart-quantiles-cost", "#chart-cost-share"):
        page.locator(f"{chart} svg.main-svg").first.wait_for()
    assert "most expensive 1" in page.locator("#concentration-sentence").inner_text()

    page.goto(f"{live_server.url}/accounting/overhead/?cluster={cluster.name}&run={run.pk}")
    page.locator("[id^=chart-series-] svg.main-svg").first.wait_for()
    page.locator("[id^=chart-histogram-] svg.main-svg").first.wait_for()

    page.goto(f"{live_server.url}/allocations/priorities/?cluster={cluster.name}")
    page.locator("#chart-priority svg.main-svg").first.wait_for()
    assert "pawsey0001" in page.locator("main").inner_text()
    assert page.errors == []

"""The pages in a real browser (Chromium via Playwright): sign in through the login form, see
the balance gauge drawn, change the explorer and see Figure 1 redrawn, export the jobs CSV."""

from __future__ import annotations

import csv
import io

import pytest

from accounting.models import Job

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
    page.fill("#id_speedup", "4")
    page.locator("#chart-figure1 .annotation-text", has_text="your application: 4\u00d7").wait_for()
    assert "Pick the CPU partition" in page.locator("#recommended").inner_text()
    assert "speedup=4" in page.url  # the address follows, so a reload keeps the settings
    page.fill("#id_applications", "MyCode, 20")
    page.locator("#cost-ratio-table", has_text="MyCode").wait_for()
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

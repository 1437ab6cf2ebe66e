"""The efficiency pages: a job's efficiency, a project's efficiency page and the staff page of
the users who leave the most SU on the table."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from accounting.ledger.usage import USAGE_COLUMNS
from accounting.models import Job
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def _job_page(site, job):
    return client_for(site.users["member"]).get(reverse("accounting:job-detail", args=[job.pk]))


def _wasteful_job(site) -> Job:
    job = (
        Job.objects.filter(
            project=site.project, charge_state=Job.ChargeState.CHARGED, partition__name="work",
            right_sized_service_units__isnull=False, cpus__gte=4, nnodes=1,
        )
        .order_by("-service_units")
        .first()
    )  # fmt: skip
    assert job is not None, "the generated history has measured jobs"
    return job


def test_a_measured_job_shows_its_efficiency_and_what_a_right_sized_request_costs(site):
    job = _wasteful_job(site)
    # A quarter of its cores busy, a tenth of its memory: right-sizing halves what it holds.
    Job.objects.filter(pk=job.pk).update(
        cpu_seconds_used=Decimal(job.elapsed_seconds * job.cpus) / 4,
        memory_peak_mb=job.memory_mb / 10, gpu_utilisation=None,
    )  # fmt: skip
    page = _job_page(site, job)
    efficiency = page.context["efficiency"]
    assert efficiency is not None
    assert efficiency.ratios.cpu == Decimal("0.2500")
    assert efficiency.ratios.memory == Decimal("0.1000")
    assert efficiency.left_on_the_table == job.service_units - job.right_sized_service_units
    assert any("--cpus-per-task" in line for line in efficiency.advice)
    content = page.content.decode()
    assert 'id="efficiency"' in content
    assert "25.0&nbsp;%" in content
    assert "no GPUs" in content
    assert "Left on the table" in content
    # The advice's options never break on a phone: "(--" / "ntasks-per-node" (screenshots).
    assert '<span class="nowrap">(--ntasks-per-node</span>' in content
    assert page.context["cheaper"] is None  # measured right-sizing replaces the guess


def test_a_job_without_usage_data_says_so(site):
    job = site.job
    Job.objects.filter(pk=job.pk).update(
        **dict.fromkeys(USAGE_COLUMNS), right_sized_service_units=None
    )
    page = _job_page(site, job)
    assert page.context["efficiency"] is None
    assert 'id="no-usage"' in page.content.decode()


def _project_page(site, query=""):
    url = reverse("accounting:project-efficiency", args=["pawsey0003"])
    return client_for(site.users["pi"]).get(url + query)


def test_the_project_page_shows_the_periods_totals_charts_and_tables(site):
    page = _project_page(site, "?start=2000-01-01")
    assert page.status_code == 200
    summary = page.context["summary"]
    assert summary.measured_jobs > 0
    assert summary.jobs == summary.measured_jobs + summary.unmeasured_jobs
    assert [chart.key for chart in page.context["charts"]] == ["months", "distributions"]
    users = page.context["users"]
    assert sum(row.totals.jobs for row in users) == summary.jobs
    left = [row.totals.su_left_on_the_table for row in users]
    assert left == sorted(left, reverse=True)
    content = page.content.decode()
    assert 'id="by-user"' in content
    assert 'id="by-partition"' in content


def test_the_project_page_never_reads_the_jobs(site):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert _project_page(site, "?start=2000-01-01").status_code == 200
    assert not any("accounting_job" in query["sql"] for query in queries)


def test_the_project_tables_download_as_csv(site):
    response = _project_page(site, "?start=2000-01-01&csv=users")
    assert response["Content-Type"].startswith("text/csv")
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("user,jobs,charged_service_units,measured_jobs,unmeasured_jobs")
    assert len(lines) == 1 + len(_project_page(site, "?start=2000-01-01").context["users"])
    chart_csv = _project_page(site, "?start=2000-01-01&csv=distributions").content.decode()
    assert chart_csv.splitlines()[0] == ("efficiency,CPU jobs,memory jobs,GPU jobs,walltime jobs")


def test_a_period_that_ends_before_it_starts_is_explained(site):
    page = _project_page(site, "?start=2026-02-01&end=2026-01-01")
    assert "must not be after" in page.content.decode()


def test_staff_see_the_users_who_leave_the_most_su_on_the_table(site):
    url = reverse("accounting:efficiency-top") + "?start=2000-01-01"
    page = client_for(site.users["staff"]).get(url)
    top = page.context["top"]
    assert 0 < len(top) <= 20
    left = [user.totals.su_left_on_the_table for user in top]
    assert left == sorted(left, reverse=True)
    assert "/accounting/projects/" in page.content.decode()
    # With fewer users than the limit the page does not promise "the 20 users".
    assert len(top) < 20
    assert "The users (at most 20) whose jobs" in page.content.decode()


def test_the_staff_page_opens_on_the_last_full_month():
    from datetime import date

    from accounting.ledger.efficiency_pages import last_full_month

    assert last_full_month(date(2026, 3, 15)) == (date(2026, 2, 1), date(2026, 2, 28))
    assert last_full_month(date(2026, 1, 1)) == (date(2025, 12, 1), date(2025, 12, 31))

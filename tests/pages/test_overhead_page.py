"""The staff page of true overhead: staff only, a compute button that enqueues (and redirects),
per-partition charts of a done run with their CSV, and the fair share on the job page."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import plotly.graph_objects as go
import pytest
from django.urls import reverse

from accounting.models import OverheadRun
from accounting.utilisation.overhead import overhead_run_compute
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db

URL = "/accounting/overhead/"
FIGURES = re.compile(r'<script type="application/json" id="chart-([\w-]+)-data">(.*?)</script>')


def done_run(site) -> OverheadRun:
    job = site.job
    start = job.start.replace(hour=0, minute=0, second=0, microsecond=0)
    end = max(job.end, start + timedelta(days=1))
    end = end.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    run = overhead_run_compute(cluster=site.cluster, start=start, end=end, step="hour")
    assert run.status == OverheadRun.Status.DONE, run.error
    return run


def test_the_url_is_the_named_one():
    assert reverse("accounting:overhead") == URL


@pytest.mark.parametrize("role", ["member", "pi", "committee", "other"])
def test_only_staff_see_the_page(site, role):
    assert client_for(site.users[role]).get(URL).status_code == 404


def test_anonymous_visitors_are_sent_to_sign_in(site):
    response = client_for(None).get(URL)
    assert response.status_code == 302
    assert "/login" in response["Location"]


def test_staff_see_the_form_with_the_last_seven_days_and_a_nav_link(site):
    response = client_for(site.users["staff"]).get(URL)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'type="date"' in page
    assert "No computation yet." in page
    assert f'href="{URL}"' in page  # the staff navigation
    form = response.context["form"]
    assert (form.initial["end"] - form.initial["start"]).days == 6


def test_computing_enqueues_a_run_and_redirects(site, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_for(site.users["staff"]).post(
            URL,
            {"cluster": site.cluster.pk, "start": "2026-03-01", "end": "2026-03-07", "step": "day"},
        )
    run = OverheadRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"{URL}?run={run.pk}"
    assert len(callbacks) == 1  # the task, sent after the commit
    assert run.status == OverheadRun.Status.RUNNING
    assert run.started_by == site.users["staff"]
    assert (run.window_end - run.window_start).days == 7  # the last day is included
    page = client_for(site.users["staff"]).get(response["Location"]).content.decode()
    assert "running" in page
    assert 'http-equiv="refresh"' in page


def test_a_window_that_ends_before_it_starts_is_refused(site):
    response = client_for(site.users["staff"]).post(
        URL,
        {"cluster": site.cluster.pk, "start": "2026-03-07", "end": "2026-03-01", "step": "hour"},
    )
    assert response.status_code == 200
    assert "must end after it starts" in response.content.decode()
    assert not OverheadRun.objects.exists()


def test_a_done_run_shows_each_partitions_series_and_histogram(site):
    run = done_run(site)
    response = client_for(site.users["staff"]).get(f"{URL}?run={run.pk}")
    page = response.content.decode()
    figures = dict(FIGURES.findall(page))
    for name in site.cluster.partitions.values_list("name", flat=True):
        for key in (f"series-{name}", f"histogram-{name}"):
            figure = go.Figure(json.loads(figures[key]))  # valid plotly
            assert figure.layout.title.text
            assert figure.layout.xaxis.title.text
            assert figure.layout.yaxis.title.text
            assert all(trace.hovertemplate for trace in figure.data)
    assert "1 core + 2 GiB" in page  # the CPU partition's default unit
    assert "1 GPU" in page
    assert "Fair-billing rates" in page
    assert "vendor/plotly/plotly-finance.min.js" in page
    assert "cdn.plot.ly" not in page


def test_the_series_downloads_as_csv(site):
    run = done_run(site)
    response = client_for(site.users["staff"]).get(f"{URL}?run={run.pk}&csv=series-work")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["bucket start", "bucket end", "mean idle slices", "slice-hours"]
    assert len(rows) == 1 + (run.window_end - run.window_start) // timedelta(hours=1)


def test_a_failed_run_shows_its_error(site):
    run = OverheadRun.objects.create(
        cluster=site.cluster, window_start=site.job.start, window_end=site.job.end
        or site.job.start + timedelta(hours=1), status="failed", error="KaboomError: no",
    )  # fmt: skip
    page = client_for(site.users["staff"]).get(f"{URL}?run={run.pk}").content.decode()
    assert "KaboomError: no" in page


def test_the_job_page_shows_the_fair_share_beside_the_su_once_a_run_covers_it(site):
    url = reverse("accounting:job-detail", args=[site.job.pk])
    member = client_for(site.users["member"])
    assert "Fair share of the nodes it shared" not in member.get(url).content.decode()
    run = done_run(site)
    page = member.get(url).content.decode()
    assert "Fair share of the nodes it shared" in page
    assert "core-hours" in page
    assert "GiB-hours" in page
    assert f"From true-overhead run {run.pk} (" in page

"""Every figure the pages draw is a valid plotly figure (checked against plotly's schema here,
so the pages need not pay for the check on every request), with a title, axis titles and
hover text, and never needs a CDN."""

from __future__ import annotations

import json
import re
from datetime import date

import plotly.graph_objects as go
import pytest
from django.urls import reverse

from allocations.grants.charts import usage_stacked
from tests.pages.conftest import PROJECT, client_for

pytestmark = pytest.mark.django_db

FIGURES = re.compile(r'<script type="application/json" id="chart-([\w-]+)-data">(.*?)</script>')


def _pages(site) -> list[tuple[str, str]]:
    work = site.cluster.partitions.get(name="work")
    return [
        ("pi", reverse("home")),
        ("pi", reverse("allocations:project-detail", args=[PROJECT]) + "?step=day"),
        ("pi", reverse("accounting:job-detail", args=[site.job.pk])),
        ("pi", reverse("accounting:project-energy", args=[PROJECT])),
        ("pi", reverse("accounting:project-efficiency", args=[PROJECT]) + "?start=2000-01-01"),
        ("pi", reverse("accounting:quote") + f"?partition={work.pk}&nodes=1&hours=1"),
        ("pi", reverse("accounting:cost-ratio")),
        ("chair", reverse("allocations:round-detail", args=[site.round.pk])),
    ]


def test_every_figure_is_valid_plotly_with_title_axes_and_hover(site):
    seen = 0
    for role, url in _pages(site):
        content = client_for(site.users[role]).get(url).content.decode()
        assert "cdn.plot.ly" not in content
        for key, text in FIGURES.findall(content):
            figure = go.Figure(json.loads(text))  # raises on any property plotly does not know
            seen += 1
            assert figure.layout.title.text, key
            if key.startswith("gauge-"):
                assert figure.data[0].gauge.axis.ticksuffix == " %"
                continue
            assert figure.layout.xaxis.title.text, key
            assert figure.layout.yaxis.title.text or key in {"fractions", "partitions"}, key
            assert all(trace.hovertemplate for trace in figure.data), key
    assert seen >= 10


def test_a_usage_chart_without_jobs_spans_its_window_not_the_year_2000():
    """A project with no charged jobs in the window (an archived one, a new one) drew its
    empty usage chart over plotly's default dates, 2000-01-01 to 2001: it spans the window."""
    chart = usage_stacked(
        key="usage-partition", title="SU per week by partition", points=[], step="week",
        group_label="partition", window=(date(2026, 5, 25), date(2026, 11, 28)),
    )  # fmt: skip
    xaxis = json.loads(chart.figure_json)["layout"]["xaxis"]
    assert xaxis["range"] == ["2026-05-25", "2026-11-28"]

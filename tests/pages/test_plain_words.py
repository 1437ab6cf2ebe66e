"""Researchers read results in plain words and grouped numbers (issue 16, item 8): equation
numbers, the papers and repository paths wait in a "How is this computed?" fold; SU, Wh and
MiB carry thousands separators; and chart data tables group their numbers too."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from accounting.models import Job, Partition
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db

JARGON = re.compile(
    r"(?<![-\w])eqs?\.? ?\d|equation \d|docs/\w|report's rule|the paper|Section V", re.I
)
FOLD = re.compile(r'<details class="how">.*?</details>', re.S)
TAGS = re.compile(r"<script.*?</script>|<[^>]+>", re.S)
UNGROUPED = re.compile(r"(?<![\d.,:/-])\d{5,}(?:\.\d+)?\s*(?:SU|Wh|MiB)\b")


def _text(html: str) -> str:
    """What a reader sees without opening the folds."""
    return TAGS.sub(" ", FOLD.sub(" ", html))


def _researcher_pages(site) -> dict[str, str]:
    job = Job.objects.filter(project=site.project, charge_state="charged").order_by("pk").first()
    assert job is not None
    partition = Partition.objects.get(cluster=job.partition.cluster, name="gpu")
    return {
        "dashboard": "/",
        "project": reverse("allocations:project-detail", args=[site.project.code]),
        "jobs": reverse("accounting:project-jobs", args=[site.project.code]),
        "job": reverse("accounting:job-detail", args=[job.pk]),
        "partitions": reverse("accounting:partition-list"),
        "quote": reverse("accounting:quote") + f"?partition={partition.pk}&nodes=1&hours=3",
        "explorer": reverse("accounting:cost-ratio"),
    }


def test_researcher_pages_keep_equations_and_sources_in_the_fold(site):
    client = client_for(site.users["member"])
    for name, url in _researcher_pages(site).items():
        html = client.get(url).content.decode()
        assert JARGON.findall(_text(html)) == [], name
    job_page = client.get(_researcher_pages(site)["job"]).content.decode()
    fold = FOLD.search(job_page)
    assert fold is not None
    assert "equation 15" in fold.group()


def test_su_energy_and_memory_are_grouped_by_thousands(site):
    client = client_for(site.users["member"])
    for name, url in _researcher_pages(site).items():
        text = _text(client.get(url).content.decode())
        assert UNGROUPED.findall(text) == [], name


def test_a_chart_data_table_groups_and_right_aligns_its_numbers():
    from decimal import Decimal

    from kit.charts import Chart

    chart = Chart(
        key="k", title="t", figure_json="{}", columns=("day", "SU"),
        rows=[("2026-11-01", 31185.78), ("2026-11-02", Decimal("136437.800"))],
    )  # fmt: skip
    html = str(chart.table_html)
    assert '<td class="num">31,185.78</td>' in html
    assert '<td class="num">136,437.800</td>' in html
    assert "<td>2026-11-01</td>" in html

"""The staff page of utilisation Q(T): who sees it, its charts, the peak sources box, the
buckets table, the CSV download (the API's) and a bounded number of queries."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import plotly.graph_objects as go
import pytest
from django.urls import reverse
from django.utils import timezone

from accounting.utilisation.quality import ROW_FIELDS
from tests.pages.conftest import ROLES, client_for

pytestmark = pytest.mark.django_db

URL = reverse("accounting:utilisation")
FIGURES = re.compile(r'<script type="application/json" id="chart-([\w-]+)-data">(.*?)</script>')
CSV_LINK = re.compile(r'href="(/api/v1/utilisation/\?[^"]+)" download')


def _window(days: int = 10, step: str = "day") -> str:
    today = timezone.now().date()
    return f"?cluster=slurm-testbed&start={today - timedelta(days=days)}&end={today}&step={step}"


@pytest.mark.parametrize(
    ("role", "status"), list(zip(ROLES, (302, 404, 404, 404, 404, 200), strict=True))
)
def test_only_staff_see_the_page(site, role, status):
    response = client_for(site.users[role]).get(URL + _window())
    assert response.status_code == status
    if status == 302:
        assert "login" in response["Location"]


def test_staff_see_q_per_partition_and_the_total_beside_core_and_gpu_hours(site):
    response = client_for(site.users["staff"]).get(URL + _window())
    assert response.status_code == 200
    content = response.content.decode()
    figures = {key: go.Figure(json.loads(text)) for key, text in FIGURES.findall(content)}
    assert set(figures) == {"quality", "classical"}
    names = [trace.name for trace in figures["quality"].data]
    assert names == ["gpu", "work", "cluster total"]
    assert [trace.name for trace in figures["classical"].data] == [
        "Q(T), peak FLOP", "core-hours", "GPU-hours",
    ]  # fmt: skip
    for figure in figures.values():
        assert figure.layout.title.text
        assert figure.layout.xaxis.title.text
        assert figure.layout.yaxis.title.text
        assert all(trace.hovertemplate for trace in figure.data)
        assert len(figure.data[0].x) == 11  # ten days back to today, by day
    total = [value for value in figures["quality"].data[2].y if value]
    assert total, "the generated jobs give some utilisation"
    assert "cdn.plot.ly" not in content


def test_the_page_says_where_each_peak_comes_from(site):
    content = client_for(site.users["staff"]).get(URL + _window()).content.decode()
    box = content[content.index('id="peak-sources"') :]
    assert "formula from parameters" in box  # the testbed's CPUs (eq 3)
    assert "vendor peak FLOP/s" in box  # its GPUs: 23.95e12 each
    assert "20.1 TFLOP/s" in box  # work: 4 nodes * 2 sockets * 2.5088e12
    assert "no change" in box


def test_a_node_count_change_in_the_window_is_listed(site):
    from accounting.models import Partition

    work = Partition.objects.get(cluster=site.cluster, name="work")
    version = work.versions.order_by("-effective_from").first()
    assert version is not None
    version.pk = None
    version.number += 1
    version.node_count = 8
    version.effective_from = timezone.now().replace(minute=0, second=0, microsecond=0) - (
        timedelta(days=3)
    )
    version.save()
    content = client_for(site.users["staff"]).get(URL + _window()).content.decode()
    box = content[content.index('id="peak-sources"') :]
    assert "8 nodes" in box
    assert "4 nodes" in box


def test_the_csv_link_downloads_the_same_window(site):
    client = client_for(site.users["staff"])
    content = client.get(URL + _window(days=2, step="hour")).content.decode()
    link = CSV_LINK.search(content)
    assert link is not None
    response = client.get(link.group(1).replace("&amp;", "&"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert tuple(rows[0]) == ROW_FIELDS
    assert {row[2] for row in rows[1:]} == {"gpu", "work", "total"}
    assert len(rows) - 1 == 3 * 72  # two days back to the end of today, by the hour


def test_one_partition_alone(site):
    content = (
        client_for(site.users["staff"]).get(URL + _window() + "&partition=gpu").content.decode()
    )
    figures = dict(FIGURES.findall(content))
    names = [trace["name"] for trace in json.loads(figures["quality"])["data"]]
    assert names == ["gpu"]
    assert "Q gpu" in content


def test_long_series_are_paged_in_the_table(site):
    content = client_for(site.users["staff"]).get(URL + _window(step="hour")).content.decode()
    table = content[content.index('id="buckets"') :]
    assert table.count("<tr>") == 1 + 100  # header and one page
    assert "page 1 of 3" in content


def test_bad_windows_are_shown_on_the_form(site):
    today = timezone.now().date()
    query = f"?cluster=slurm-testbed&start={today}&end={today - timedelta(days=3)}"
    response = client_for(site.users["staff"]).get(URL + query)
    assert response.status_code == 200
    assert "the window must end after it starts" in response.content.decode()
    assert not FIGURES.findall(response.content.decode())


def test_a_partition_without_peak_figures_says_what_is_missing(site):
    from accounting.models import Partition

    gpu = Partition.objects.get(cluster=site.cluster, name="gpu")
    gpu.versions.update(gpu_peak_flops=None, gpu_peak_n_cuda=None)
    response = client_for(site.users["staff"]).get(URL + _window())
    assert response.status_code == 200
    content = response.content.decode()
    assert "Q(T) cannot be computed" in content
    assert "no GPU peak" in content
    assert not FIGURES.findall(content)


def test_staff_find_the_page_in_the_menu(site):
    assert URL in client_for(site.users["staff"]).get(reverse("home")).content.decode()
    assert URL not in client_for(site.users["pi"]).get(reverse("home")).content.decode()


@pytest.mark.parametrize("step", ["hour", "day", "month"])
def test_the_page_reads_a_bounded_number_of_queries(site, step, django_assert_max_num_queries):
    client = client_for(site.users["staff"])
    with django_assert_max_num_queries(9):
        assert client.get(URL + _window(days=20, step=step)).status_code == 200

"""Utilisation never plots an impossible value silently: a window over 100 % is flagged as
inconsistent job data, with its widest jobs, and marked on both charts (issue 16, item 1)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from accounting.models import Job, Partition, UtilisationHourly
from accounting.utilisation.quality import Utilisation
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db

FIGURES = re.compile(r'<script type="application/json" id="chart-([\w-]+)-data">(.*?)</script>')


def test_a_window_holding_more_than_its_capacity_is_overcommitted():
    assert Utilisation(core_seconds=101, available_core_seconds=100).overcommitted
    assert Utilisation(gpu_seconds=2, available_gpu_seconds=1).overcommitted
    assert Utilisation(used_flop=3, capacity_flop=2).overcommitted
    assert not Utilisation(core_seconds=100, available_core_seconds=100).overcommitted
    assert not Utilisation().overcommitted


def test_an_hour_over_100_percent_is_flagged_with_its_jobs_and_marked_on_the_charts(site):
    work = Partition.objects.get(cluster=site.cluster, name="work")
    hour = (timezone.now() - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    job = Job.objects.filter(cluster=site.cluster, partition=work).order_by("-cpus").first()
    Job.objects.filter(pk=job.pk).update(
        start=hour - timedelta(minutes=5), end=hour + timedelta(minutes=50)
    )
    # Twice the cores the partition has, all hour long: what over-committed sacct data gives.
    UtilisationHourly.objects.update_or_create(
        partition=work, hour_start=hour, defaults={"core_seconds": 10**9, "gpu_seconds": 0}
    )
    day = hour.date()
    page = client_for(site.users["staff"]).get(
        f"/accounting/utilisation/?cluster={site.cluster.name}&start={day - timedelta(days=1)}"
        f"&end={day + timedelta(days=1)}&step=hour&partition=work"
    )
    content = page.content.decode()
    assert 'id="inconsistent"' in content
    assert "over 100 %: the job data is inconsistent" in content
    assert f"/accounting/jobs/{job.pk}/" in content  # which jobs
    figures = {key: json.loads(text) for key, text in FIGURES.findall(content)}
    for figure in figures.values():
        names = [trace.get("name") for trace in figure["data"]]
        assert "over 100 %: inconsistent job data" in names


def test_consistent_data_raises_no_flag(site):
    page = client_for(site.users["staff"]).get(
        f"/accounting/utilisation/?cluster={site.cluster.name}&step=day"
    )
    assert 'id="inconsistent"' not in page.content.decode()

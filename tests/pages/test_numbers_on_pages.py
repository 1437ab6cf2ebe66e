"""Real pages and mails write numbers as people read them (kit/numbers.py): separators on
counts, hours without four decimals, durations in days, masses in kg, plurals, and a period
by its last day."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.urls import reverse

from accounting.models import Cluster, ImportRun, Job
from allocations.models import Allocation
from allocations.rounds.notifications import notify_decision
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def test_a_job_page_shows_hours_and_elapsed_time_as_people_read_them(site):
    Job.objects.filter(pk=site.job.pk).update(
        elapsed_seconds=172_800,
        consumed_energy_joules=464_486_400,  # 129,024 Wh
    )
    Cluster.objects.filter(pk=site.cluster.pk).update(grid_intensity_g_per_kwh=Decimal(450))
    text = (
        client_for(site.users["member"])
        .get(reverse("accounting:job-detail", args=[site.job.pk]))
        .content.decode()
    )
    assert '<div class="value">48</div><div class="note">2 days elapsed</div>' in text
    assert "48.0000" not in text
    assert "172800 s" not in text
    assert "58.1 kg CO<sub>2</sub>e" in text  # 58,060.8 g


def test_an_import_page_groups_its_counts(site):
    run = ImportRun.objects.filter(cluster=site.cluster).order_by("pk").first()
    assert run is not None
    ImportRun.objects.filter(pk=run.pk).update(lines=60000, charged=45718, pending=14280)
    staff = client_for(site.users["staff"])
    detail = staff.get(reverse("accounting:import-detail", args=[run.pk])).content.decode()
    for figure in ("60,000", "45,718", "14,280"):
        assert f'<div class="value">{figure}</div>' in detail
    listing = staff.get(reverse("accounting:import-list")).content.decode()
    assert '<td class="num">60,000</td>' in listing


def test_the_project_page_shows_each_grant_by_its_last_day_in_a_date_that_never_wraps(site):
    grant = Allocation.objects.filter(project=site.project).order_by("period_end").first()
    assert grant is not None
    text = (
        client_for(site.users["pi"])
        .get(reverse("allocations:project-detail", args=[site.project.code]))
        .content.decode()
    )
    last_day = f"{grant.period_end - timedelta(days=1):%Y-%m-%d}"  # the stored end is exclusive
    assert f'<time class="date" datetime="{last_day}">{last_day}</time>' in text
    assert "(the day after its last day)" not in text


def test_a_decision_mail_groups_the_su_granted(site, django_capture_on_commit_callbacks):
    request = site.request
    amount = request.amounts.first()
    amount.granted_su = Decimal("80000")
    amount.save(update_fields=["granted_su"])
    request.state = request.State.GRANTED
    request.save(update_fields=["state"])
    with django_capture_on_commit_callbacks(execute=True):
        notify_decision(request)
    assert any("Granted: 80,000 SU on" in message.body for message in mail.outbox)

"""The PI's monthly efficiency summary: what it says, to whom, once per month, and opting out."""

from __future__ import annotations

from datetime import date

import pytest
from django.db.models import Max, Sum
from django.test import Client

from accounting.ledger.pipeline import jobs_import
from accounting.models import EfficiencyDaily, UsageDaily
from allocations.grants.efficiency_mail import efficiency_summaries_send, month_before
from allocations.models import EfficiencySummaryNotice
from allocations.tasks import efficiency_summaries_task
from benchmarks.sacct_generator import sacct_lines
from people.mail import mail_settings_get

pytestmark = pytest.mark.django_db


@pytest.fixture
def month(centre):
    """Generated jobs with what they used, in the testbed's projects; the month of pawsey0003's
    last job."""
    jobs_import(
        cluster=centre.cluster, lines=sacct_lines(lines=900, seed=5, usage=True), source="gen"
    )
    last = UsageDaily.objects.filter(project=centre.p3).aggregate(last=Max("day"))["last"]
    assert last is not None
    return last.replace(day=1)


def _send(month, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return efficiency_summaries_send(month=month)


def test_each_pi_gets_one_mail_with_their_projects_figures(
    centre, month, mailoutbox, django_capture_on_commit_callbacks
):
    sent = _send(month, django_capture_on_commit_callbacks)
    mails = {mail.to[0]: mail for mail in mailoutbox}
    assert sent == len(mailoutbox) >= 1
    assert "carol@example.org" not in mails  # a member, not a PI
    alice = mails["alice@example.org"]
    assert alice.subject == f"[SU portal] Efficiency of your projects in {month:%Y-%m}"
    body = alice.body
    assert "pawsey0003" in body
    assert "pawsey0002" not in body  # bob's
    next_month = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    days = {"project": centre.p3, "day__gte": month, "day__lt": next_month}
    measured = EfficiencyDaily.objects.filter(**days).aggregate(
        su=Sum("service_units"), right=Sum("right_sized_service_units")
    )
    charged = UsageDaily.objects.filter(**days).aggregate(su=Sum("service_units"))["su"]
    assert f"SU charged: {charged:,.2f}" in body
    assert f"SU left on the table: {measured['su'] - measured['right']:,.2f}" in body
    assert "CPU efficiency: " in body
    assert "/accounting/projects/pawsey0003/efficiency/?start=" in body
    assert "/account/notifications/" in body  # where to turn it off


def test_a_second_run_of_the_month_mails_no_one(
    centre, month, mailoutbox, django_capture_on_commit_callbacks
):
    first = _send(month, django_capture_on_commit_callbacks)
    mailoutbox.clear()
    assert _send(month, django_capture_on_commit_callbacks) == 0
    assert mailoutbox == []
    assert EfficiencySummaryNotice.objects.filter(month=month).count() == first


def test_a_pi_who_turned_it_off_gets_none(
    centre, month, mailoutbox, django_capture_on_commit_callbacks
):
    settings_row = mail_settings_get(user=centre.alice)
    settings_row.efficiency_summary = False
    settings_row.save()
    _send(month, django_capture_on_commit_callbacks)
    assert all(mail.to != ["alice@example.org"] for mail in mailoutbox)


def test_the_opt_out_is_on_the_notifications_page(centre):
    client = Client()
    client.force_login(centre.alice)
    assert 'name="efficiency_summary"' in client.get("/account/notifications/").content.decode()
    client.post("/account/notifications/", {"allocation_events": "on"})
    assert mail_settings_get(user=centre.alice).efficiency_summary is False


def test_a_month_without_jobs_mails_no_one(centre, mailoutbox, django_capture_on_commit_callbacks):
    assert _send(date(2020, 1, 1), django_capture_on_commit_callbacks) == 0
    assert mailoutbox == []


def test_the_task_summarises_the_month_it_is_given_or_last_month(centre, month):
    assert efficiency_summaries_task(month.isoformat())["month"] == month.isoformat()
    assert month_before(date(2026, 1, 1)) == date(2025, 12, 1)
    assert month_before(date(2026, 3, 31)) == date(2026, 2, 1)

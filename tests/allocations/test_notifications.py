"""Mail about the allocation process: to whom, what it says, the link, and opting out."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from allocations.rounds.services import (
    request_create,
    request_decide,
    request_review_start,
    request_submit,
    round_create,
)
from people.mail import MailKind, mail_recipients, mail_settings_get
from tests.allocations.conftest import PERIOD, open_round_times

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(centre, django_capture_on_commit_callbacks):
    opens, closes = open_round_times()
    round_ = round_create(
        name="2027 merit round", opens_at=opens, closes_at=closes,
        period_start=PERIOD[0], period_end=PERIOD[1],
        available={centre.cpu: Decimal(10), centre.gpu: Decimal(10)},
        chair=centre.chair, committee=[centre.reviewer, centre.alice], actor=centre.staff,
    )  # fmt: skip
    request = request_create(
        round_=round_, project=centre.p3, actor=centre.alice, amounts={centre.cpu: Decimal(4)}
    )
    with django_capture_on_commit_callbacks(execute=True):
        request_submit(request=request, actor=centre.alice)
    return request


def test_a_submitted_request_is_mailed_to_the_chair_with_a_link(submitted, mailoutbox):
    (message,) = mailoutbox
    assert message.to == ["chair@example.org"]
    assert message.subject == "[SU portal] pawsey0003's request to 2027 merit round was submitted"
    assert f"http://127.0.0.1:8000/allocations/requests/{submitted.pk}/" in message.body
    assert "/account/notifications/" in message.body


def test_review_is_asked_of_the_committee_but_never_of_the_projects_own_people(
    centre, submitted, mailoutbox, django_capture_on_commit_callbacks
):
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        request_review_start(request=submitted, actor=centre.chair)
    (message,) = mailoutbox
    # the chair reviews too; alice sits on the committee but leads pawsey0003
    assert message.to == ["chair@example.org", "reviewer@example.org"]
    assert message.subject.startswith("[SU portal] Please review pawsey0003's request")


def test_the_decision_goes_to_the_pi_and_members_with_what_was_granted_and_why(
    centre, submitted, mailoutbox, django_capture_on_commit_callbacks
):
    request_review_start(request=submitted, actor=centre.chair)
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        request_decide(
            request=submitted, actor=centre.chair, granted={centre.cpu: Decimal(3)},
            reason="the round is oversubscribed",
        )  # fmt: skip
    # The PI (who may read the decision letter) gets it attached; the member the same mail
    # without it.
    to_pi, to_member = mailoutbox
    assert (to_pi.to, to_member.to) == (["alice@example.org"], ["carol@example.org"])
    for message in mailoutbox:
        assert message.subject.endswith(": partially granted")
        assert "Granted: 3 SU on testbed CPU." in message.body
        assert "The chair's reason: the round is oversubscribed" in message.body
    assert [name for name, _, _ in to_pi.attachments] == [f"decision-pawsey0003-{submitted.pk}.pdf"]
    assert to_member.attachments == []


def test_a_person_who_turned_allocation_mail_off_gets_none(
    centre, submitted, mailoutbox, django_capture_on_commit_callbacks
):
    settings_row = mail_settings_get(user=centre.reviewer)
    settings_row.allocation_events = False
    settings_row.save()
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        request_review_start(request=submitted, actor=centre.chair)
    (message,) = mailoutbox
    assert message.to == ["chair@example.org"]


def test_a_change_that_rolls_back_mails_no_one(centre, submitted, mailoutbox):
    mailoutbox.clear()
    with pytest.raises(RuntimeError):  # noqa: PT012 (the rollback is the point)
        from django.db import transaction

        with transaction.atomic():
            request_review_start(request=submitted, actor=centre.chair)
            raise RuntimeError("something later in the same transaction failed")
    assert mailoutbox == []


def test_people_choose_their_mail_on_their_notifications_page(centre):
    client = Client()
    client.force_login(centre.carol)
    page = client.get("/account/notifications/").content.decode()
    assert 'name="allocation_events"' in page
    assert 'name="budget_alerts"' in page
    response = client.post("/account/notifications/", {"allocation_events": "on"}, follow=True)
    assert "Saved" in response.content.decode()
    carol = mail_settings_get(user=centre.carol)
    assert (carol.allocation_events, carol.budget_alerts) == (True, False)
    assert Client().get("/account/notifications/")["Location"].startswith("/accounts/login/")


def test_budget_alerts_skip_who_turned_them_off_has_no_address_or_left(centre):
    from allocations.grants.services import allocation_grant
    from allocations.models import BudgetPeriod
    from allocations.slurm.enforcement import _recipients

    allocation_grant(
        project=centre.p3, pool=centre.cpu, amount=Decimal(10), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=centre.staff,
    )  # fmt: skip
    period = BudgetPeriod.objects.filter(allocation__project=centre.p3).first()
    assert _recipients(period) == ["alice@example.org", "carol@example.org"]
    alice = mail_settings_get(user=centre.alice)
    alice.budget_alerts = False
    alice.save()
    assert _recipients(period) == ["carol@example.org"]
    centre.carol.is_active = False
    centre.carol.save()
    assert _recipients(period) == []
    assert mail_recipients([centre.staff, None], MailKind.BUDGET_ALERTS) == ["ops@example.org"]

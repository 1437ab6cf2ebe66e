"""Decision letters (docs/allocations.md, "Decision letters"): each decided request has a PDF
letter saying the grant per pool against the request, the period, the reason and how to
appeal; it is attached to the decision mail of those who may read it and downloaded by the
project's PI and managers, the deciding chair and staff. The letters are read back with
pypdf: the figures must be in the text, not only in the page."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from pypdf import PdfReader
from rest_framework.test import APIClient

from allocations.access import can_read_letter
from allocations.grants.selectors import pool_today
from allocations.models import AllocationRequest, AllocationRound
from allocations.rounds.letters import DecisionLetter, LetterPool, letter_pdf, su_text
from allocations.rounds.selectors import decision_letter_of
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_review_start,
    request_submit,
    round_create,
)
from kit.calendar import add_months
from projects.models import Membership
from tests.allocations.conftest import Centre
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db
Kind = AllocationRequest.Kind


def _text(pdf: bytes) -> str:
    assert pdf.startswith(b"%PDF-")
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)


# --- The layout (pure) ----------------------------------------------------------------------


LETTER = DecisionLetter(
    centre_name="Example Computing Centre", centre_address="1 Main Street\nPerth WA 6000",
    decided_on=date(2026, 11, 27), request_id=42, kind="application",
    outcome="partially granted", project_code="pawsey0001", project_title="Climate",
    pi_name="Alice Able", round_name="2027 call",
    pools=(LetterPool("testbed CPU", Decimal("1250000"), Decimal("1000000")),
           LetterPool("testbed GPU", Decimal("5000.5"), Decimal("0"))),
    period_first_day=date(2027, 1, 1), period_last_day=date(2027, 12, 31),
    reason="The GPU pool is oversubscribed <by far> & the CPU ask was trimmed.",
    appealable=True, request_url="https://su.example.org/allocations/requests/42/",
)  # fmt: skip


def test_the_letter_states_the_centre_the_project_the_grant_per_pool_the_period_and_reason():
    text = _text(letter_pdf(LETTER))
    for expected in (
        "Example Computing Centre", "1 Main Street", "Perth WA 6000", "2026-11-27",
        "pawsey0001: Climate", "Alice Able", "application 42 in 2027 call", "partially granted",
        "2027-01-01 to 2027-12-31", "testbed CPU", "1,250,000", "1,000,000",
        "testbed GPU", "5,000", "1,255,000",  # the total asked
        "The GPU pool is oversubscribed <by far> & the CPU ask was trimmed.",
    ):  # fmt: skip
        assert expected in text, expected
    assert "You may appeal this decision once" in text
    assert "https://su.example.org/allocations/requests/42/" in text


def test_a_decision_that_cannot_be_appealed_says_so_and_why():
    final = DecisionLetter(**{**LETTER.__dict__, "appealable": False, "final_because": "x y"})
    text = _text(letter_pdf(final))
    assert "This decision cannot be appealed (x y)." in text
    assert "You may appeal" not in text
    assert "requests/42/" not in text


def test_the_same_letter_gives_the_same_bytes():
    assert letter_pdf(LETTER) == letter_pdf(LETTER)


def test_su_are_written_as_the_pages_write_them():
    assert su_text(Decimal("1234567.4")) == "1,234,567"
    assert su_text(Decimal("0")) == "0"


# --- Decided requests -----------------------------------------------------------------------


@dataclass
class Decided:
    centre: Centre
    round: AllocationRound
    application: AllocationRequest  # pawsey0001's: 1000 CPU granted, 200 of 500 GPU
    manager: User  # dave, manager of pawsey0001
    member: User  # carol, member of pawsey0001


@pytest.fixture(name="decided")
def decided_fixture(centre, django_capture_on_commit_callbacks, mailoutbox) -> Decided:
    start = pool_today(centre.cpu).replace(day=1)
    manager = UserFactory.create(username="dave")
    MembershipFactory(project=centre.p1, user=manager, role=Membership.Role.MANAGER)
    MembershipFactory(project=centre.p1, user=centre.carol)
    now = timezone.now()
    round_ = round_create(
        name="granting round", opens_at=now - timedelta(days=1), closes_at=now + timedelta(days=9),
        period_start=start, period_end=add_months(start, 12),
        available={centre.cpu: Decimal(10_000), centre.gpu: Decimal(1000)},
        chair=centre.chair, committee=[centre.reviewer], actor=centre.staff,
    )  # fmt: skip
    application = request_create(
        round_=round_, project=centre.p1, actor=centre.alice,
        amounts={centre.cpu: Decimal(1000), centre.gpu: Decimal(500)},
    )  # fmt: skip
    request_submit(request=application, actor=centre.alice)
    request_review_start(request=application, actor=centre.chair)
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        request_decide(
            request=application, actor=centre.chair, reason="the GPU pool is oversubscribed",
            granted={centre.cpu: Decimal(1000), centre.gpu: Decimal(200)},
        )  # fmt: skip
    return Decided(
        centre=centre, round=round_, application=application, manager=manager,
        member=centre.carol,
    )  # fmt: skip


def test_a_partial_grant_has_a_letter_with_its_figures_period_reason_and_appeal(decided, settings):
    settings.PORTAL_CENTRE_NAME = "Example Computing Centre"
    settings.PORTAL_CENTRE_ADDRESS = "1 Main Street|Perth WA 6000"
    application = decided.application
    letter = decision_letter_of(application)
    assert letter is not None
    round_ = decided.round
    assert (letter.period_first_day, letter.period_last_day) == (
        round_.period_start,
        round_.period_last_day,
    )
    text = _text(letter_pdf(letter))
    for expected in (
        "Example Computing Centre", "Perth WA 6000", "pawsey0001: Climate", "partially granted",
        "application", "granting round", "testbed CPU", "testbed GPU", "1,000", "500", "200",
        "the GPU pool is oversubscribed", "You may appeal this decision once",
        f"http://127.0.0.1:8000/allocations/requests/{application.pk}/",
        f"{round_.period_start:%Y-%m-%d} to {round_.period_last_day:%Y-%m-%d}",
    ):  # fmt: skip
        assert expected in text, expected


def test_an_undecided_request_has_no_letter(decided):
    centre = decided.centre
    draft = request_create(
        round_=decided.round, project=centre.p2, actor=centre.bob, amounts={centre.cpu: Decimal(1)}
    )
    assert decision_letter_of(draft) is None


def test_a_full_grant_and_an_appeals_decision_cannot_be_appealed(decided):
    centre = decided.centre
    appeal = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.APPEAL, appeal_of=decided.application
    )
    request_submit(request=appeal, actor=centre.alice)
    request_decide(request=appeal, actor=centre.chair, granted={centre.gpu: Decimal(300)})
    letter = decision_letter_of(appeal)
    assert letter is not None
    assert not letter.appealable
    text = _text(letter_pdf(letter))
    assert "This decision cannot be appealed (the decision on an appeal is final)." in text
    assert "granted" in text
    assert "300" in text
    # The appeal grants on the round's period, as the decision it appeals.
    assert letter.period_first_day == decided.round.period_start
    assert "Granted as requested." in text


def test_the_pi_and_managers_get_the_letter_with_the_decision_mail_and_members_do_not(
    decided, mailoutbox
):
    application = decided.application
    with_letter = [message for message in mailoutbox if message.attachments]
    without = [message for message in mailoutbox if not message.attachments]
    assert sorted(with_letter[0].to) == ["alice@example.org", "dave@example.org"]
    assert [message.to for message in without] == [["carol@example.org"]]
    (attachment,) = with_letter[0].attachments
    name, content, mimetype = attachment
    assert name == f"decision-pawsey0001-{application.pk}.pdf"
    assert mimetype == "application/pdf"
    text = _text(content)
    assert "the GPU pool is oversubscribed" in text
    assert "testbed GPU" in text
    assert "The decision letter is attached (PDF)." in with_letter[0].body
    assert "The chair's reason: the GPU pool is oversubscribed" in without[0].body


def test_who_may_read_a_letter(decided):
    centre = decided.centre
    application = decided.application
    readers = {
        user.username
        for user in (centre.alice, decided.manager, centre.chair, centre.staff, decided.member,
                     centre.reviewer, centre.bob)
        if can_read_letter(user, application)
    }  # fmt: skip
    assert readers == {"alice", "dave", "chair", "ops"}


# --- Pages and API --------------------------------------------------------------------------


def _page(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _api(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_letter_downloads_from_the_page_and_the_api_for_its_readers(decided):
    centre = decided.centre
    pk = decided.application.pk
    page_url = f"/allocations/requests/{pk}/letter.pdf"
    api_url = f"/api/v1/requests/{pk}/letter/"
    for reader in (centre.alice, decided.manager, centre.chair, centre.staff):
        for response in (_page(reader).get(page_url), _api(reader).get(api_url)):
            assert response.status_code == 200, reader
            assert response["Content-Type"] == "application/pdf"
            assert response["Content-Disposition"] == (
                f'attachment; filename="decision-pawsey0001-{pk}.pdf"'
            )
            assert "the GPU pool is oversubscribed" in _text(response.content)
    # A member and the committee read the request, not its letter: 403 with the rule.
    for onlooker in (decided.member, centre.reviewer):
        page = _page(onlooker).get(page_url)
        assert page.status_code == 403
        assert "read a decision letter" in page.content.decode()
        api = _api(onlooker).get(api_url)
        assert api.status_code == 403
        assert "read a decision letter" in api.json()["message"]
    # Another project's PI does not see the request at all.
    assert _page(centre.bob).get(page_url).status_code == 404
    assert _api(centre.bob).get(api_url).status_code == 404


def test_a_client_that_asks_for_a_pdf_gets_the_letter_or_its_error_in_json(decided):
    """``curl -H 'Accept: application/pdf'``: the letter, not 406; a refusal stays JSON."""
    api_url = f"/api/v1/requests/{decided.application.pk}/letter/"
    response = _api(decided.centre.alice).get(api_url, HTTP_ACCEPT="application/pdf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response.content.startswith(b"%PDF")
    refused = _api(decided.member).get(api_url, HTTP_ACCEPT="application/pdf")
    assert refused.status_code == 403
    assert refused["Content-Type"] == "application/json"
    assert "read a decision letter" in json.loads(refused.content)["message"]


def test_an_undecided_request_has_no_letter_to_download_for_anyone(decided):
    centre = decided.centre
    other = request_create(
        round_=decided.round, project=centre.p3, actor=centre.alice,
        amounts={centre.cpu: Decimal(5)},
    )  # fmt: skip
    request_submit(request=other, actor=centre.alice)
    for user in (centre.alice, centre.chair, centre.staff):
        assert _page(user).get(f"/allocations/requests/{other.pk}/letter.pdf").status_code == 404
        response = _api(user).get(f"/api/v1/requests/{other.pk}/letter/")
        assert response.status_code == 404
        assert "not decided" in response.json()["message"]


def test_the_request_page_and_the_project_page_link_the_letter_for_its_readers(decided):
    centre = decided.centre
    pk = decided.application.pk
    link = f"/allocations/requests/{pk}/letter.pdf"
    assert link in _page(centre.alice).get(f"/allocations/requests/{pk}/").content.decode()
    assert link in _page(centre.alice).get("/allocations/projects/pawsey0001/").content.decode()
    assert link in _page(centre.chair).get(f"/allocations/requests/{pk}/").content.decode()
    assert link not in _page(decided.member).get(f"/allocations/requests/{pk}/").content.decode()
    assert (
        link not in _page(decided.member).get("/allocations/projects/pawsey0001/").content.decode()
    )

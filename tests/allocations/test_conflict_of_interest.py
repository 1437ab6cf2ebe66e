"""Conflict of interest (issue 32): a committee member who leads or belongs to a project never
reads the reviews of its requests (API list and detail, request page, round overview), nor
decides them as chair; and no mail carries a review, a score or a reviewer to the applicants.

carol is a member of pawsey0003 (PI alice) and sits on the round's committee: she reviews
pawsey0002's request, and the reviewer's review of pawsey0003's is not hers to read.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client
from rest_framework.test import APIClient

from allocations.access import can_decide, can_read_reviews, can_review, reviews_visible
from allocations.rounds.selectors import round_overview
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_review_start,
    request_submit,
    review_submit,
    round_create,
)
from tests.allocations.conftest import PERIOD, open_round_times

pytestmark = pytest.mark.django_db

SECRET = "Weak methods section; I would cut it in half."


def _under_review(round_, project, pi, actor):
    request = request_create(
        round_=round_, project=project, actor=pi, amounts={round_.pools.first().pool: Decimal(4)}
    )
    request_submit(request=request, actor=pi)
    request_review_start(request=request, actor=actor)
    return request


def _round(centre, name, *, chair, committee):
    opens, closes = open_round_times()
    return round_create(
        name=name, opens_at=opens, closes_at=closes, period_start=PERIOD[0],
        period_end=PERIOD[1], available={centre.cpu: Decimal(100)}, chair=chair,
        committee=committee, actor=centre.staff,
    )  # fmt: skip


@pytest.fixture
def world(centre):
    """A round chaired by ``chair`` with carol (of pawsey0003) on its committee, and a round
    chaired by carol herself; pawsey0003's request in each is reviewed by the reviewer."""
    opens, closes = open_round_times()
    common = {
        "opens_at": opens, "closes_at": closes, "period_start": PERIOD[0],
        "period_end": PERIOD[1], "available": {centre.cpu: Decimal(100)}, "actor": centre.staff,
    }  # fmt: skip
    seated = round_create(
        name="seated", chair=centre.chair, committee=[centre.reviewer, centre.carol], **common
    )
    chaired = round_create(
        name="chaired", chair=centre.carol, committee=[centre.reviewer], **common
    )
    own = _under_review(seated, centre.p3, centre.alice, centre.chair)
    others = _under_review(seated, centre.p2, centre.bob, centre.chair)
    own_chaired = _under_review(chaired, centre.p3, centre.alice, centre.staff)
    hidden = review_submit(request=own, reviewer=centre.reviewer, score=2, comment=SECRET)
    review_submit(request=own_chaired, reviewer=centre.reviewer, score=2, comment=SECRET)
    hers = review_submit(request=others, reviewer=centre.carol, score=5, comment="fine")
    return {
        "own": own, "others": others, "own_chaired": own_chaired, "chaired": chaired,
        "hidden": hidden, "hers": hers,
    }  # fmt: skip


def _api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def _page(user):
    client = Client()
    client.force_login(user)
    return client


def test_the_access_layer_names_the_conflict_once(centre, world):
    own, others = world["own"], world["others"]
    assert not can_read_reviews(centre.carol, own)
    assert can_read_reviews(centre.carol, others)
    assert can_read_reviews(centre.reviewer, own)
    assert can_read_reviews(centre.staff, own)
    assert not can_read_reviews(centre.alice, own)  # the applicant, not on the committee
    assert not can_review(centre.carol, own)
    assert not can_decide(centre.carol, world["own_chaired"])  # she chairs that round
    assert can_decide(centre.staff, world["own_chaired"])
    assert can_decide(centre.chair, own)
    visible = set(reviews_visible(user=centre.carol))
    assert world["hidden"] not in visible
    assert world["hers"] in visible


def test_a_reviewer_of_the_project_gets_404_for_its_reviews_and_finds_none_in_the_list(
    centre, world
):
    client = _api(centre.carol)
    hidden = world["hidden"]
    response = client.get(f"/api/v1/reviews/{hidden.pk}/")
    assert response.status_code == 404
    ids = {item["id"] for item in client.get("/api/v1/reviews/?page_size=100").json()["results"]}
    assert hidden.pk not in ids
    assert world["hers"].pk in ids
    filtered = client.get(f"/api/v1/reviews/?request={world['own'].pk}").json()["results"]
    assert filtered == []
    # The committee's other members and staff still read it.
    assert _api(centre.reviewer).get(f"/api/v1/reviews/{hidden.pk}/").status_code == 200
    assert _api(centre.staff).get(f"/api/v1/reviews/{hidden.pk}/").status_code == 200


def test_the_request_page_hides_the_reviews_of_ones_own_project(centre, world):
    own = world["own"]
    response = _page(centre.carol).get(f"/allocations/requests/{own.pk}/")
    assert response.status_code == 200  # she reads the request as its member
    content = response.content.decode()
    assert SECRET not in content
    assert not response.context["show_reviews"]
    assert list(response.context["reviews"]) == []
    assert SECRET in _page(centre.reviewer).get(f"/allocations/requests/{own.pk}/").content.decode()


def test_a_chair_never_opens_or_decides_a_request_of_their_own_project(centre, world):
    own = world["own_chaired"]
    page = _page(centre.carol)
    response = page.get(f"/allocations/requests/{own.pk}/grant/")
    assert response.status_code == 403
    assert SECRET not in response.content.decode()
    assert page.post(f"/allocations/requests/{own.pk}/grant/", {}).status_code == 403
    detail = page.get(f"/allocations/requests/{own.pk}/")
    assert not detail.context["can_grant"]
    assert SECRET not in detail.content.decode()
    decided = _api(centre.carol).post(
        f"/api/v1/requests/{own.pk}/decide/",
        {"granted": [{"pool": centre.cpu.name, "su": "4"}]},
        format="json",
    )
    assert decided.status_code == 403
    assert "never to a project of their own" in decided.json()["message"]
    # Staff decide it instead.
    request_decide(request=own, actor=centre.staff, granted={centre.cpu: Decimal(4)})


def test_a_chair_in_conflict_does_not_open_their_projects_request_for_review(centre):
    chaired = _round(centre, "chaired", chair=centre.carol, committee=[centre.reviewer])
    submitted = request_create(
        round_=chaired, project=centre.p1, actor=centre.alice, amounts={centre.cpu: Decimal(1)}
    )
    request_submit(request=submitted, actor=centre.alice)
    carol = _page(centre.carol)
    # pawsey0001 is not hers: she opens it (and is sent back to the request).
    assert carol.post(f"/allocations/requests/{submitted.pk}/start-review/").status_code == 302
    own = request_create(
        round_=chaired, project=centre.p3, actor=centre.alice, amounts={centre.cpu: Decimal(1)}
    )
    request_submit(request=own, actor=centre.alice)
    assert carol.post(f"/allocations/requests/{own.pk}/start-review/").status_code == 403
    response = _api(centre.carol).post(f"/api/v1/requests/{own.pk}/review-start/")
    assert response.status_code == 403


def test_the_round_overview_shows_a_chair_no_score_of_their_own_projects_request(centre, world):
    overview = round_overview(round_=world["chaired"], actor=centre.carol)
    (summary,) = overview["requests"]
    assert summary.conflict
    assert summary.average_score is None
    assert summary.reviews is None
    body = _api(centre.carol).get(f"/api/v1/rounds/{world['chaired'].pk}/overview/").json()
    (row,) = body["requests"]
    assert row["conflict"] is True
    assert row["average_score"] is None
    assert row["reviews"] is None
    staff_view = round_overview(round_=world["chaired"], actor=centre.staff)
    assert staff_view["requests"][0].average_score == Decimal("2.00")
    page = _page(centre.carol).get(f"/allocations/rounds/{world['chaired'].pk}/")
    assert "your own project" in page.content.decode()


def test_no_mail_carries_a_review_or_a_reviewer_to_the_applicants(
    centre, world, mailoutbox, django_capture_on_commit_callbacks
):
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        request_decide(
            request=world["own"], actor=centre.chair, granted={centre.cpu: Decimal(2)},
            reason="the round is oversubscribed",
        )  # fmt: skip
    # The PI's mail carries the decision letter; the member's does not (``can_read_letter``).
    assert sorted(message.to[0] for message in mailoutbox) == [
        "alice@example.org",
        "carol@example.org",
    ]
    for message in mailoutbox:
        text = f"{message.subject}\n{message.body}".lower()
        for leak in (SECRET.lower(), centre.reviewer.username, "score", "2/5", "review"):
            assert leak not in text


def test_a_submitted_request_of_the_chairs_own_project_is_mailed_to_staff(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    chaired = _round(centre, "chaired", chair=centre.carol, committee=[centre.reviewer])
    request = request_create(
        round_=chaired, project=centre.p3, actor=centre.alice,
        amounts={centre.cpu: Decimal(1)},
    )  # fmt: skip
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        request_submit(request=request, actor=centre.alice)
    (message,) = mailoutbox
    assert message.to == [centre.staff.email]

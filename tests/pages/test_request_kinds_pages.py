"""The pages of every kind of request: the new-request form with its kinds, each kind's bad
input said on its field with nothing lost, and where the project page and a decided request
offer a top-up, a renewal, an extension and an appeal (and to whom)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client

from allocations.grants.selectors import pool_today
from allocations.grants.services import allocation_grant
from allocations.models import AllocationRequest
from allocations.rounds.services import request_create, request_submit
from tests.allocations.conftest import centre  # noqa: F401 (a fixture)
from tests.allocations.test_request_kinds import Kinds, kinds_fixture  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db
NEW = "/allocations/projects/pawsey0001/requests/new/"


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_new_request_form_offers_each_kind_and_the_fields_it_needs(kinds: Kinds):
    pi = _as(kinds.centre.alice)
    page = pi.get(NEW).content.decode()
    for label in ("Application", "Top-up", "Extension", "Renewal"):
        assert f">{label}</a>" in page
    extension = pi.get(f"{NEW}?kind=extension&pool={kinds.centre.cpu.pk}").content.decode()
    assert 'name="new_end"' in extension
    assert 'name="su"' in extension
    assert "Grants in force" in extension
    renewal = pi.get(f"{NEW}?kind=renewal").content.decode()
    assert 'id="no-renewal-round"' in renewal  # no round opens after the grant ends


def test_an_extension_ending_before_the_grant_is_said_on_its_field_and_loses_nothing(
    kinds: Kinds,
):
    wrong = kinds.cpu_grant.period_end - timedelta(days=1)
    response = _as(kinds.centre.alice).post(f"{NEW}?kind=extension", {
        "kind": "extension", "pool": kinds.centre.cpu.pk, "new_end": wrong.isoformat(),
        "su": "100", "justification": "three more months of runs",
    })  # fmt: skip
    assert response.status_code == 200
    form = response.context["form"]
    assert "must be after the grant's end" in form.errors["new_end"][0]
    page = response.content.decode()
    assert "three more months of runs" in page
    assert f'value="{wrong.isoformat()}"' in page
    assert not AllocationRequest.objects.filter(kind="extension").exists()


def test_a_top_up_amount_that_is_not_a_number_is_said_on_its_field(kinds: Kinds):
    response = _as(kinds.centre.alice).post(f"{NEW}?kind=top_up", {
        "kind": "top_up", "pool": kinds.centre.cpu.pk, "su": "a lot",
        "justification": "a deadline",
    })  # fmt: skip
    assert "as a number" in response.context["form"].errors["su"][0]
    assert "a deadline" in response.content.decode()
    assert not AllocationRequest.objects.filter(kind="top_up").exists()


def test_only_whoever_manages_the_project_may_open_the_form(kinds: Kinds):
    assert _as(kinds.member).get(f"{NEW}?kind=top_up").status_code == 403
    assert _as(kinds.centre.bob).get(f"{NEW}?kind=top_up").status_code == 404
    assert _as(kinds.manager).get(f"{NEW}?kind=top_up").status_code == 200
    appeal = f"{NEW}?kind=appeal&appeal_of={kinds.application.pk}"
    assert _as(kinds.manager).get(appeal).status_code == 200
    assert _as(kinds.member).get(appeal).status_code == 403


def test_a_decided_request_offers_an_appeal_to_its_pi_only(kinds: Kinds):
    url = f"/allocations/requests/{kinds.application.pk}/"
    assert "Appeal this decision" in _as(kinds.centre.alice).get(url).content.decode()
    for user in (kinds.member, kinds.centre.chair, kinds.conflicted):
        assert "Appeal this decision" not in _as(user).get(url).content.decode()


def test_a_grant_ending_within_60_days_offers_renewal_and_extension_to_its_pi(centre):  # noqa: F811
    today = pool_today(centre.cpu)
    allocation_grant(
        project=centre.p2, pool=centre.cpu, amount=Decimal(100),
        period_start=today - timedelta(days=300), period_end=today + timedelta(days=30),
        actor=centre.staff,
    )  # fmt: skip
    page = _as(centre.bob).get("/allocations/projects/pawsey0002/").content.decode()
    assert "Grants ending soon" in page
    assert "?kind=renewal" in page
    assert f"?kind=extension&amp;pool={centre.cpu.pk}" in page
    allocation_grant(
        project=centre.p3, pool=centre.cpu, amount=Decimal(100),
        period_start=today - timedelta(days=30), period_end=today + timedelta(days=300),
        actor=centre.staff,
    )  # fmt: skip
    later = _as(centre.alice).get("/allocations/projects/pawsey0003/").content.decode()
    assert "Grants ending soon" not in later


def test_the_chair_finds_a_submitted_top_up_among_the_rounds_changes_to_decide(kinds: Kinds):
    c = kinds.centre
    top_up = request_create(project=c.p1, actor=c.alice, kind="top_up", amounts={c.cpu: Decimal(5)})
    url = f"/allocations/rounds/{kinds.round.pk}/"
    grant = f"/allocations/requests/{top_up.pk}/grant/"
    assert grant not in _as(c.chair).get(url).content.decode()  # a draft: not yet
    request_submit(request=top_up, actor=c.alice)
    assert grant in _as(c.chair).get(url).content.decode()
    assert grant in _as(c.staff).get(url).content.decode()
    # A reviewer sees the round but not the changes; the chair decides them alone.
    assert "Changes to decide" not in _as(c.reviewer).get(url).content.decode()


def test_submitting_a_top_up_or_an_appeal_says_who_decides_not_the_committee(kinds: Kinds):
    """A top-up, an extension and an appeal have no committee review: submitting one said
    "the committee will review it" all the same, and the page read "a appeal"."""
    c = kinds.centre
    pi = _as(c.alice)
    top_up = request_create(project=c.p1, actor=c.alice, kind="top_up", amounts={c.cpu: Decimal(5)})
    page = pi.post(f"/allocations/requests/{top_up.pk}/submit/", follow=True).content.decode()
    assert "committee will review" not in page
    assert "no committee review" in page
    appeal = request_create(project=c.p1, actor=c.alice, kind="appeal", appeal_of=kinds.application)
    page = pi.post(f"/allocations/requests/{appeal.pk}/submit/", follow=True).content.decode()
    assert "committee will review" not in page
    assert "(an appeal has no committee review)" in page


def test_staff_find_the_changes_no_round_decides_on_their_dashboard(centre):  # noqa: F811
    """A top-up of a grant staff made outside a round (a start-up grant of an approved project
    request, the demo's grants) is decided by staff, but no page listed it: only the rounds'
    pages list the changes their chairs decide. Staff's dashboard lists them."""
    today = pool_today(centre.cpu)
    allocation_grant(
        project=centre.p2, pool=centre.cpu, amount=Decimal(100),
        period_start=today - timedelta(days=30), period_end=today + timedelta(days=300),
        actor=centre.staff,
    )  # fmt: skip
    top_up = request_create(
        project=centre.p2, actor=centre.bob, kind="top_up", amounts={centre.cpu: Decimal(50)}
    )
    decide = f"/allocations/requests/{top_up.pk}/grant/"
    assert decide not in _as(centre.staff).get("/").content.decode()  # a draft: not yet
    request_submit(request=top_up, actor=centre.bob)
    page = _as(centre.staff).get("/").content.decode()
    assert "Changes to decide" in page
    assert decide in page
    assert decide not in _as(centre.bob).get("/").content.decode()

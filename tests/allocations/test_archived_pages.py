"""An archived project on the pages and in the API: read as before, every write refused with
the one sentence (a 400 in the API, a message on the project's page), a banner instead of the
write actions, and staff's un-archive the one write it takes."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from accounting.ledger.pipeline import jobs_import
from allocations.grants.services import allocation_grant
from allocations.models import AllocationRequest
from allocations.rounds.services import request_create
from projects.invitations import invitation_send
from projects.models import Membership, Project
from tests.allocations.conftest import PERIOD, SAMPLE
from tests.allocations.test_round_end_to_end import _round
from tests.factories import MembershipFactory, api_token

pytestmark = pytest.mark.django_db

REFUSAL = "pawsey0001 is archived: it is read-only"


@pytest.fixture
def archived(centre):
    allocation_grant(
        project=centre.p1, pool=centre.cpu, amount=Decimal(400), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=centre.staff,
    )  # fmt: skip
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    MembershipFactory(project=centre.p1, user=centre.carol)
    round_ = _round(centre)
    Project.objects.filter(pk=centre.p1.pk).update(
        status=Project.Status.ARCHIVED, status_since=date(2026, 11, 1)
    )
    centre.round = round_
    return centre


def _api(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user)}")
    return client


def test_api_writes_answer_400_with_the_sentence_and_reads_still_work(archived):
    pi = _api(archived.alice)
    members = Membership.objects.filter(project=archived.p1).count()

    added = pi.post("/api/v1/projects/pawsey0001/members/", {"username": "bob"}, format="json")
    asked = pi.post(
        "/api/v1/requests/",
        {"round": archived.round.pk, "project": "pawsey0001", "kind": "new",
         "amounts": [{"pool": "testbed CPU", "su": "40"}]},
        format="json",
    )  # fmt: skip
    invited = pi.post(
        "/api/v1/projects/pawsey0001/invitations/", {"email": "x@example.org"}, format="json"
    )
    left = _api(archived.carol).delete("/api/v1/projects/pawsey0001/members/carol/")

    for response in (added, asked, invited, left):
        assert response.status_code == 400, response.content
        assert REFUSAL in response.content.decode()
    assert Membership.objects.filter(project=archived.p1).count() == members
    assert not AllocationRequest.objects.filter(project=archived.p1).exists()
    project = pi.get("/api/v1/projects/pawsey0001/")
    assert (project.status_code, project.json()["status"]) == (200, "archived")
    assert project.json()["status_since"] == "2026-11-01"
    balance = pi.get("/api/v1/projects/pawsey0001/balance/?on=2026-11-22")
    assert balance.status_code == 200
    assert Decimal(balance.json()["pools"][0]["current"]["used_su"]) > 0
    jobs = pi.get("/api/v1/jobs/?project=pawsey0001")
    assert jobs.status_code == 200
    assert jobs.json()["results"]


def test_someone_outside_the_project_learns_nothing_of_its_archive(archived):
    response = _api(archived.bob).post(
        "/api/v1/projects/pawsey0001/members/", {"username": "bob"}, format="json"
    )
    assert response.status_code == 404
    assert "archived" not in response.content.decode()


def test_staff_un_archive_through_the_api_and_others_may_not(archived):
    refused = _api(archived.alice).post("/api/v1/projects/pawsey0001/unarchive/")
    assert refused.status_code == 403
    response = _api(archived.staff).post("/api/v1/projects/pawsey0001/unarchive/")
    assert response.status_code == 200
    assert response.json()["status"] == "active"  # its grant is current
    archived.p1.refresh_from_db()
    assert archived.p1.status == "active"


def test_the_project_page_shows_the_banner_and_no_write_action(archived, client):
    client.force_login(archived.alice)
    page = client.get("/allocations/projects/pawsey0001/").content.decode()

    assert "pawsey0001 is archived: it is read-only." in page
    for action in ("Apply for SU", "Send invitation", "New request", "Remove", "Un-archive"):
        assert action not in page
    assert "Audit log" in page  # still readable by its PI
    jobs = client.get("/accounting/projects/pawsey0001/jobs/")
    assert jobs.status_code == 200
    assert "is archived" in jobs.content.decode()


def test_a_page_write_is_refused_with_the_message_on_the_project_page(archived, client):
    client.force_login(archived.alice)

    removed = client.post("/allocations/projects/pawsey0001/members/carol/remove/", follow=True)
    asked = client.get("/allocations/projects/pawsey0001/requests/new/", follow=True)

    for response in (removed, asked):
        assert response.redirect_chain[-1][0] == "/allocations/projects/pawsey0001/"
        messages = [str(message) for message in response.context["messages"]]
        assert messages == [REFUSAL]
    assert Membership.objects.filter(project=archived.p1, user=archived.carol).exists()


def test_staff_see_the_un_archive_button_and_use_it(archived, client):
    client.force_login(archived.staff)
    assert "Un-archive" in client.get("/allocations/projects/pawsey0001/").content.decode()

    response = client.post("/allocations/projects/pawsey0001/unarchive/", follow=True)

    assert response.redirect_chain[-1][0] == "/allocations/projects/pawsey0001/"
    page = response.content.decode()
    assert "pawsey0001 is active again" in page
    assert "is archived" not in page
    assert "Apply for SU" in page


def test_an_invitation_to_an_archived_project_is_refused_on_its_own_page(archived, client):
    Project.objects.filter(pk=archived.p1.pk).update(status=Project.Status.ACTIVE)
    sent = invitation_send(
        project=archived.p1, email="bob@example.org", role="member", actor=archived.alice
    )
    Project.objects.filter(pk=archived.p1.pk).update(status=Project.Status.ARCHIVED)
    client.force_login(archived.bob)

    response = client.post(sent.link.split("8000", 1)[1])

    assert response.status_code == 200  # the invitation page, not the project's (not his)
    assert REFUSAL in response.content.decode()
    assert not Membership.objects.filter(project=archived.p1, user=archived.bob).exists()


def test_a_request_of_an_archived_project_shows_no_form(archived, client):
    Project.objects.filter(pk=archived.p1.pk).update(status=Project.Status.ACTIVE)
    draft = request_create(
        round_=archived.round, project=archived.p1, actor=archived.alice,
        amounts={archived.cpu: Decimal(5)},
    )  # fmt: skip
    client.force_login(archived.alice)
    path = f"/allocations/requests/{draft.pk}/"
    assert f"{path}submit/" in client.get(path).content.decode()

    Project.objects.filter(pk=archived.p1.pk).update(status=Project.Status.ARCHIVED)
    page = client.get(path).content.decode()

    assert f"{path}submit/" not in page
    assert f"{path}edit/" not in page
    refused = client.post(f"{path}submit/", follow=True)
    assert [str(m) for m in refused.context["messages"]] == [REFUSAL]

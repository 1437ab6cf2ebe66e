"""Invitations by e-mail and the PI's proxy ("manager"): who may do what, and the link."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from allocations.grants.services import adjustment_transfer, allocation_grant
from projects.invitations import (
    InvitationError,
    invitation_accept,
    invitation_revoke,
    invitation_send,
    membership_role_set,
)
from projects.models import Invitation, Membership
from projects.services import membership_add
from tests.allocations.conftest import PERIOD
from tests.factories import UserFactory, api_token

pytestmark = pytest.mark.django_db

LINK = re.compile(r"http://127\.0\.0\.1:8000(/allocations/invitations/[^/\s]+/)")


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user)}")
    return client


@pytest.fixture
def manager(centre):
    """dave, appointed manager of pawsey0003 by its PI alice."""
    dave = UserFactory(username="dave")
    membership_add(project=centre.p3, user=dave, actor=centre.alice)
    membership_role_set(project=centre.p3, user=dave, role="manager", actor=centre.alice)
    return dave


def test_a_pi_invites_by_mail_and_whoever_accepts_signed_in_becomes_the_member(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        sent = invitation_send(project=centre.p3, email="Eve@Uni.Example", role="member",
                               actor=centre.alice)  # fmt: skip
    (message,) = mailoutbox
    assert message.to == ["eve@uni.example"]
    assert message.subject == "[SU portal] alice invites you to pawsey0003 on the SU portal"
    path = LINK.search(message.body).group(1)
    assert sent.link.endswith(path)

    eve = UserFactory(username="eve")  # e.g. made by her first SSO sign-in
    assert Client().get(path)["Location"].startswith("/accounts/login/?next=")
    browser = _signed_in(eve)
    page = browser.get(path).content.decode()
    assert "invites eve@uni.example to project <strong>pawsey0003</strong>" in page
    response = browser.post(path)
    assert response["Location"] == "/allocations/projects/pawsey0003/"
    assert Membership.objects.get(project=centre.p3, user=eve).role == "member"
    invitation = Invitation.objects.get()
    assert (invitation.state, invitation.accepted_by) == ("accepted", eve)
    again = _signed_in(UserFactory(username="mallory")).post(path, follow=True)
    assert "this invitation is accepted: ask for a new one" in again.content.decode()
    assert not Membership.objects.filter(user__username="mallory").exists()


def test_an_expired_revoked_or_forged_link_admits_no_one(centre):
    eve = UserFactory(username="eve")
    expired = invitation_send(project=centre.p3, email="a@x.org", role="member", actor=centre.alice)
    Invitation.objects.filter(pk=expired.invitation.pk).update(
        created_at=timezone.now() - timedelta(days=30), expires_at=timezone.now()
    )
    token = expired.link.rstrip("/").rsplit("/", 1)[1]
    with pytest.raises(InvitationError, match="expired"):
        invitation_accept(token=token, user=eve)
    revoked = invitation_send(project=centre.p3, email="b@x.org", role="member", actor=centre.alice)
    invitation_revoke(invitation=revoked.invitation, actor=centre.alice)
    with pytest.raises(InvitationError, match="revoked"):
        invitation_accept(token=revoked.link.rstrip("/").rsplit("/", 1)[1], user=eve)
    forged = _signed_in(eve).get("/allocations/invitations/eyJpZCI6MX0:forged:sig/")
    assert forged.status_code == 404
    assert "not valid" in forged.content.decode()
    assert not Membership.objects.filter(user=eve).exists()


def test_who_may_invite_and_whom(centre, manager):
    invitation_send(project=centre.p3, email="m@x.org", role="member", actor=manager)
    with pytest.raises(PermissionDenied, match="only the PI of pawsey0003 appoints managers"):
        invitation_send(project=centre.p3, email="n@x.org", role="manager", actor=manager)
    with pytest.raises(PermissionDenied):
        invitation_send(project=centre.p3, email="o@x.org", role="member", actor=centre.carol)
    invitation_send(project=centre.p3, email="p@x.org", role="manager", actor=centre.alice)
    with pytest.raises(InvitationError, match="already in pawsey0003"):
        invitation_send(project=centre.p3, email="carol@example.org", role="member",
                        actor=centre.alice)  # fmt: skip


def test_a_manager_runs_the_members_but_neither_makes_managers_nor_moves_su_out(centre, manager):
    erin = UserFactory(username="erin")
    membership_add(project=centre.p3, user=erin, actor=manager)
    with pytest.raises(PermissionDenied, match="only the PI of pawsey0003 changes roles"):
        membership_role_set(project=centre.p3, user=erin, role="manager", actor=manager)
    with pytest.raises(PermissionDenied):
        membership_add(project=centre.p3, user=UserFactory(username="f"), actor=manager,
                       role="manager")  # fmt: skip
    allocation_grant(project=centre.p3, pool=centre.cpu, amount=Decimal(100),
                     period_start=PERIOD[0], period_end=PERIOD[1], actor=centre.staff)  # fmt: skip
    allocation_grant(project=centre.p2, pool=centre.cpu, amount=Decimal(100),
                     period_start=PERIOD[0], period_end=PERIOD[1], actor=centre.staff)  # fmt: skip
    with pytest.raises(PermissionDenied):
        adjustment_transfer(source=centre.p3, target=centre.p2, pool=centre.cpu,
                            amount=Decimal(1), actor=manager, reason="x", on=PERIOD[0])  # fmt: skip
    # the PI takes the role back: dave is a plain member again and may invite no one
    membership_role_set(project=centre.p3, user=manager, role="member", actor=centre.alice)
    with pytest.raises(PermissionDenied):
        invitation_send(project=centre.p3, email="q@x.org", role="member", actor=manager)


def test_the_api_checks_who_asks_before_what_is_asked(centre, manager):
    member = _api(centre.carol)
    refused = member.patch("/api/v1/projects/pawsey0003/members/dave/", {}, format="json")
    assert refused.status_code == 403  # not a 400 listing the missing "role"
    refused = member.post("/api/v1/projects/pawsey0003/invitations/", {}, format="json")
    assert refused.status_code == 403
    assert (
        _api(manager)
        .patch("/api/v1/projects/pawsey0003/members/carol/", {"role": "manager"}, format="json")
        .status_code
        == 403
    )
    pi = _api(centre.alice)
    changed = pi.patch(
        "/api/v1/projects/pawsey0003/members/carol/", {"role": "manager"}, format="json"
    )
    assert (changed.status_code, changed.json()["role"]) == (200, "manager")
    assert (
        pi.patch(
            "/api/v1/projects/pawsey0003/members/alice/", {"role": "member"}, format="json"
        ).status_code
        == 400
    )  # the PI stays the PI
    sent = pi.post(
        "/api/v1/projects/pawsey0003/invitations/", {"email": "g@x.org", "role": "manager"},
        format="json",
    )  # fmt: skip
    assert sent.status_code == 201
    assert sent.json()["invitation"]["state"] == "pending"
    assert "/allocations/invitations/" in sent.json()["link"]
    listed = pi.get("/api/v1/projects/pawsey0003/invitations/").json()["results"]
    assert [item["email"] for item in listed] == ["g@x.org"]
    assert "link" not in listed[0]
    assert (
        pi.delete(f"/api/v1/projects/pawsey0003/invitations/{listed[0]['id']}/").status_code == 204
    )
    outsider = _api(centre.bob)
    assert outsider.get("/api/v1/projects/pawsey0003/invitations/").status_code == 404


def test_the_project_page_offers_invitations_and_roles_to_whom_may_use_them(centre, manager):
    pi_page = _signed_in(centre.alice).get("/allocations/projects/pawsey0003/").content.decode()
    assert "Send invitation" in pi_page
    assert 'name="role"' in pi_page  # the PI sets roles and may invite managers
    manager_page = _signed_in(manager).get("/allocations/projects/pawsey0003/").content.decode()
    assert "Send invitation" in manager_page
    assert '<select id="role-' not in manager_page
    member_page = _signed_in(centre.carol).get("/allocations/projects/pawsey0003/").content.decode()
    assert "Send invitation" not in member_page
    response = _signed_in(manager).post(
        "/allocations/projects/pawsey0003/invitations/", {"email": "h@x.org", "role": "member"},
        follow=True,
    )  # fmt: skip
    assert "Invitation mailed to h@x.org" in response.content.decode()
    removed = _signed_in(manager).post(
        "/allocations/projects/pawsey0003/members/carol/remove/", follow=True
    )
    assert "carol is no longer in pawsey0003" in removed.content.decode()

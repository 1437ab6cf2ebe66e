"""The audit log: who changed what, when, before and after; staff read all, a PI their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from auditlog.models import LogEntry
from django.test import Client

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from allocations.models import Adjustment, Allocation, EnforcementAction
from people.roles import roles_apply
from projects.models import Membership

pytestmark = pytest.mark.django_db

SETONIX = Path(__file__).resolve().parents[2] / "examples/clusters/setonix.json"


def _entries(model: str, **filters) -> list[LogEntry]:
    return list(
        LogEntry.objects.filter(content_type__model=model, **filters).order_by("timestamp", "pk")
    )


def _page(user, query: str = "") -> Any:
    client = Client()
    client.force_login(user)
    return client.get(f"/audit/{query}")


def test_a_transfer_made_with_a_token_names_its_owner_and_both_sides(world):
    LogEntry.objects.all().delete()
    response = world.client("pi").post(
        "/api/v1/adjustments/transfer/",
        {"source": "pawsey0003", "target": "pawsey0002", "pool": "testbed CPU",
         "amount": "7", "reason": "collaboration", "on": "2026-11-22"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201
    sides = _entries("adjustment")
    assert [entry.additional_data["project"] for entry in sides] == ["pawsey0003", "pawsey0002"]
    assert {entry.actor.username for entry in sides} == {"alice"}
    assert sides[0].action == LogEntry.Action.CREATE
    assert sides[0].changes["amount_su"][1] == "-7.000000"
    assert sides[0].changes["transfer_id"][1] == sides[1].changes["transfer_id"][1]
    assert Adjustment.objects.filter(transfer_id__isnull=False).count() == 2


def test_membership_changes_are_logged_with_before_and_after(world):
    pi = world.client("pi")
    assert (
        pi.post(
            "/api/v1/projects/pawsey0003/members/", {"username": "bob"}, format="json"
        ).status_code
        == 201
    )
    assert pi.delete("/api/v1/projects/pawsey0003/members/bob/").status_code == 204
    added, removed = _entries("membership", additional_data__project="pawsey0003")[-2:]
    assert (added.action, removed.action) == (LogEntry.Action.CREATE, LogEntry.Action.DELETE)
    assert added.actor == world.users["pi"]
    assert not Membership.objects.filter(project__code="pawsey0003", user__username="bob").exists()


def test_a_grant_made_in_the_api_is_logged_and_so_is_a_later_budget_change(world):
    LogEntry.objects.all().delete()
    response = world.client("staff").post(
        "/api/v1/allocations/",
        {"project": "pawsey0004", "pool": "testbed CPU", "amount": "1200",
         "period_start": "2027-01-01", "period_end": "2028-01-01", "reason": "merit"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.json()
    (grant,) = _entries("allocation")
    assert grant.actor == world.users["staff"]
    assert grant.changes["granted_su"] == ["None", "1200.000000"]
    period = Allocation.objects.get(pk=grant.object_pk).budget_periods.first()
    period.budget_su = 1
    period.save()
    (change,) = _entries("budgetperiod", additional_data__project="pawsey0004")
    assert change.changes["budget_su"] == ["300.000000", "1"]


def test_tokens_roles_rate_versions_and_enforcement_are_logged(world):
    LogEntry.objects.all().delete()
    world.token("member", scope="read")
    (token,) = _entries("apitoken")
    assert "digest" not in token.changes  # never what opens the API, even hashed
    assert token.changes["name"][1] == "member:read"

    roles_apply(user=world.users["member"], groups=["hpc-staff", "allocation-committee"])
    person = {key for entry in _entries("user") for key in entry.changes}
    assert person == {"is_staff", "groups"}

    cluster_apply(definition=cluster_definition_load(SETONIX))
    assert len(_entries("partitionversion")) >= 2

    action = EnforcementAction.objects.first()
    if action is not None:
        action.status = EnforcementAction.Status.DISMISSED
        action.save()
        assert _entries("enforcementaction")[-1].changes["status"][1] == "dismissed"


def test_staff_read_every_entry_and_a_pi_only_the_projects_they_lead(world):
    world.client("pi").post(
        "/api/v1/projects/pawsey0003/members/", {"username": "bob"}, format="json"
    )
    world.client("outsider").post(
        "/api/v1/projects/pawsey0002/members/", {"username": "carol"}, format="json"
    )
    staff_page = _page(world.users["staff"]).content.decode()
    assert "pawsey0003" in staff_page
    assert "pawsey0002" in staff_page
    pi_page = _page(world.users["pi"]).content.decode()
    assert "pawsey0003" in pi_page
    assert "pawsey0002" not in pi_page
    assert _page(world.users["pi"], "?project=pawsey0002").status_code == 404
    assert _page(world.users["pi"], "?project=pawsey0003").status_code == 200


def test_a_member_who_leads_nothing_is_refused_and_a_stranger_sent_to_sign_in(world):
    refused = _page(world.users["member"])
    assert refused.status_code == 403
    assert "for project PIs and centre staff" in refused.content.decode()
    assert Client().get("/audit/")["Location"].startswith("/accounts/login/")


def test_the_audit_page_reads_a_grant_as_a_sentence_with_names_and_amounts(world):
    """Issue 31, item 7: "budget_periods: None → allocations.BudgetPeriod.None", "granted_by:
    None → 5" and "project: None → 4" read as names and amounts."""
    LogEntry.objects.all().delete()
    response = world.client("staff").post(
        "/api/v1/allocations/",
        {"project": "pawsey0004", "pool": "testbed CPU", "amount": "80000",
         "period_start": "2027-01-01", "period_end": "2028-01-01", "reason": "merit"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.json()
    (grant,) = _entries("allocation")
    assert "budget_periods" not in grant.changes  # a reverse relation is not a value
    staff = world.users["staff"].username
    html = _page(world.users["staff"], "?project=pawsey0004").content.decode()
    assert (
        f"Granted 80,000 SU to pawsey0004 (testbed CPU) for 2027-01-01 to 2027-12-31 by {staff}"
        in html
    )
    assert "allocations.BudgetPeriod.None" not in html
    assert f"<strong>granted by</strong>: {staff}</li>" in html
    assert "<strong>project</strong>: pawsey0004</li>" in html
    assert "<strong>last day</strong>: 2027-12-31</li>" in html  # stored end 2028-01-01


def test_memberships_and_adjustments_read_as_sentences(world):
    pi = world.client("pi")
    pi_name = world.users["pi"].username
    pi.post("/api/v1/projects/pawsey0003/members/", {"username": "bob"}, format="json")
    pi.delete("/api/v1/projects/pawsey0003/members/bob/")
    response = pi.post(
        "/api/v1/adjustments/transfer/",
        {"source": "pawsey0003", "target": "pawsey0002", "pool": "testbed CPU",
         "amount": "7", "reason": "shared run", "on": "2026-11-22"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201
    html = _page(world.users["staff"]).content.decode()
    assert f"Added bob to pawsey0003 as member by {pi_name}" in html
    assert f"Removed bob from pawsey0003 by {pi_name}" in html
    assert f"Transfer out of 7 SU from pawsey0003 by {pi_name} (to pawsey0002: shared run)" in html
    assert f"Transfer in of 7 SU to pawsey0002 by {pi_name} (from pawsey0003: shared run)" in html
    assert "<del>" not in html.split("Removed bob")[1].split("</tr>")[0]  # what was deleted

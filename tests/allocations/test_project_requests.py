"""Project requests: every transition of the state machine, who may make each, bad input,
what approval creates (project, members, grants, a Slurm plan asked for) and the mails."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

from accounting.clusters.quotes import QuoteRequest
from accounting.models import Partition
from allocations.access import approves_project_requests, project_requests_visible
from allocations.grants.services import AllocationError
from allocations.models import Allocation, ProjectRequest
from allocations.project_requests.codes import next_project_code
from allocations.project_requests.services import (
    EstimateLine,
    project_request_approve,
    project_request_changes_ask,
    project_request_create,
    project_request_estimate_add,
    project_request_pi_answer,
    project_request_reject,
    project_request_resubmit,
)
from projects.models import Membership
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
State = ProjectRequest.State


def _ask(centre, requester, *, pi="", amounts=None, **kwargs):
    return project_request_create(
        requester=requester, title="Coral reef models", abstract="Reef growth under warming.",
        field_of_science="Marine science", pi=pi,
        amounts=amounts if amounts is not None else {"testbed CPU": "50000", "testbed GPU": "0"},
        **kwargs,
    )  # fmt: skip


@pytest.fixture
def newcomer(db):
    return UserFactory(username="nina")


def _states(request):
    return [(t.from_state, t.to_state, t.actor.username) for t in request.transitions.all()]


# --- Codes (pure) ---------------------------------------------------------------------------


def test_the_next_code_follows_the_highest_of_the_prefix():
    codes = ["pawsey0004", "pawsey0002", "other0100", "pawsey-old"]
    assert next_project_code(prefix="pawsey", codes=codes) == "pawsey0005"
    assert next_project_code(prefix="pawsey", codes=[]) == "pawsey0001"
    assert next_project_code(prefix="nci", codes=["nci12345"]) == "nci12346"


# --- The happy paths ------------------------------------------------------------------------


def test_a_newcomer_asking_to_lead_goes_straight_to_the_approvers_and_approval_creates_all(
    centre, newcomer, mailoutbox, django_capture_on_commit_callbacks, settings
):
    settings.PORTAL_URL = "https://portal.example.org"
    work = Partition.objects.get(cluster=centre.cluster, name="work")
    line = EstimateLine(partition=work, jobs=10, quote=QuoteRequest(nodes=1, hours=Decimal(2)))
    with django_capture_on_commit_callbacks(execute=True):
        request = _ask(centre, newcomer, estimates=[line])
    assert request.state == State.SUBMITTED
    assert request.pi == newcomer
    assert request.pi_confirmed_at is not None
    assert request.estimates.get().service_units > 0
    (mail,) = mailoutbox
    assert mail.to == ["ops@example.org"]  # staff: no approvers' group configured
    assert f"https://portal.example.org/allocations/project-requests/{request.pk}/" in mail.body

    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        project_request_approve(request=request, actor=centre.staff)
    request.refresh_from_db()
    project = request.project
    assert request.state == State.APPROVED
    assert project is not None
    assert project.code == "pawsey0005"  # after the centre's pawsey0004
    assert (project.title, project.pi, project.field_of_science) == (
        "Coral reef models", newcomer, "Marine science",
    )  # fmt: skip
    assert Membership.objects.get(project=project, user=newcomer).role == Membership.Role.PI
    (grant,) = Allocation.objects.filter(project=project)
    assert (grant.pool, grant.granted_su) == (centre.cpu, Decimal(50000))
    assert grant.period_end == grant.period_start.replace(year=grant.period_start.year + 1)
    assert grant.budget_periods.exists()
    assert request.amounts.get(pool=centre.cpu).granted_su == Decimal(50000)
    # One Slurm plan asked for (the testbed cluster), and the decision's mail to the requester.
    for callback in callbacks:
        callback()
    assert [m.to for m in mailoutbox] == [["nina@example.org"]]
    assert "pawsey0005" in mailoutbox[0].body
    assert len(callbacks) == 2  # the plan task and the mail
    assert _states(request) == [("", "submitted", "nina"), ("submitted", "approved", "ops")]
    approval = request.transitions.last()
    assert "a plan of slurm-testbed waits for staff to review" in approval.note


def test_a_named_pi_confirms_and_the_requester_becomes_the_projects_manager(
    centre, newcomer, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        request = _ask(centre, newcomer, pi="bob@example.org")
    assert (request.state, request.pi) == (State.AWAITING_PI, centre.bob)
    assert [m.to for m in mailoutbox] == [["bob@example.org"]]
    assert "confirm" in mailoutbox[0].subject.lower()
    # The approvers do not see it yet; the requester and the named PI do.
    assert request in project_requests_visible(user=centre.bob)
    assert request in project_requests_visible(user=newcomer)
    assert request not in project_requests_visible(user=centre.carol)
    with pytest.raises(PermissionDenied):
        project_request_pi_answer(request=request, actor=newcomer, accept=True)
    with pytest.raises(PermissionDenied):
        project_request_approve(request=request, actor=newcomer)
    with pytest.raises(AllocationError, match="cannot be approved"):
        project_request_approve(request=request, actor=centre.staff)

    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        project_request_pi_answer(request=request, actor=centre.bob, accept=True)
    assert request.state == State.SUBMITTED
    assert [m.to for m in mailoutbox] == [["ops@example.org"]]
    project_request_approve(request=request, actor=centre.staff, code="reef01")
    roles = dict(
        Membership.objects.filter(project__code="reef01").values_list("user__username", "role")
    )
    assert roles == {"bob": "pi", "nina": "manager"}


def test_changes_asked_then_resubmitted_then_rejected_with_a_reason(
    centre, newcomer, mailoutbox, django_capture_on_commit_callbacks
):
    request = _ask(centre, newcomer)
    with pytest.raises(AllocationError, match="say what to change"):
        project_request_changes_ask(request=request, actor=centre.staff, reason="  ")
    with django_capture_on_commit_callbacks(execute=True):
        project_request_changes_ask(request=request, actor=centre.staff, reason="Less GPU.")
    assert request.state == State.CHANGES_REQUESTED
    assert mailoutbox[-1].to == ["nina@example.org"]
    assert "Less GPU." in mailoutbox[-1].body
    with pytest.raises(PermissionDenied):
        project_request_resubmit(request=request, actor=centre.bob)
    project_request_resubmit(
        request=request, actor=newcomer, title="Coral reefs", amounts={"testbed CPU": "30000"}
    )
    assert (request.state, request.title) == (State.SUBMITTED, "Coral reefs")
    assert list(request.amounts.values_list("requested_su", flat=True)) == [Decimal(30000)]
    with pytest.raises(AllocationError, match="say why the request is rejected"):
        project_request_reject(request=request, actor=centre.staff, reason="")
    with django_capture_on_commit_callbacks(execute=True):
        project_request_reject(request=request, actor=centre.staff, reason="Out of scope.")
    assert request.state == State.REJECTED
    assert request.decision_reason == "Out of scope."
    assert "Out of scope." in mailoutbox[-1].body
    assert [to for _, to, _ in _states(request)] == [
        "submitted", "changes_requested", "submitted", "rejected",
    ]  # fmt: skip
    with pytest.raises(AllocationError, match="cannot be approved"):
        project_request_approve(request=request, actor=centre.staff)


def test_a_named_pi_may_decline(centre, newcomer):
    request = _ask(centre, newcomer, pi="bob")
    project_request_pi_answer(request=request, actor=centre.bob, accept=False, reason="Not mine.")
    assert request.state == State.PI_DECLINED
    with pytest.raises(AllocationError):
        project_request_pi_answer(request=request, actor=centre.bob, accept=True)


def test_members_of_the_approvers_group_decide_others_do_not(centre, newcomer, settings):
    settings.PORTAL_PROJECT_APPROVERS_GROUP = "project-approvers"
    approver = UserFactory(username="amy")
    approver.groups.add(Group.objects.create(name="project-approvers"))
    assert approves_project_requests(approver)
    assert not approves_project_requests(centre.bob)
    waiting_for_bob = _ask(centre, newcomer, pi="bob")
    assert waiting_for_bob not in project_requests_visible(user=approver)  # bob confirms first
    project_request_pi_answer(request=waiting_for_bob, actor=centre.bob, accept=True)
    assert waiting_for_bob in project_requests_visible(user=approver)
    request = _ask(centre, newcomer)
    assert request in project_requests_visible(user=approver)
    with pytest.raises(PermissionDenied):
        project_request_approve(request=request, actor=centre.bob)
    assert request.state == State.SUBMITTED
    assert not Allocation.objects.filter(reason__contains="project request").exists()
    project_request_approve(
        request=request, actor=approver, period_start=date(2027, 1, 1), period_end=date(2027, 7, 1)
    )
    grant = Allocation.objects.get(project=request.project)
    assert (grant.period_start, grant.period_end, grant.granted_by) == (
        date(2027, 1, 1), date(2027, 7, 1), approver,
    )  # fmt: skip


# --- Bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amounts", "message"),
    [
        ({"testbed CPU": "lots"}, "SU asked on testbed CPU must be a number"),
        ({"testbed CPU": "-5"}, "cannot be negative"),
        ({"nowhere": "10"}, "unknown pool nowhere"),
        ({"testbed CPU": "0"}, "ask for some SU"),
    ],
)
def test_bad_amounts_are_refused_and_nothing_is_kept(centre, newcomer, amounts, message):
    with pytest.raises(AllocationError, match=message):
        _ask(centre, newcomer, amounts=amounts)
    assert not ProjectRequest.objects.exists()


def test_an_unknown_pi_and_a_missing_title_are_refused(centre, newcomer):
    with pytest.raises(AllocationError, match="has signed in to the portal yet"):
        _ask(centre, newcomer, pi="nobody@example.org")
    with pytest.raises(AllocationError, match="title"):
        project_request_create(
            requester=newcomer, title=" ", abstract="x", field_of_science="y",
            amounts={"testbed CPU": 1},
        )  # fmt: skip


def test_approving_twice_or_with_a_taken_code_or_a_grant_unexplained_is_refused(centre, newcomer):
    request = _ask(centre, newcomer)
    with pytest.raises(AllocationError, match="exists already"):
        project_request_approve(request=request, actor=centre.staff, code="pawsey0001")
    with pytest.raises(AllocationError, match="not a Slurm account name"):
        project_request_approve(request=request, actor=centre.staff, code="bad code")
    with pytest.raises(AllocationError, match="say why the grant differs"):
        project_request_approve(request=request, actor=centre.staff, granted={"testbed CPU": 1})
    with pytest.raises(AllocationError, match="must be a number"):
        project_request_approve(request=request, actor=centre.staff, granted={"testbed CPU": "x"})
    with pytest.raises(AllocationError, match="asked for no SU on testbed GPU"):
        project_request_approve(request=request, actor=centre.staff, granted={"testbed GPU": 5})
    with pytest.raises(AllocationError, match="end after it starts"):
        project_request_approve(
            request=request, actor=centre.staff, period_start=date(2027, 1, 1),
            period_end=date(2026, 1, 1),
        )  # fmt: skip
    request.refresh_from_db()
    assert request.state == State.SUBMITTED
    assert request.project is None
    project_request_approve(
        request=request, actor=centre.staff, granted={"testbed CPU": 20000}, reason="start small"
    )
    assert request.amounts.get().granted_su == Decimal(20000)
    with pytest.raises(AllocationError, match="cannot be approved"):
        project_request_approve(request=request, actor=centre.staff)
    assert Allocation.objects.filter(project=request.project).count() == 1


def test_estimates_are_added_only_by_the_requester_while_editable(centre, newcomer):
    work = Partition.objects.get(cluster=centre.cluster, name="work")
    line = EstimateLine(partition=work, jobs=5, quote=QuoteRequest(nodes=2, hours=Decimal(1)))
    request = _ask(centre, newcomer, pi="bob")
    with pytest.raises(PermissionDenied):
        project_request_estimate_add(request=request, actor=centre.bob, line=line)
    added = project_request_estimate_add(request=request, actor=newcomer, line=line)
    assert added.service_units > 0
    project_request_pi_answer(request=request, actor=centre.bob, accept=True)
    with pytest.raises(AllocationError, match="cannot be edited"):
        project_request_estimate_add(request=request, actor=newcomer, line=line)


@pytest.mark.parametrize(
    "decide",
    [
        lambda request, actor: project_request_approve(request=request, actor=actor),
        lambda request, actor: project_request_reject(request=request, actor=actor, reason="no"),
        lambda request, actor: project_request_changes_ask(
            request=request, actor=actor, reason="more"
        ),
    ],
    ids=["approve", "reject", "ask for changes"],
)
def test_only_approvers_decide_never_the_requester_the_pi_or_anyone_else(centre, newcomer, decide):
    request = _ask(centre, newcomer, pi="bob")
    project_request_pi_answer(request=request, actor=centre.bob, accept=True)
    for actor in (newcomer, centre.bob, centre.carol):
        with pytest.raises(PermissionDenied, match="only centre staff and the centre's project"):
            decide(request, actor)
    request.refresh_from_db()
    assert request.state == State.SUBMITTED
    assert request.transitions.count() == 2

"""When a grant ends: the notices before (days, idempotence, opt-out), the final summary, the
project's status (active, expired, archived, revived, un-archived), every write service refusing
an archived project, and its Slurm accounts, ledger and audit log (docs/allocations.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from auditlog.models import LogEntry
from django.core.exceptions import PermissionDenied

from accounting.clusters.quotes import QuoteRequest
from accounting.ledger.pipeline import jobs_import
from accounting.models import Job, Partition, UsageDaily
from allocations.grants.expiry import (
    final_summary_get,
    grant_expiry_notices_send,
    project_statuses_follow,
    project_unarchive,
)
from allocations.grants.selectors import balance_get
from allocations.grants.services import (
    adjustment_refund,
    adjustment_top_up,
    adjustment_transfer,
    allocation_extend,
    allocation_grant,
)
from allocations.models import (
    Adjustment,
    Allocation,
    AllocationRequest,
    GrantExpiryNotice,
    ProfilingCoefficient,
    RequestTransition,
    Review,
)
from allocations.priorities.services import profiling_coefficient_post
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_estimate_add,
    request_review_start,
    request_submit,
    request_update,
    review_submit,
)
from allocations.slurm.plan import plan_build
from allocations.slurm.sync import desired_state_build
from allocations.tasks import grant_endings_task
from people.mail import mail_settings_get
from projects.access import ProjectReadOnly
from projects.invitations import (
    invitation_accept,
    invitation_revoke,
    invitation_send,
    membership_role_set,
)
from projects.models import Invitation, Membership, Project
from projects.services import membership_add, membership_remove
from tests.allocations.conftest import PERIOD, SAMPLE, SAMPLE_DAY
from tests.allocations.test_round_end_to_end import _round
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

# A grant of pawsey0001 on the CPU pool whose last day is 2026-12-31.
GRANT = (date(2026, 10, 1), date(2027, 1, 1))


def _grant(centre, project=None, pool=None, period=GRANT, amount="400"):
    return allocation_grant(
        project=project or centre.p1, pool=pool or centre.cpu, amount=Decimal(amount),
        period_start=period[0], period_end=period[1], actor=centre.staff,
    )  # fmt: skip


def _notices(today, capture):
    with capture(execute=True):
        return grant_expiry_notices_send(today=today)


@pytest.fixture
def manager(centre):
    manager = UserFactory(username="mallory")
    MembershipFactory(project=centre.p1, user=manager, role=Membership.Role.MANAGER)
    MembershipFactory(project=centre.p1, user=centre.carol)  # a plain member: never told
    return manager


# --- Notices before the end -----------------------------------------------------------------


def test_the_pi_and_managers_are_told_30_14_and_7_days_before_once_each(
    centre, manager, mailoutbox, django_capture_on_commit_callbacks
):
    grant = _grant(centre)
    capture = django_capture_on_commit_callbacks

    assert _notices(date(2026, 11, 30), capture) == []  # 31 days left
    first = _notices(date(2026, 12, 1), capture)
    assert [notice.days_before for notice in first] == [30]
    assert _notices(date(2026, 12, 1), capture) == []  # a second run that day: no one twice
    assert _notices(date(2026, 12, 9), capture) == []  # 22 days left: 30 sent, 14 not yet
    assert [n.days_before for n in _notices(date(2026, 12, 17), capture)] == [14]
    assert [n.days_before for n in _notices(date(2026, 12, 24), capture)] == [7]
    assert _notices(date(2026, 12, 30), capture) == []
    assert _notices(date(2026, 12, 31), capture) == []  # its last day
    assert _notices(date(2027, 1, 1), capture) == []  # ended: no notice after the end

    assert GrantExpiryNotice.objects.filter(allocation=grant).count() == 3
    assert len(mailoutbox) == 3
    mail = mailoutbox[0]
    assert sorted(mail.to) == ["alice@example.org", "mallory@example.org"]  # not carol
    assert mail.subject == "[SU portal] pawsey0001: the grant on testbed CPU ends in 30 days"
    assert "ends in 30 days, on 2026-12-31" in mail.body
    assert "400 SU to pawsey0001 on testbed CPU (2026-10-01 to 2026-12-31)" in mail.body
    assert "/allocations/projects/pawsey0001/" in mail.body
    assert "ends in 7 days, on 2026-12-31" in mailoutbox[2].body


def test_a_late_grant_gets_the_most_urgent_notice_only(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    _grant(centre, period=(date(2026, 12, 1), date(2027, 1, 1)))
    notices = _notices(date(2026, 12, 21), django_capture_on_commit_callbacks)  # 10 days left
    assert [notice.days_before for notice in notices] == [14]
    assert len(mailoutbox) == 1


def test_an_extended_grant_is_announced_again_before_its_new_end(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    grant = _grant(centre)
    capture = django_capture_on_commit_callbacks
    assert [n.days_before for n in _notices(date(2026, 12, 24), capture)] == [7]
    allocation_extend(
        allocation=grant, new_end=date(2027, 4, 1), amount=Decimal(100), actor=centre.staff
    )
    assert _notices(date(2026, 12, 31), capture) == []  # no longer its last day
    # The new last day is 2027-03-31: its notices come again, each once.
    assert [n.days_before for n in _notices(date(2027, 3, 1), capture)] == [30]
    assert _notices(date(2027, 3, 1), capture) == []
    assert [n.days_before for n in _notices(date(2027, 3, 24), capture)] == [7]
    ends = [mail.subject.rsplit(" ends in ", 1)[1] for mail in mailoutbox]
    assert ends == ["7 days", "30 days", "7 days"]


def test_the_notice_days_are_a_setting(
    centre, settings, mailoutbox, django_capture_on_commit_callbacks
):
    settings.PORTAL_GRANT_EXPIRY_NOTICE_DAYS = [60, 3]
    _grant(centre)
    capture = django_capture_on_commit_callbacks
    assert [n.days_before for n in _notices(date(2026, 11, 1), capture)] == [60]
    assert _notices(date(2026, 12, 1), capture) == []  # 30 is no longer a notice
    assert [n.days_before for n in _notices(date(2026, 12, 28), capture)] == [3]


def test_a_grant_continued_by_the_next_one_gets_no_notice(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    _grant(centre)
    _grant(centre, period=(date(2027, 1, 1), date(2028, 1, 1)))
    assert _notices(date(2026, 12, 1), django_capture_on_commit_callbacks) == []
    assert mailoutbox == []


def test_whoever_turned_grant_endings_off_is_not_mailed(
    centre, manager, mailoutbox, django_capture_on_commit_callbacks, client
):
    _grant(centre)
    client.force_login(manager)
    response = client.post(
        "/account/notifications/",
        {"allocation_events": "on", "budget_alerts": "on", "efficiency_summary": "on"},
    )  # grant_endings unticked
    assert response.status_code == 302
    assert mail_settings_get(user=manager).grant_endings is False

    notices = _notices(date(2026, 12, 1), django_capture_on_commit_callbacks)

    assert [mail.to for mail in mailoutbox] == [["alice@example.org"]]
    assert notices[0].recipients == "alice@example.org"


# --- The project's status and the final summary ---------------------------------------------


def _follow(today, capture):
    with capture(execute=True):
        return project_statuses_follow(today=today)


def test_a_project_expires_when_its_last_grant_ends_and_its_pi_gets_the_final_summary(
    centre, manager, mailoutbox, django_capture_on_commit_callbacks
):
    grant = _grant(centre, period=(date(2026, 10, 1), date(2026, 12, 1)))
    _grant(centre, pool=centre.gpu, period=(date(2026, 10, 1), date(2026, 12, 1)), amount="50")
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    adjustment_top_up(
        project=centre.p1, pool=centre.cpu, amount=Decimal("25"), actor=centre.staff,
        reason="more", on=SAMPLE_DAY,
    )  # fmt: skip
    used = sum(
        UsageDaily.objects.filter(project=centre.p1, partition__name="work").values_list(
            "service_units", flat=True
        ),
        Decimal(0),
    )
    assert used > 0
    capture = django_capture_on_commit_callbacks

    assert _follow(date(2026, 11, 30), capture).expired == []  # its last day
    report = _follow(date(2026, 12, 1), capture)

    assert report.expired == ["pawsey0001"]
    centre.p1.refresh_from_db()
    assert (centre.p1.status, centre.p1.status_since) == ("expired", grant.period_end)
    summary = {item.pool: item for item in final_summary_get(project=centre.p1)}
    assert summary["testbed CPU"].granted_su == Decimal("425")
    assert summary["testbed CPU"].used_su == used
    assert summary["testbed CPU"].remaining_su == Decimal("425") - used
    assert [mail.to for mail in mailoutbox] == [["alice@example.org"]]  # the PI only
    body = mailoutbox[0].body
    assert mailoutbox[0].subject == "[SU portal] pawsey0001: final usage summary of its last grant"
    assert "testbed CPU (2026-10-01 to 2026-11-30)" in body
    assert "  granted: 425 SU" in body
    assert f"  used: {used:,.2f} SU" in body
    assert f"  remaining: {Decimal('425') - used:,.2f} SU" in body
    assert "testbed GPU (2026-10-01 to 2026-11-30)" in body
    assert "  granted: 50 SU" in body

    assert _follow(date(2026, 12, 1), capture).expired == []  # once
    assert len(mailoutbox) == 1


def test_an_expired_project_is_archived_after_the_configured_days_and_a_grant_revives_it_before(
    centre, settings, mailoutbox, django_capture_on_commit_callbacks
):
    settings.PORTAL_ARCHIVE_AFTER_DAYS = 90
    _grant(centre, period=(date(2026, 10, 1), date(2026, 12, 1)))
    capture = django_capture_on_commit_callbacks
    _follow(date(2026, 12, 1), capture)

    _grant(centre, period=(date(2026, 12, 15), date(2027, 3, 1)))  # a future grant: revived
    centre.p1.refresh_from_db()
    assert centre.p1.status == "active"
    assert _follow(date(2027, 3, 1), capture).expired == ["pawsey0001"]
    assert _follow(date(2027, 5, 29), capture).archived == []  # 89 days
    assert _follow(date(2027, 5, 30), capture).archived == ["pawsey0001"]
    centre.p1.refresh_from_db()
    assert (centre.p1.status, centre.p1.status_since) == ("archived", date(2027, 5, 30))
    assert _follow(date(2027, 6, 1), capture).archived == []

    # A project whose last grant ended long ago expires and is archived in one run.
    _grant(centre, project=centre.p2, period=(date(2026, 1, 1), date(2026, 2, 1)))
    report = _follow(date(2027, 6, 1), capture)
    assert (report.expired, report.archived) == (["pawsey0002"], ["pawsey0002"])
    assert [mail.subject for mail in mailoutbox][-1].startswith("[SU portal] pawsey0002: final")

    with pytest.raises(ProjectReadOnly, match=r"^pawsey0001 is archived: it is read-only$"):
        _grant(centre, period=(date(2027, 6, 1), date(2028, 6, 1)))


def test_the_daily_task_runs_the_notices_and_the_statuses_and_is_idempotent(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    _grant(centre, period=(date(2026, 10, 1), date(2026, 12, 1)))
    _grant(centre, project=centre.p2, period=(date(2026, 10, 1), date(2026, 12, 20)))
    with django_capture_on_commit_callbacks(execute=True):
        first = grant_endings_task("2026-12-01")
        again = grant_endings_task("2026-12-01")
    assert first == {"notices": 1, "expired": ["pawsey0001"], "archived": [], "revived": []}
    assert again == {"notices": 0, "expired": [], "archived": [], "revived": []}
    assert sorted(mail.subject for mail in mailoutbox) == [
        "[SU portal] pawsey0001: final usage summary of its last grant",
        "[SU portal] pawsey0002: the grant on testbed CPU ends in 18 days",
    ]


def test_the_task_runs_daily_on_the_beat_schedule(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["grant-endings"]
    assert entry["task"] == grant_endings_task.name == "allocations.tasks.grant_endings"
    assert entry["schedule"].hour == {5}
    assert entry["schedule"].day_of_month == set(range(1, 32))


def test_staff_un_archive_a_project_and_no_one_else(centre):
    _grant(centre, period=(date(2026, 10, 1), date(2026, 11, 1)))
    Project.objects.filter(pk=centre.p1.pk).update(status=Project.Status.ARCHIVED)
    centre.p1.refresh_from_db()

    with pytest.raises(PermissionDenied, match="only centre staff un-archive"):
        project_unarchive(project=centre.p1, actor=centre.alice)
    project = project_unarchive(project=centre.p1, actor=centre.staff, today=date(2026, 12, 1))

    assert (project.status, project.status_since) == ("expired", date(2026, 12, 1))
    membership_add(project=project, user=centre.bob, actor=centre.alice)  # writable again


# --- Every write service refuses an archived project ----------------------------------------


@dataclass
class Archived:
    centre: Any
    draft: AllocationRequest
    submitted: AllocationRequest
    under_review: AllocationRequest
    invitation: Invitation
    link: str
    job: Job


@pytest.fixture
def archived(centre):
    """pawsey0001 with a grant, jobs, requests in each state and a pending invitation, then
    archived."""
    for project in (centre.p1, centre.p2):
        _grant(centre, project=project, period=PERIOD)
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    amounts = {centre.cpu: Decimal("2")}
    # An application in each of three rounds (one per project and round): a draft, one
    # submitted, one under review.
    draft, submitted, under_review = (
        request_create(
            round_=_round(centre, name=name),
            project=centre.p1,
            actor=centre.alice,
            amounts=amounts,
        )
        for name in ("2027 merit round", "2027 second call", "2027 third call")
    )
    for request in (submitted, under_review):
        request_submit(request=request, actor=centre.alice)
    request_review_start(request=under_review, actor=centre.chair)
    sent = invitation_send(project=centre.p1, email="dave@example.org", role="member",
                           actor=centre.alice)  # fmt: skip
    MembershipFactory(project=centre.p1, user=centre.carol)
    Project.objects.filter(pk=centre.p1.pk).update(status=Project.Status.ARCHIVED)
    for item in (centre.p1, draft, submitted, under_review):
        item.refresh_from_db()
    job = Job.objects.filter(project=centre.p1, partition__name="work", service_units__gt=0)
    return Archived(
        centre=centre, draft=draft, submitted=submitted, under_review=under_review,
        invitation=sent.invitation, link=sent.link, job=job.first(),
    )  # fmt: skip


def _state() -> tuple[Any, ...]:
    return (
        Membership.objects.count(),
        Invitation.objects.filter(accepted_at=None, revoked_at=None).count(),
        Allocation.objects.count(),
        Adjustment.objects.count(),
        AllocationRequest.objects.count(),
        RequestTransition.objects.count(),
        Review.objects.count(),
        ProfilingCoefficient.objects.count(),
        *AllocationRequest.objects.order_by("pk").values_list("state", "justification"),
    )


WRITES = {
    "membership_add": lambda a: membership_add(
        project=a.centre.p1, user=a.centre.bob, actor=a.centre.alice
    ),
    "membership_remove": lambda a: membership_remove(
        project=a.centre.p1, user=a.centre.carol, actor=a.centre.alice
    ),
    "a member leaving": lambda a: membership_remove(
        project=a.centre.p1, user=a.centre.carol, actor=a.centre.carol
    ),
    "membership_role_set": lambda a: membership_role_set(
        project=a.centre.p1, user=a.centre.carol, role="manager", actor=a.centre.alice
    ),
    "invitation_send": lambda a: invitation_send(
        project=a.centre.p1, email="eve@example.org", role="member", actor=a.centre.alice
    ),
    "invitation_accept": lambda a: invitation_accept(
        token=a.link.rstrip("/").rsplit("/", 1)[1], user=UserFactory.create(username="dave")
    ),
    "invitation_revoke": lambda a: invitation_revoke(
        invitation=a.invitation, actor=a.centre.alice
    ),
    "allocation_grant": lambda a: _grant(a.centre, period=(date(2027, 10, 1), date(2028, 10, 1))),
    "adjustment_refund": lambda a: adjustment_refund(
        project=a.centre.p1, pool=a.centre.cpu, actor=a.centre.staff, reason="r", job=a.job,
        on=SAMPLE_DAY,
    ),
    "adjustment_top_up": lambda a: adjustment_top_up(
        project=a.centre.p1, pool=a.centre.cpu, amount=Decimal(5), actor=a.centre.staff,
        reason="r", on=SAMPLE_DAY,
    ),
    "adjustment_transfer from it": lambda a: adjustment_transfer(
        source=a.centre.p1, target=a.centre.p2, pool=a.centre.cpu, amount=Decimal(1),
        actor=a.centre.alice, reason="r", on=SAMPLE_DAY,
    ),
    "adjustment_transfer to it": lambda a: adjustment_transfer(
        source=a.centre.p2, target=a.centre.p1, pool=a.centre.cpu, amount=Decimal(1),
        actor=a.centre.bob, reason="r", on=SAMPLE_DAY,
    ),
    "request_create": lambda a: request_create(
        round_=None, project=a.centre.p1, actor=a.centre.alice, kind="top_up",
        amounts={a.centre.cpu: Decimal(2)},
    ),
    "request_update": lambda a: request_update(
        request=a.draft, actor=a.centre.alice, justification="more"
    ),
    "request_estimate_add": lambda a: request_estimate_add(
        request=a.draft, actor=a.centre.alice, jobs=1,
        partition=Partition.objects.get(cluster=a.centre.cluster, name="work"),
        quote=QuoteRequest(nodes=1, hours=Decimal(1)),
    ),
    "request_submit": lambda a: request_submit(request=a.draft, actor=a.centre.alice),
    "request_review_start": lambda a: request_review_start(
        request=a.submitted, actor=a.centre.chair
    ),
    "review_submit": lambda a: review_submit(
        request=a.under_review, reviewer=a.centre.reviewer, score=4
    ),
    "request_decide": lambda a: request_decide(
        request=a.under_review, actor=a.centre.chair, granted={a.centre.cpu: Decimal(2)}
    ),
    "profiling_coefficient_post": lambda a: profiling_coefficient_post(
        cluster=a.centre.cluster, project=a.centre.p1, k_prof="1.2", posted_by=a.centre.staff
    ),
}  # fmt: skip


@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_service_refuses_an_archived_project_and_changes_nothing(archived, write):
    before = _state()
    with pytest.raises(ProjectReadOnly) as refused:
        WRITES[write](archived)
    assert str(refused.value) == "pawsey0001 is archived: it is read-only"
    assert _state() == before


def test_an_archived_project_keeps_its_ledger_balances_and_audit_log(archived):
    centre = archived.centre
    assert Job.objects.filter(project=centre.p1).count() > 0
    assert UsageDaily.objects.filter(project=centre.p1).exists()
    assert balance_get(project=centre.p1, pool=centre.cpu, on=SAMPLE_DAY).used_su > 0
    project_statuses_follow(today=date(2026, 12, 1))  # nothing to do for an archived project
    assert LogEntry.objects.filter(additional_data__project="pawsey0001").count() > 0


def test_the_plan_removes_an_archived_projects_account_and_holds_an_expired_one(centre):
    for project in (centre.p1, centre.p2):
        _grant(centre, project=project, period=PERIOD)
    provisioned = desired_state_build(cluster=centre.cluster).accounts  # Slurm as the plan left it
    assert {"pawsey0001", "pawsey0002"} <= set(provisioned)
    Project.objects.filter(pk=centre.p1.pk).update(status=Project.Status.ARCHIVED)
    Project.objects.filter(pk=centre.p2.pk).update(status=Project.Status.EXPIRED)

    desired = desired_state_build(cluster=centre.cluster).accounts
    actions = plan_build(desired=desired, actual=provisioned)

    assert "pawsey0001" not in desired
    removed = [(a.verb, a.account, a.user) for a in actions if a.account == "pawsey0001"]
    assert removed == [
        ("delete", "pawsey0001", "alice"),
        ("delete", "pawsey0001", ""),
    ]
    assert all(action.applied for action in actions if action.account == "pawsey0001")
    held = [a for a in actions if a.account == "pawsey0002"]
    assert [(a.verb, dict(a.after)) for a in held] == [("modify", {"GrpTRESMins": "billing=0"})]


def test_notices_and_statuses_leave_archived_projects_alone(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    _grant(centre)
    Project.objects.filter(pk=centre.p1.pk).update(status=Project.Status.ARCHIVED)
    assert _notices(date(2026, 12, 1), django_capture_on_commit_callbacks) == []
    assert _follow(date(2027, 6, 1), django_capture_on_commit_callbacks).archived == []
    assert mailoutbox == []

"""slurm_sync on the real testbed: projects, members and limits planned from the portal, applied
by one sacctmgr run, checked against what ``sacctmgr show associations`` then shows."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from accounting.clusters.charging import NodeUsage, charge
from accounting.models import Cluster
from allocations.grants.services import adjustment_top_up, allocation_grant
from allocations.models import SlurmDriftCheck, SlurmSyncPlan, SlurmSyncRequest
from allocations.slurm.sync import (
    slurm_sync_apply,
    slurm_sync_approve,
    slurm_sync_check,
    slurm_sync_plan,
)
from allocations.tasks import slurm_sync_check_task
from projects.models import Project, ResourcePool
from projects.services import membership_remove
from tests.conftest import needs_real_services
from tests.factories import (
    MembershipFactory,
    ProjectFactory,
    ResourcePoolFactory,
    UserFactory,
    example_cluster,
)
from tests.slurm.conftest import unique_name, wait_for
from tests.slurm_testbed import Testbed

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

ASSOCIATION_FIELDS = "account,user,parentname,grptresmins"


# Parent accounts the current test made (one per pool); its accounts are all under them.
_PARENTS: list[str] = []


@pytest.fixture
def on_testbed(
    slurm_testbed: Testbed, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Path]:
    """The portal's sacctmgr talks to the testbed; every run of it is logged (one line each) in
    the returned file by a wrapper that then runs the real sacctmgr. Afterwards the test's
    accounts go, in one command per parent account (sacctmgr deletes the subtree): the next
    test's portal does not know them and would plan their deletion one by one."""
    for name, value in slurm_testbed.env.items():
        monkeypatch.setenv(name, value)
    calls = tmp_path / "sacctmgr-calls"
    wrapper = tmp_path / "bin" / "sacctmgr"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec /usr/bin/sacctmgr "$@"\n')
    wrapper.chmod(0o755)
    calls.touch()
    from django.conf import settings

    monkeypatch.setattr(settings, "SLURM_BIN_DIR", str(wrapper.parent))
    yield calls
    while _PARENTS:
        slurm_testbed.run(
            "sacctmgr", "-i", "delete", "account", "where", f"name={_PARENTS.pop()}",
            f"cluster={slurm_testbed.cluster_name}", check=False,
        )  # fmt: skip


def _associations(testbed: Testbed, *accounts: str) -> set[str]:
    shown = testbed.run(
        "sacctmgr", "-n", "-P", "show", "associations", "where",
        f"account={','.join(accounts)}", f"cluster={testbed.cluster_name}",
        f"format={ASSOCIATION_FIELDS}",
    )  # fmt: skip
    return set(shown.stdout.split())


@dataclass
class Centre:
    cluster: Cluster
    pool: ResourcePool
    staff: User
    projects: list[tuple[Project, list[User]]]  # each with its members, the PI first


def _centre(
    *, projects: int = 1, members: int = 2, su: str = "100", partitions: tuple[str, ...] = ("work",)
) -> Centre:
    """Projects with a grant on a pool of the testbed cluster under a parent account of their
    own; names unique to this run (the testbed keeps its database between runs)."""
    cluster = example_cluster("slurm-testbed")
    staff = UserFactory.create(is_staff=True)
    pool = ResourcePoolFactory.create(
        cluster=cluster, name=unique_name("pool"), partitions=list(partitions),
        slurm_parent_account=unique_name("inst"),
    )  # fmt: skip
    _PARENTS.append(pool.slurm_parent_account)
    today = timezone.now().date()
    made = []
    for _ in range(projects):
        project = ProjectFactory.create(
            code=unique_name("p"), pi=UserFactory.create(username=unique_name("u"))
        )
        people = [UserFactory.create(username=unique_name("u")) for _ in range(members - 1)]
        for person in people:
            MembershipFactory.create(project=project, user=person)
        allocation_grant(
            project=project, pool=pool, amount=Decimal(su), actor=staff,
            period_start=today.replace(day=1), period_end=_months_later(today, 3),
        )  # fmt: skip
        assert project.pi is not None
        made.append((project, [project.pi, *people]))
    return Centre(cluster=cluster, pool=pool, staff=staff, projects=made)


def _months_later(day: date, months: int) -> date:
    month = day.month - 1 + months
    return date(day.year + month // 12, month % 12 + 1, 1)


def _apply(plan: SlurmSyncPlan) -> SlurmSyncPlan:
    return slurm_sync_apply(plan=slurm_sync_approve(plan=plan, actor=None, enqueue=False))


def test_a_granted_project_becomes_an_account_with_its_members_and_su_as_billing_minutes(
    slurm_testbed, on_testbed
):
    centre = _centre(su="100")
    cluster, pool = centre.cluster, centre.pool
    ((project, people),) = centre.projects

    planned = slurm_sync_plan(cluster=cluster)
    plan = _apply(planned.plan)

    assert plan.status == SlurmSyncPlan.Status.APPLIED, (plan.error, plan.output)
    assert all(action.done for action in plan.actions.all())
    parent = pool.slurm_parent_account
    # 100 SU in the current quarter's budget period: 60 billing-minutes per SU.
    period_su = project.allocations.get().budget_periods.order_by("start").first().budget_su
    minutes = int(period_su * 60)
    assert _associations(slurm_testbed, project.code, parent) == {
        f"{parent}||root|",
        f"{project.code}||{parent}|billing={minutes}",
        *{f"{project.code}|{person.username}||" for person in people},
    }
    # Every action is in the audit log: planned, then done.
    entries = LogEntry.objects.get_for_objects(plan.actions.all())
    assert entries.filter(action=LogEntry.Action.CREATE).count() == plan.actions.count()
    assert entries.filter(action=LogEntry.Action.UPDATE).count() == plan.actions.count()
    assert {
        entry.changes_dict["done"][1] for entry in entries.filter(action=LogEntry.Action.UPDATE)
    } == {"True"}
    # One sacctmgr run wrote the whole plan; the others only read.
    writes = [line for line in on_testbed.read_text().splitlines() if line.startswith("-i")]
    assert writes == ["-i"]

    again = slurm_sync_plan(cluster=cluster)
    assert again.plan is None
    assert [action for action in again.actions if action.applied] == []


def test_plan_now_on_the_page_when_slurm_matches_the_portal_says_nothing_to_change(
    slurm_testbed, on_testbed, client, django_capture_on_commit_callbacks
):
    """The staff page's "Plan now" after an apply: the real Slurm matches the portal, and the
    page says so (it said "No plan waiting." and nothing else)."""
    centre = _centre(su="100")
    _apply(slurm_sync_plan(cluster=centre.cluster).plan)
    client.force_login(UserFactory.create(is_staff=True))

    with django_capture_on_commit_callbacks(execute=True):  # the task runs eagerly here
        client.post(
            reverse("allocations:slurm-sync-refresh", args=[centre.cluster.name]),
            {"what": "plan"},
        )
    page = client.get(reverse("allocations:slurm-sync")).content.decode()

    assert SlurmSyncRequest.objects.get().outcome == SlurmSyncRequest.Outcome.NOTHING
    assert "nothing to change: Slurm matches the portal" in page


def test_removing_a_member_deletes_their_association_and_a_top_up_raises_the_limit(
    slurm_testbed, on_testbed
):
    centre = _centre(members=3)
    cluster, pool, staff = centre.cluster, centre.pool, centre.staff
    ((project, people),) = centre.projects
    _apply(slurm_sync_plan(cluster=cluster).plan)
    leaving = people[2]

    membership_remove(project=project, user=leaving, actor=staff)
    adjustment_top_up(project=project, pool=pool, amount=Decimal("2.5"), actor=staff, reason="t")
    plan = slurm_sync_plan(cluster=cluster).plan

    limit_before = next(
        line.split("|")[3]
        for line in _associations(slurm_testbed, project.code)
        if line.split("|")[1] == ""
    )
    minutes_before = int(limit_before.removeprefix("billing="))
    assert [(a.verb, a.account, a.user, a.before, a.after) for a in plan.actions.all()] == [
        (
            "modify", project.code, "", {"GrpTRESMins": limit_before},
            {"GrpTRESMins": f"billing={minutes_before + 150}"},
        ),
        ("delete", project.code, leaving.username, {}, {}),
    ]  # fmt: skip
    assert _apply(plan).status == SlurmSyncPlan.Status.APPLIED
    shown = _associations(slurm_testbed, project.code)
    assert f"{project.code}|{leaving.username}||" not in shown
    assert f"{project.code}|{people[1].username}||" in shown
    assert f"{project.code}||{pool.slurm_parent_account}|billing={minutes_before + 150}" in shown


def test_with_slurm_unreachable_the_plan_stays_approved_and_nothing_is_run(
    slurm_testbed, on_testbed, monkeypatch, tmp_path
):
    centre = _centre()
    cluster = centre.cluster
    ((project, _),) = centre.projects
    plan = slurm_sync_approve(plan=slurm_sync_plan(cluster=cluster).plan, actor=None, enqueue=False)
    # slurmdbd "moves away": the same slurm.conf with its port pointing where nothing listens.
    conf = slurm_testbed.slurm_conf.read_text().replace(
        f"AccountingStoragePort={slurm_testbed.ports.slurmdbd}", "AccountingStoragePort=9"
    )
    dead = tmp_path / "slurm.conf"
    dead.write_text(conf)
    monkeypatch.setenv("SLURM_CONF", str(dead))

    plan = slurm_sync_apply(plan=plan)

    assert plan.status == SlurmSyncPlan.Status.APPROVED
    assert "Slurm could not be read, nothing was run" in plan.error
    assert "Connection refused" in plan.error
    assert all(action.done is None for action in plan.actions.all())
    assert not any(line.startswith("-i") for line in on_testbed.read_text().splitlines())
    assert _associations(slurm_testbed, project.code) == set()

    monkeypatch.setenv("SLURM_CONF", str(slurm_testbed.slurm_conf))
    assert slurm_sync_apply(plan=plan).status == SlurmSyncPlan.Status.APPLIED
    assert len(_associations(slurm_testbed, project.code)) == 3


def test_a_plan_slurm_half_refuses_fails_and_says_which_actions_were_not_done(
    slurm_testbed, on_testbed
):
    centre = _centre(projects=2, members=1)
    cluster = centre.cluster
    (good, _), (bad, _) = centre.projects
    # The second project gets a QOS Slurm does not know: its account cannot be created, nor
    # its user added; the first project is created all the same.
    bad_pool = ResourcePoolFactory.create(
        cluster=cluster, name=unique_name("pool"), slurm_qos="nosuchqos", partitions=["gpu"],
        slurm_account_suffix="-bad",
    )  # fmt: skip
    bad.allocations.update(pool=bad_pool)
    bad_code = f"{bad.code}-bad"

    plan = _apply(slurm_sync_plan(cluster=cluster).plan)

    assert plan.status == SlurmSyncPlan.Status.FAILED
    assert plan.exit_code != 0
    not_done = {str(action) for action in plan.actions.filter(done=False)}
    assert not_done == {
        f"create account {bad_code}",
        f"create user {bad.pi.username} in {bad_code} (partition gpu)",
    }
    assert f"2 of {plan.actions.count()} actions not done" in plan.error
    assert _associations(slurm_testbed, bad_code) == set()
    assert len(_associations(slurm_testbed, good.code)) == 2


def test_the_check_finds_a_hand_made_account_and_a_changed_limit_and_deletes_only_when_told(
    slurm_testbed, on_testbed
):
    centre = _centre()
    cluster = centre.cluster
    ((project, _),) = centre.projects
    _apply(slurm_sync_plan(cluster=cluster).plan)
    hand_made = unique_name("hand")
    slurm_testbed.run("sacctmgr", "-i", "add", "account", hand_made, "description=by hand")
    slurm_testbed.run("sacctmgr", "-i", "add", "user", "root", f"account={hand_made}")
    slurm_testbed.run(
        "sacctmgr", "-i", "modify", "account", project.code, "set", "GrpTRESMins=billing=1"
    )

    check = slurm_sync_check(cluster=cluster)
    printed = StringIO()
    call_command("slurm_sync", cluster=cluster.name, check=True, json=True, stdout=printed)

    drift = {(item["verb"], item["account"], item["user"]): item for item in check.drift}
    changed = drift[("modify", project.code, "")]
    assert changed["before"] == {"GrpTRESMins": "billing=1"}
    assert changed["applied"] is True
    assert changed["commands"][0].startswith(f"modify account where name={project.code}")
    assert drift[("delete", hand_made, "")]["applied"] is False
    assert drift[("delete", hand_made, "root")]["applied"] is False
    assert drift[("delete", hand_made, "")]["commands"] == [
        f"delete account where name={hand_made} cluster={slurm_testbed.cluster_name}"
    ]
    assert json.loads(printed.getvalue())["actions"] == check.drift

    plan = _apply(slurm_sync_plan(cluster=cluster).plan)
    assert hand_made not in {action.account for action in plan.actions.all()}
    assert _associations(slurm_testbed, hand_made) == {f"{hand_made}||root|", f"{hand_made}|root||"}

    told = _apply(slurm_sync_plan(cluster=cluster, delete_unmanaged=True).plan)
    assert told.status == SlurmSyncPlan.Status.APPLIED
    assert _associations(slurm_testbed, hand_made) == set()


def test_the_command_plans_applies_and_then_has_nothing_to_do(slurm_testbed, on_testbed):
    centre = _centre()
    cluster = centre.cluster
    ((project, _),) = centre.projects

    dry = StringIO()
    call_command("slurm_sync", cluster=cluster.name, dry_run=True, json=True, stdout=dry)
    applied = StringIO()
    call_command("slurm_sync", cluster=cluster.name, apply=True, stdout=applied)
    again = StringIO()
    call_command("slurm_sync", cluster=cluster.name, stdout=again)

    planned = json.loads(dry.getvalue())
    assert planned["status"] == "dry run"
    assert planned["plan"] is None
    assert {"create"} == {
        item["verb"] for item in planned["actions"] if item["account"] == project.code
    }
    assert ", applied" in applied.getvalue().splitlines()[0]
    assert f"create account {project.code}" in applied.getvalue()
    assert "0 actions, nothing to do" in again.getvalue().splitlines()[0]
    assert len(_associations(slurm_testbed, project.code)) == 3


def test_the_command_says_so_when_slurm_cannot_be_read(
    slurm_testbed, on_testbed, monkeypatch, tmp_path
):
    cluster = _centre().cluster
    dead = tmp_path / "slurm.conf"
    dead.write_text(
        slurm_testbed.slurm_conf.read_text().replace(
            f"AccountingStoragePort={slurm_testbed.ports.slurmdbd}", "AccountingStoragePort=9"
        )
    )
    monkeypatch.setenv("SLURM_CONF", str(dead))
    before = SlurmSyncPlan.objects.count()

    with pytest.raises(CommandError, match="Slurm could not be read, nothing planned"):
        call_command("slurm_sync", cluster=cluster.name)
    assert SlurmSyncPlan.objects.count() == before


def test_an_exhausted_project_is_held_by_slurm_and_runs_after_a_top_up(slurm_testbed, on_testbed):
    centre = _centre(su="0.001", members=1)
    cluster, pool, staff = centre.cluster, centre.pool, centre.staff
    ((project, _),) = centre.projects
    # The tests submit jobs as root: root is the project's member.
    MembershipFactory.create(project=project, user=UserFactory.create(username="root"))
    assert _apply(slurm_sync_plan(cluster=cluster).plan).status == SlurmSyncPlan.Status.APPLIED

    submitted = slurm_testbed.run(
        "sbatch", "--parsable", f"--account={project.code}", "--output=/dev/null",
        "--time=1", "--wrap", "true",
    )  # fmt: skip
    job_id = submitted.stdout.strip().split(";")[0]
    reason = wait_for(
        "the job to be held",
        lambda: _pending_reason(slurm_testbed, job_id) or None,
    )
    assert reason == "AssocGrpBillingMinutes"

    adjustment_top_up(project=project, pool=pool, amount=Decimal(10), actor=staff, reason="t")
    assert _apply(slurm_sync_plan(cluster=cluster).plan).status == SlurmSyncPlan.Status.APPLIED
    slurm_testbed.run("scontrol", "reconfigure")  # nudge the scheduler instead of waiting for it
    # Ended in slurmdbd too: sacctmgr refuses to delete an association with jobs it thinks
    # active, and the next test's plan deletes this project's account.
    wait_for("the job to end in sacct", lambda: _ended(slurm_testbed, job_id))


def _pending_reason(testbed: Testbed, job_id: str) -> str:
    shown = testbed.run("squeue", "-h", "-j", job_id, "-o", "%T %r", check=False).stdout.split()
    if len(shown) == 2 and shown[0] == "PENDING" and shown[1] not in ("None", "Priority"):
        return shown[1]
    return ""


def _ended(testbed: Testbed, job_id: str) -> bool | None:
    shown = testbed.run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,End").stdout.split()
    return (
        True if shown and shown[0].startswith("COMPLETED|") and "Unknown" not in shown[0] else None
    )


@pytest.mark.parametrize("projects", [20])
def test_a_small_centre_is_planned_and_applied_in_seconds(slurm_testbed, on_testbed, projects):
    cluster = _centre(projects=projects, members=5).cluster
    stale = slurm_sync_plan(cluster=cluster).plan  # leftovers of earlier tests go first
    if stale is not None:
        _apply(stale)
    on_testbed.write_text("")
    # A second pool of the cluster: an account of its own per project (-p2), users in gpu.
    second = _centre(projects=projects, members=5, partitions=("gpu",))
    more, suffix = second.projects, second.pool.slurm_account_suffix

    started = time.monotonic()
    plan = slurm_sync_plan(cluster=cluster).plan
    planned = time.monotonic()
    plan = _apply(plan)
    applied = time.monotonic()

    assert plan.status == SlurmSyncPlan.Status.APPLIED, plan.error
    # The pool's parent, and each account and its 5 users.
    assert plan.actions.count() == 1 + projects * 6, [str(a) for a in plan.actions.all()]
    assert [line.split()[0] for line in on_testbed.read_text().splitlines()].count("-i") == 1
    for project, people in more[:3]:
        assert len(_associations(slurm_testbed, project.code + suffix)) == 1 + len(people)
    print(
        f"\n{projects} projects, {plan.actions.count()} actions: plan {planned - started:.2f}s,"
        f" apply {applied - planned:.2f}s"
    )


def _billing_used(testbed: Testbed, account: str) -> tuple[str, int]:
    """The account's GrpTRESMins billing limit and the billing-minutes Slurm counts against it
    (``billing=LIMIT(USED)`` in ``scontrol show assoc_mgr``)."""
    shown = testbed.run("scontrol", "show", "assoc_mgr", f"accounts={account}", "flags=assoc")
    # One block per association, the account's own with an empty UserName.
    block = next(
        block
        for block in shown.stdout.split("ClusterName=")
        if f" Account={account} UserName= " in block
    )
    limits = next(line for line in block.splitlines() if "GrpTRESMins=" in line)
    billing = next(item for item in limits.split(",") if item.startswith("billing="))
    limit, used = billing.removeprefix("billing=").rstrip(")").split("(")
    return limit, int(used)


def test_slurm_counts_a_jobs_charge_as_60_billing_minutes_per_su_and_a_new_limit_starts_at_zero(
    slurm_testbed, on_testbed
):
    centre = _centre(su="1000", members=1)
    ((project, _),) = centre.projects
    MembershipFactory.create(project=project, user=UserFactory.create(username="root"))
    _apply(slurm_sync_plan(cluster=centre.cluster).plan)

    job_id = slurm_testbed.run(
        "sbatch", "--parsable", f"--account={project.code}", "--partition=work", "--exclusive",
        "--output=/dev/null", "--wrap", "sleep 8",
    ).stdout.strip()  # fmt: skip
    wait_for("the job to end in sacct", lambda: _ended(slurm_testbed, job_id))
    elapsed = int(
        slurm_testbed.run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "ElapsedRaw").stdout
    )
    # A whole work node: the portal's rate is 128 SU per hour (eq 1), Slurm's billing 128.
    work = next(p for p in slurm_testbed.definition.partitions if p.name == "work").charging
    charged = charge(
        work, [NodeUsage(cores=128, memory_mb=245000, gpus=0)], elapsed_seconds=elapsed
    ).service_units
    limit, used = _billing_used(slurm_testbed, project.code)
    assert used == int(charged * 60)  # Slurm truncates billing-seconds to whole minutes

    adjustment_top_up(
        project=project, pool=centre.pool, amount=Decimal(5), actor=centre.staff, reason="t"
    )
    assert _apply(slurm_sync_plan(cluster=centre.cluster).plan).status == "applied"
    new_limit, used_after = _billing_used(slurm_testbed, project.code)
    assert (int(new_limit) - int(limit), used_after) == (300, 0)


def test_on_a_pool_that_allows_it_a_top_up_sets_the_limit_by_itself_and_a_new_member_waits(
    slurm_testbed, on_testbed, django_capture_on_commit_callbacks
):
    centre = _centre(su="100", members=1)
    ((project, _),) = centre.projects
    provisioned = _apply(slurm_sync_plan(cluster=centre.cluster).plan)
    limit, _ = _billing_used(slurm_testbed, project.code)
    centre.pool.slurm_limits_auto = True
    centre.pool.save()
    newcomer = UserFactory.create(username=unique_name("u"))
    MembershipFactory.create(project=project, user=newcomer)

    with django_capture_on_commit_callbacks(execute=True):
        adjustment_top_up(
            project=project, pool=centre.pool, amount=Decimal(1), actor=centre.staff, reason="t"
        )

    assert _billing_used(slurm_testbed, project.code)[0] == str(int(limit) + 60)
    applied = SlurmSyncPlan.objects.get(status=SlurmSyncPlan.Status.APPLIED, pk__gt=provisioned.pk)
    assert [str(action) for action in applied.actions.all()] == [f"modify account {project.code}"]
    waiting = SlurmSyncPlan.objects.get(status=SlurmSyncPlan.Status.PENDING)
    assert [str(action) for action in waiting.actions.all()] == [
        f"create user {newcomer.username} in {project.code} (partition work)"
    ]
    assert f"{project.code}|{newcomer.username}||" not in _associations(slurm_testbed, project.code)


def test_approving_on_the_page_applies_the_plan_on_slurm_through_the_task(
    slurm_testbed, on_testbed, client, django_capture_on_commit_callbacks
):
    centre = _centre()
    ((project, people),) = centre.projects
    plan = slurm_sync_plan(cluster=centre.cluster).plan
    client.force_login(centre.staff)

    with django_capture_on_commit_callbacks(execute=True):  # the task runs here (eager Celery)
        response = client.post(reverse("allocations:slurm-sync-approve", args=[plan.pk]))

    assert response.status_code == 302
    plan.refresh_from_db()
    assert (plan.status, plan.approved_by) == (SlurmSyncPlan.Status.APPLIED, centre.staff)
    assert len(_associations(slurm_testbed, project.code)) == 1 + len(people)
    page = client.get(reverse("allocations:slurm-sync")).content.decode()
    assert f"Plan {plan.pk}:" in page


def test_the_hourly_check_records_the_drift_of_each_cluster_with_pools(slurm_testbed, on_testbed):
    centre = _centre()
    ((project, _),) = centre.projects

    result = slurm_sync_check_task()

    check = SlurmDriftCheck.objects.get(cluster=centre.cluster)
    assert check.error == ""
    assert result == {centre.cluster.name: f"{len(check.drift)} differences"}
    assert ("create", project.code, "") in {
        (item["verb"], item["account"], item["user"]) for item in check.drift
    }


def _completed(testbed: Testbed, account: str, count: int) -> bool | None:
    """True once ``count`` jobs of ``account`` show COMPLETED with their partition in sacct."""
    shown = testbed.run(
        "sacct", "-X", "-n", "-P", f"--accounts={account}", "--starttime=now-1hours",
        "-o", "State,Partition",
    ).stdout.split()  # fmt: skip
    return True if sum(line == "COMPLETED|work" for line in shown) == count else None


def test_the_whole_way_round_grant_provision_run_import_and_agree_with_slurm(
    slurm_testbed, on_testbed
):
    """Issue 17, item 5, in one piece: a project granted in the portal is provisioned by
    slurm_sync; a batch job and an interactive srun really run under its account;
    ``import_sacct --run-sacct`` books them; the balance drops by exactly their charge, and the
    billing-minutes Slurm counted against the limit are that charge x 60, less Slurm's
    truncation to whole minutes. (Held when used up, and run again after a top-up:
    test_an_exhausted_project_is_held_by_slurm_and_runs_after_a_top_up.)"""
    from accounting.models import Job
    from allocations.grants.selectors import balance_get

    centre = _centre(su="50", members=1)
    ((project, _),) = centre.projects
    MembershipFactory.create(project=project, user=UserFactory.create(username="root"))
    assert _apply(slurm_sync_plan(cluster=centre.cluster).plan).status == "applied"
    before = balance_get(project=project, pool=centre.pool)
    assert before is not None
    since = timezone.now() - timedelta(minutes=1)

    job_id = slurm_testbed.run(
        "sbatch", "--parsable", f"--account={project.code}", "--partition=work", "--ntasks=8",
        "--output=/dev/null", "--wrap", "sleep 4",
    ).stdout.strip()  # fmt: skip
    slurm_testbed.run("srun", f"--account={project.code}", "--partition=work", "--ntasks=2",
                      "sleep", "2")  # fmt: skip  # interactive: returns when it has run
    wait_for("the batch job to end in sacct", lambda: _ended(slurm_testbed, job_id))
    wait_for(
        "both jobs in sacct, with their partition",
        lambda: _completed(slurm_testbed, project.code, 2),
    )

    out = StringIO()
    call_command(
        "import_sacct", "--run-sacct", "--cluster", centre.cluster.name,
        "--since", since.isoformat(), "--json", stdout=out,
    )  # fmt: skip
    booked = list(Job.objects.filter(project=project))
    assert len(booked) == 2
    assert all(job.charge_state == Job.ChargeState.CHARGED for job in booked)
    charged = sum(job.service_units for job in booked)
    assert charged > 0
    after = balance_get(project=project, pool=centre.pool)
    assert after is not None
    assert before.remaining_su - after.remaining_su == charged

    _, used = _billing_used(slurm_testbed, project.code)
    # Slurm adds each job's billing-seconds and shows whole minutes: at most one short.
    assert int(charged * 60) - 1 <= used <= int(charged * 60)


def test_each_pool_is_its_own_account_and_limit_a_spent_gpu_pool_holds_gpu_jobs_alone_and_back(
    slurm_testbed, on_testbed
):
    """One Slurm limit per pool (issue 27, item 7), Pawsey's layout: the CPU pool's account is
    the project's code, associated in work only; the GPU pool's is ``CODE-gpu``, associated in
    gpu only, each with the GrpTRESMins of its own pool's SU. Project ``spent_gpu`` has used up
    its GPU pool and ``spent_cpu`` its CPU pool: Slurm holds the GPU job of the first and the
    CPU job of the second, and runs the other pool's job of each; neither account runs in the
    other's partition. The import books each job back to its project and the job of
    ``CODE-gpu`` to the GPU pool, by the same account rule."""
    from accounting.models import Job, QuarantinedRecord
    from allocations.grants.selectors import balance_get

    cluster = example_cluster("slurm-testbed")
    staff = UserFactory.create(is_staff=True)
    parent = unique_name("inst")
    _PARENTS.append(parent)
    cpu, gpu = (
        ResourcePoolFactory.create(
            cluster=cluster, name=unique_name("pool"), partitions=[partition],
            slurm_parent_account=parent, slurm_account_suffix=suffix,
        )
        for partition, suffix in (("work", ""), ("gpu", "-gpu"))
    )  # fmt: skip
    today = timezone.now().date()
    spent_gpu, spent_cpu = (
        ProjectFactory.create(
            code=unique_name("p"), pi=UserFactory.create(username=unique_name("u"))
        )
        for _ in range(2)
    )
    for project, cpu_su, gpu_su in ((spent_gpu, "1000", "0.001"), (spent_cpu, "0.001", "1000")):
        MembershipFactory.create(project=project, user=UserFactory.create(username="root"))
        for pool, su in ((cpu, cpu_su), (gpu, gpu_su)):
            allocation_grant(
                project=project, pool=pool, amount=Decimal(su), actor=staff,
                period_start=today.replace(day=1), period_end=_months_later(today, 3),
            )  # fmt: skip

    plan = _apply(slurm_sync_plan(cluster=cluster).plan)

    assert plan.status == SlurmSyncPlan.Status.APPLIED, (plan.error, plan.output)
    accounts = {
        code: project
        for project in (spent_gpu, spent_cpu)
        for code in (project.code, f"{project.code}-gpu")
    }
    shown = slurm_testbed.run(
        "sacctmgr", "-n", "-P", "show", "associations", "where", f"account={','.join(accounts)}",
        f"cluster={slurm_testbed.cluster_name}", "format=account,user,partition,grptresmins",
    ).stdout.split()  # fmt: skip

    def minutes(project: Project, pool: ResourcePool) -> int:
        grant = pool.allocations.get(project=project)
        return int(grant.budget_periods.order_by("start")[0].budget_su * 60)

    assert set(shown) == {
        f"{spent_gpu.code}|||billing={minutes(spent_gpu, cpu)}",
        f"{spent_gpu.code}-gpu|||billing=0",
        f"{spent_cpu.code}|||billing=0",
        f"{spent_cpu.code}-gpu|||billing={minutes(spent_cpu, gpu)}",
        *(
            f"{code}|{user}|{'gpu' if code.endswith('-gpu') else 'work'}|"
            for code, project in accounts.items()
            for user in ("root", project.pi.username)
        ),
    }
    assert slurm_sync_plan(cluster=cluster).plan is None  # nothing left to do

    def submit(account: str, partition: str) -> Any:
        gres = ["--gres=gpu:1"] if partition == "gpu" else []
        return slurm_testbed.run(
            "sbatch", "--parsable", f"--account={account}", f"--partition={partition}",
            "--output=/dev/null", "--time=1", *gres, "--wrap", "true", check=False,
        )  # fmt: skip

    for account, partition in ((f"{spent_gpu.code}-gpu", "work"), (spent_cpu.code, "gpu")):
        refused = submit(account, partition)
        assert refused.returncode != 0
        assert "Invalid account or account/partition combination" in refused.stderr
    since = timezone.now() - timedelta(minutes=1)
    held = [
        submit(f"{spent_gpu.code}-gpu", "gpu").stdout.strip(),
        submit(spent_cpu.code, "work").stdout.strip(),
    ]
    runs = [
        submit(spent_gpu.code, "work").stdout.strip(),
        submit(f"{spent_cpu.code}-gpu", "gpu").stdout.strip(),
    ]
    for job_id in held:
        wait_for("a job to be held", lambda j=job_id: _pending_reason(slurm_testbed, j) or None)
        assert _pending_reason(slurm_testbed, job_id) == "AssocGrpBillingMinutes"
    slurm_testbed.run("scancel", *held)
    balances = {
        (project, pool): balance_get(project=project, pool=pool)
        for project in (spent_gpu, spent_cpu)
        for pool in (cpu, gpu)
    }
    wait_for("the four jobs to end in sacct", lambda: _final(slurm_testbed, [*held, *runs]))

    out = StringIO()
    call_command(
        "import_sacct", "--run-sacct", "--cluster", cluster.name, "--since", since.isoformat(),
        "--json", stdout=out,
    )  # fmt: skip

    ran = {job.job_id_raw: job for job in Job.objects.filter(job_id_raw__in=runs)}
    assert set(ran) == set(runs), (
        out.getvalue(),
        list(QuarantinedRecord.objects.values_list("reason", flat=True)),
    )
    assert (ran[runs[0]].project, ran[runs[0]].partition.name) == (spent_gpu, "work")
    assert (ran[runs[1]].project, ran[runs[1]].partition.name) == (spent_cpu, "gpu")
    for (project, pool), before in balances.items():
        after = balance_get(project=project, pool=pool)
        assert before is not None
        assert after is not None
        charged = sum(
            (
                job.service_units
                for job in ran.values()
                if job.project == project and job.partition.pool_membership.pool == pool
            ),
            Decimal(0),
        )
        assert before.remaining_su - after.remaining_su == charged


def _final(testbed: Testbed, job_ids: list[str]) -> bool | None:
    """True once sacct shows each job ended, with its partition and end time: what the import
    reads (right after a job ends its record may still be on its way to slurmdbd)."""
    shown = testbed.run(
        "sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobIDRaw,State,Partition,End"
    ).stdout.splitlines()
    final = {
        fields[0]
        for fields in (line.split("|") for line in shown if line.count("|") == 3)
        if fields[1].split(" ")[0] in ("COMPLETED", "CANCELLED")
        and fields[2]
        and fields[3] not in ("", "Unknown")
    }
    return True if final == set(job_ids) else None


@pytest.mark.django_db(transaction=True)
def test_an_import_by_several_processes_sets_the_limits_it_moved(
    slurm_testbed, on_testbed, tmp_path
):
    """``import_sacct --workers 2`` ends its run as one process does: the charged balance
    reaches Slurm's GrpTRESMins on a pool that allows it without review."""
    needs_real_services("an import by two processes")
    centre = _centre(su="1000", members=1)
    ((project, people),) = centre.projects
    _apply(slurm_sync_plan(cluster=centre.cluster).plan)
    limit, _ = _billing_used(slurm_testbed, project.code)
    centre.pool.slurm_limits_auto = True
    centre.pool.save()
    start = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    end = start + timedelta(hours=1)
    dump = tmp_path / "sacct.psv"
    dump.write_text(
        "JobID|JobIDRaw|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|NNodes|NodeList"
        "|AllocTRES\n"
        + "".join(
            f"{job}|{job}|{people[0].username}|{project.code}|work|COMPLETED|"
            f"{start:%Y-%m-%dT%H:%M:%S}|{start:%Y-%m-%dT%H:%M:%S}|{end:%Y-%m-%dT%H:%M:%S}|3600|1|"
            "nid1001|cpu=128,mem=245000M,node=1\n"
            for job in (91001, 91002)
        )
    )

    call_command(
        "import_sacct", str(dump), "--cluster", centre.cluster.name, "--workers", "2",
        stdout=StringIO(),
    )  # fmt: skip

    # Two whole work nodes for an hour: 2 x 128 SU, 60 billing-minutes each.
    assert int(_billing_used(slurm_testbed, project.code)[0]) == int(limit) - 2 * 128 * 60

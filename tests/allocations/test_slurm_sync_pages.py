"""The staff page of Slurm provisioning: plans with before and after, approval, drift."""

from __future__ import annotations

import pytest
from django.urls import reverse

from allocations import tasks
from allocations.models import SlurmDriftCheck, SlurmSyncAction, SlurmSyncPlan, SlurmSyncRequest
from tests.factories import ResourcePoolFactory, UserFactory, example_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan():
    cluster = example_cluster("slurm-testbed")
    ResourcePoolFactory.create(cluster=cluster, partitions=["work"])
    plan = SlurmSyncPlan.objects.create(cluster=cluster)
    SlurmSyncAction.objects.create(
        plan=plan, position=0, verb="modify", account="pawsey0001",
        before={"GrpTRESMins": "billing=6000"}, after={"GrpTRESMins": "billing=4000"},
        commands="modify account where name=pawsey0001 cluster=setonix set GrpTRESMins=4000",
    )  # fmt: skip
    SlurmDriftCheck.objects.create(
        cluster=cluster,
        drift=[
            {
                "verb": "delete", "account": "handmade", "user": "", "before": {}, "after": {},
                "applied": False,
                "commands": ["delete account where name=handmade cluster=setonix"],
            }
        ],
    )  # fmt: skip
    return plan


def test_staff_see_each_action_with_before_and_after_and_the_last_drift(client, plan):
    client.force_login(UserFactory.create(is_staff=True))

    page = client.get(reverse("allocations:slurm-sync")).content.decode()

    assert "GrpTRESMins=billing=6000" in page
    assert "GrpTRESMins=billing=4000" in page
    assert f"Approve and apply plan {plan.pk}" in page
    assert "sacctmgr -i delete account where name=handmade cluster=setonix" in page
    assert "leave it (not created by the portal)" in page


def test_approving_a_plan_hands_it_to_the_task_that_applies_it(
    client, plan, django_capture_on_commit_callbacks, monkeypatch
):
    staff = UserFactory.create(is_staff=True)
    client.force_login(staff)
    sent = []
    # What is sent, not sent: the task itself runs on the real Slurm in tests/slurm.
    monkeypatch.setattr(
        tasks.slurm_sync_apply_task, "apply_async", lambda args, kwargs, **_: sent.append(args)
    )

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("allocations:slurm-sync-approve", args=[plan.pk]))

    assert response.status_code == 302
    plan.refresh_from_db()
    assert (plan.status, plan.approved_by) == (SlurmSyncPlan.Status.APPROVED, staff)
    assert sent == [(plan.pk,)]


def test_a_member_cannot_approve_a_plan(client, plan):
    client.force_login(UserFactory.create())

    response = client.post(reverse("allocations:slurm-sync-approve", args=[plan.pk]))

    assert response.status_code == 404
    plan.refresh_from_db()
    assert plan.status == SlurmSyncPlan.Status.PENDING


@pytest.mark.parametrize("what", ["plan", "check"])
def test_a_request_slurm_cannot_answer_ends_on_the_page_in_a_sentence(
    client, plan, settings, tmp_path, django_capture_on_commit_callbacks, monkeypatch, what
):
    """ "Plan now" and "Check for drift" with no sacctmgr on the host: the page says what
    failed, which program, where it was looked for and what to set (it said "No plan waiting"
    and nothing else)."""
    settings.SLURM_BIN_DIR = str(tmp_path / "no-slurm-here")
    client.force_login(UserFactory.create(is_staff=True))
    task = tasks.slurm_sync_plan_task if what == "plan" else tasks.slurm_sync_check_task
    # The worker's part runs here, with what the page sent it.
    monkeypatch.setattr(task, "apply_async", lambda args, kwargs, **_: task(*args, **kwargs))

    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("allocations:slurm-sync-refresh", args=["slurm-testbed"]), {"what": what}
        )
    page = client.get(reverse("allocations:slurm-sync")).content.decode()

    request = SlurmSyncRequest.objects.get()
    assert request.outcome == SlurmSyncRequest.Outcome.FAILED
    kind = "plan" if what == "plan" else "drift check"
    assert f"The {kind} failed: Slurm could not be read: sacctmgr was not found as" in page
    assert "set SLURM_BIN_DIR to the directory that holds them" in page
    assert "FileNotFoundError" not in page


def test_a_plan_with_nothing_to_change_says_so(
    client, plan, django_capture_on_commit_callbacks, monkeypatch
):
    from allocations.slurm import sync

    monkeypatch.setattr(
        sync,
        "actual_state_read",
        lambda cluster: sync.desired_state_build(cluster=cluster).accounts,
    )
    client.force_login(UserFactory.create(is_staff=True))
    monkeypatch.setattr(
        tasks.slurm_sync_plan_task, "apply_async",
        lambda args, kwargs, **_: tasks.slurm_sync_plan_task(*args, **kwargs),
    )  # fmt: skip

    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("allocations:slurm-sync-refresh", args=["slurm-testbed"]), {"what": "plan"}
        )
    page = client.get(reverse("allocations:slurm-sync")).content.decode()

    assert SlurmSyncRequest.objects.get().outcome == SlurmSyncRequest.Outcome.NOTHING
    assert "nothing to change: Slurm matches the portal" in page


def test_a_request_the_queue_would_not_take_fails_at_once_with_the_reason(
    client, plan, django_capture_on_commit_callbacks, monkeypatch
):
    from kombu.exceptions import OperationalError

    def refuse(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.slurm_sync_plan_task, "apply_async", refuse)
    client.force_login(UserFactory.create(is_staff=True))

    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("allocations:slurm-sync-refresh", args=["slurm-testbed"]), {"what": "plan"}
        )
    page = client.get(reverse("allocations:slurm-sync")).content.decode()

    assert SlurmSyncRequest.objects.get().outcome == SlurmSyncRequest.Outcome.FAILED
    assert "The plan failed: it could not be handed to a worker: the task queue" in page


def test_an_approved_plan_the_queue_would_not_take_fails_with_the_reason(
    client, plan, django_capture_on_commit_callbacks, monkeypatch
):
    """It stayed "approved" for a worker that would never come, after a 500."""
    from kombu.exceptions import OperationalError

    def refuse(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.slurm_sync_apply_task, "apply_async", refuse)
    client.force_login(UserFactory.create(is_staff=True))

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("allocations:slurm-sync-approve", args=[plan.pk]))
    page = client.get(reverse("allocations:slurm-sync")).content.decode()

    assert response.status_code == 302
    plan.refresh_from_db()
    assert plan.status == SlurmSyncPlan.Status.FAILED
    assert plan.error.startswith("nothing was run: the plan could not be handed to a worker")
    assert "nothing was run: the plan could not be handed to a worker" in page

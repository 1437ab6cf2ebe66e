"""The staff page of Slurm provisioning: plans with before and after, approval, drift."""

from __future__ import annotations

import pytest
from django.urls import reverse

from allocations import tasks
from allocations.models import SlurmDriftCheck, SlurmSyncAction, SlurmSyncPlan, SlurmSyncRequest
from tests.accounting.test_import_faults import _broker_at
from tests.conftest import needs_real_services
from tests.factories import ResourcePoolFactory, UserFactory, example_cluster
from tests.portal.test_health import _closed_port

pytestmark = pytest.mark.django_db


def _nobody_at_the_broker():
    """This process's sends go to a Redis port nobody listens on (a broker that is down)."""
    return _broker_at(f"redis://127.0.0.1:{_closed_port()}/0")


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
    client, plan, settings, tmp_path, django_capture_on_commit_callbacks, what
):
    """ "Plan now" and "Check for drift" with no sacctmgr on the host: the page says what
    failed, which program, where it was looked for and what to set (it said "No plan waiting"
    and nothing else)."""
    settings.SLURM_BIN_DIR = str(tmp_path / "no-slurm-here")
    client.force_login(UserFactory.create(is_staff=True))

    with django_capture_on_commit_callbacks(execute=True):  # the task runs eagerly here
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


@pytest.mark.worker  # tasks are sent, not run eagerly: to a broker that is down
def test_a_request_the_queue_would_not_take_fails_at_once_with_the_reason(
    client, plan, django_capture_on_commit_callbacks
):
    needs_real_services("a task the queue refuses", broker=True)
    client.force_login(UserFactory.create(is_staff=True))

    with _nobody_at_the_broker(), django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("allocations:slurm-sync-refresh", args=["slurm-testbed"]), {"what": "plan"}
        )
    page = client.get(reverse("allocations:slurm-sync")).content.decode()

    assert SlurmSyncRequest.objects.get().outcome == SlurmSyncRequest.Outcome.FAILED
    assert "The plan failed: it could not be handed to a worker: the task queue" in page


@pytest.mark.worker  # tasks are sent, not run eagerly: to a broker that is down
def test_an_approved_plan_the_queue_would_not_take_fails_with_the_reason(
    client, plan, django_capture_on_commit_callbacks
):
    """It stayed "approved" for a worker that would never come, after a 500."""
    needs_real_services("a task the queue refuses", broker=True)
    client.force_login(UserFactory.create(is_staff=True))

    with _nobody_at_the_broker(), django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("allocations:slurm-sync-approve", args=[plan.pk]))
    page = client.get(reverse("allocations:slurm-sync")).content.decode()

    assert response.status_code == 302
    plan.refresh_from_db()
    assert plan.status == SlurmSyncPlan.Status.FAILED
    assert plan.error.startswith("nothing was run: the plan could not be handed to a worker")
    assert "nothing was run: the plan could not be handed to a worker" in page

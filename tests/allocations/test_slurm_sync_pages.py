"""The staff page of Slurm provisioning: plans with before and after, approval, drift."""

from __future__ import annotations

import pytest
from django.urls import reverse

from allocations import tasks
from allocations.models import SlurmDriftCheck, SlurmSyncAction, SlurmSyncPlan
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

"""The provisioning service's pieces that need the database but not Slurm."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from allocations.models import Project
from allocations.services import allocation_grant
from allocations.slurm_plan import Account, Action
from allocations.slurm_sync import _renderable, actions_json, desired_state_build
from tests.factories import (
    MembershipFactory,
    ProjectFactory,
    ResourcePoolFactory,
    UserFactory,
    example_cluster,
)

pytestmark = pytest.mark.django_db


def test_an_action_on_a_name_sacctmgr_would_need_quoted_is_left_alone_and_said_so():
    actions, unsafe = _renderable(
        [Action("delete", "odd name"), Action("create", "p1")], cluster="setonix"
    )

    assert [(action.account, action.applied) for action in actions] == [
        ("odd name", False),
        ("p1", True),
    ]
    assert unsafe == [
        "delete account odd name: 'odd name' is not a name Slurm accepts for an account or user"
    ]
    assert actions_json(actions, cluster="setonix")[0]["commands"] == []


def test_the_desired_state_has_each_granted_project_its_members_and_its_su_in_minutes():
    cluster = example_cluster("slurm-testbed")
    staff = UserFactory.create(is_staff=True)
    pool = ResourcePoolFactory.create(
        cluster=cluster, partitions=["work"], slurm_parent_account="Uni1", slurm_qos="normal,low",
        slurm_default_qos="normal",
    )  # fmt: skip
    held = ProjectFactory.create(code="Held01", status=Project.Status.SUSPENDED)
    granted = ProjectFactory.create(code="Pawsey0042")
    expired = ProjectFactory.create(code="old0001", status=Project.Status.EXPIRED)
    MembershipFactory.create(project=granted, user=UserFactory.create(username="Alice"))
    MembershipFactory.create(project=granted, user=UserFactory.create(username="bad name"))
    today = date.today()
    for project in (held, granted, expired):
        allocation_grant(
            project=project, pool=pool, amount=Decimal("300"), actor=staff,
            period_start=today.replace(day=1), period_end=date(today.year + 1, today.month, 1),
        )  # fmt: skip
    budget = granted.allocations.get().budget_periods.order_by("start").first().budget_su

    desired = desired_state_build(cluster=cluster)

    assert desired.accounts == {
        "uni1": Account(),
        "pawsey0042": Account(
            parent="uni1",
            users=frozenset({granted.pi.username.lower(), "alice"}),
            billing_minutes=int(budget * 60),
            qos=frozenset({"normal", "low"}),
            default_qos="normal",
        ),
        "held01": Account(
            parent="uni1",
            users=frozenset({held.pi.username.lower()}),
            billing_minutes=0,  # suspended: held by Slurm
            qos=frozenset({"normal", "low"}),
            default_qos="normal",
        ),
    }
    assert desired.skipped == [
        "member of Pawsey0042: 'bad name' is not a name Slurm accepts for an account or user"
    ]

"""The provisioning service's pieces that need the database but not Slurm."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from allocations.grants.services import allocation_grant
from allocations.slurm.plan import Account, Action
from allocations.slurm.sync import _renderable, actions_json, desired_state_build
from projects.models import Project
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
    expired = ProjectFactory.create(code="old0001")
    archived = ProjectFactory.create(code="old0002")
    MembershipFactory.create(project=granted, user=UserFactory.create(username="Alice"))
    MembershipFactory.create(project=granted, user=UserFactory.create(username="bad name"))
    today = date.today()
    for project in (held, granted, expired, archived):
        allocation_grant(
            project=project, pool=pool, amount=Decimal("300"), actor=staff,
            period_start=today.replace(day=1), period_end=date(today.year + 1, today.month, 1),
        )  # fmt: skip
    # Marked after the grants (a grant revives an expired project, and an archived one refuses).
    Project.objects.filter(pk=expired.pk).update(status=Project.Status.EXPIRED)
    Project.objects.filter(pk=archived.pk).update(status=Project.Status.ARCHIVED)
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
        "old0001": Account(
            parent="uni1",
            users=frozenset({expired.pi.username.lower()}),
            billing_minutes=0,  # expired: held by Slurm until a new grant
            qos=frozenset({"normal", "low"}),
            default_qos="normal",
        ),
    }  # archived: no account (the plan removes it)
    assert desired.skipped == [
        "member of Pawsey0042: 'bad name' is not a name Slurm accepts for an account or user"
    ]


def test_a_pool_with_an_account_suffix_gives_its_projects_an_account_limited_to_it_alone():
    """Pawsey's way: pawsey0042 for the CPU pool and pawsey0042-gpu for the GPU pool, each
    limited to its own pool's SU, the GPU account's members associated in gpu only."""
    cluster = example_cluster("slurm-testbed")
    staff = UserFactory.create(is_staff=True)
    cpu = ResourcePoolFactory.create(cluster=cluster, partitions=["work"])
    gpu = ResourcePoolFactory.create(
        cluster=cluster, partitions=["gpu"], slurm_account_suffix="-gpu",
        slurm_partition_associations=True,
    )  # fmt: skip
    project = ProjectFactory.create(code="Pawsey0042")
    today = date.today()
    for pool, amount in ((cpu, "300"), (gpu, "40")):
        allocation_grant(
            project=project, pool=pool, amount=Decimal(amount), actor=staff,
            period_start=today.replace(day=1), period_end=date(today.year + 1, today.month, 1),
        )  # fmt: skip
    budget = {
        grant.pool_id: grant.budget_periods.order_by("start").first().budget_su
        for grant in project.allocations.all()
    }
    pi = project.pi.username.lower()

    desired = desired_state_build(cluster=cluster)

    assert desired.accounts == {
        "pawsey0042": Account(users=frozenset({pi}), billing_minutes=int(budget[cpu.pk] * 60)),
        "pawsey0042-gpu": Account(
            partition_users=frozenset({(pi, "gpu")}), billing_minutes=int(budget[gpu.pk] * 60)
        ),
    }


def test_without_a_suffix_one_account_holds_all_pools_and_partitions_of_the_restricting_ones():
    cluster = example_cluster("slurm-testbed")
    staff = UserFactory.create(is_staff=True)
    pools = [
        ResourcePoolFactory.create(
            cluster=cluster, partitions=[name], slurm_partition_associations=True
        )
        for name in ("work", "gpu")
    ]
    project = ProjectFactory.create(code="p7")
    today = date.today()
    for pool in pools:
        allocation_grant(
            project=project, pool=pool, amount=Decimal("30"), actor=staff,
            period_start=today.replace(day=1), period_end=date(today.year + 1, today.month, 1),
        )  # fmt: skip
    total = sum(
        grant.budget_periods.order_by("start").first().budget_su
        for grant in project.allocations.all()
    )
    pi = project.pi.username.lower()

    (account,) = desired_state_build(cluster=cluster).accounts.values()

    assert account.billing_minutes == int(total * 60)
    assert account.partition_users == {(pi, "gpu"), (pi, "work")}
    assert account.users == frozenset()

"""The provisioning service's pieces that need the database but not Slurm."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import RequestFactory

from allocations.grants.services import allocation_grant
from allocations.slurm.plan import Account, Action
from allocations.slurm.sync import _renderable, actions_json, desired_state_build
from projects.models import POOL_SUFFIX_TAKEN, Project, ResourcePool
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
            partition_users=frozenset({(granted.pi.username.lower(), "work"), ("alice", "work")}),
            billing_minutes=int(budget * 60),
            qos=frozenset({"normal", "low"}),
            default_qos="normal",
        ),
        "held01": Account(
            parent="uni1",
            partition_users=frozenset({(held.pi.username.lower(), "work")}),
            billing_minutes=0,  # suspended: held by Slurm
            qos=frozenset({"normal", "low"}),
            default_qos="normal",
        ),
        "old0001": Account(
            parent="uni1",
            partition_users=frozenset({(expired.pi.username.lower(), "work")}),
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
        cluster=cluster, partitions=["gpu"], slurm_account_suffix="-gpu"
    )
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
        "pawsey0042": Account(
            partition_users=frozenset({(pi, "work")}), billing_minutes=int(budget[cpu.pk] * 60)
        ),
        "pawsey0042-gpu": Account(
            partition_users=frozenset({(pi, "gpu")}), billing_minutes=int(budget[gpu.pk] * 60)
        ),
    }


def test_two_pools_of_a_cluster_may_not_share_an_account_suffix_and_are_told_on_the_field():
    """One account per pool, so one limit per pool: the second pool of a cluster without a
    suffix (or with the first's) is refused by the model's validation, on the suffix field,
    which the admin's form shows, and by the database whatever writes it."""
    cluster = example_cluster("slurm-testbed")
    ResourcePoolFactory.create(cluster=cluster, slurm_account_suffix="")
    ResourcePoolFactory.create(cluster=cluster, slurm_account_suffix="-gpu")
    for suffix in ("", "-gpu"):
        second = ResourcePool(name=f"second {suffix}", cluster=cluster, slurm_account_suffix=suffix)
        with pytest.raises(ValidationError) as refused:
            second.full_clean()
        assert refused.value.message_dict == {"slurm_account_suffix": [POOL_SUFFIX_TAKEN]}
    upper = ResourcePool(name="upper", cluster=cluster, slurm_account_suffix="-GPU2")
    with pytest.raises(ValidationError) as refused:
        upper.full_clean()
    assert list(refused.value.message_dict) == ["slurm_account_suffix"]
    ResourcePool(name="other", cluster=cluster, slurm_account_suffix="-highmem").full_clean()
    # The admin's own form for a pool shows it on the field, and keeps what was typed.
    staff = UserFactory.create(is_staff=True, is_superuser=True)
    request = RequestFactory().get("/")
    request.user = staff
    form_class = admin.site._registry[ResourcePool].get_form(request)
    typed = {
        "name": "setonix GPU 2", "cluster": cluster.pk, "slurm_account_suffix": "-gpu",
        "budget_months": 3, "split": "even", "notify_thresholds": "75,90,100",
    }  # fmt: skip
    form = form_class(data=typed)
    assert not form.is_valid()
    assert form.errors == {"slurm_account_suffix": [POOL_SUFFIX_TAKEN]}
    assert form["name"].value() == "setonix GPU 2"
    with pytest.raises(IntegrityError), transaction.atomic():
        ResourcePool.objects.create(name="raw", cluster=cluster, slurm_account_suffix="-gpu")


def test_a_pool_that_names_no_partition_gets_its_accounts_but_no_members():
    cluster = example_cluster("slurm-testbed")
    staff = UserFactory.create(is_staff=True)
    pool = ResourcePoolFactory.create(cluster=cluster, name="empty", slurm_account_suffix="-e")
    project = ProjectFactory.create(code="p7")
    today = date.today()
    allocation_grant(
        project=project, pool=pool, amount=Decimal("30"), actor=staff,
        period_start=today.replace(day=1), period_end=date(today.year + 1, today.month, 1),
    )  # fmt: skip

    desired = desired_state_build(cluster=cluster)

    assert desired.accounts["p7-e"].partition_users == frozenset()
    assert desired.accounts["p7-e"].users == frozenset()
    assert desired.skipped == ["members of p7-e: pool empty names no partition"]

"""A small centre for allocation tests: the testbed cluster, two pools, users with roles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounting.models import Cluster
from projects.models import Project, ResourcePool
from tests.factories import (
    MembershipFactory,
    ProjectFactory,
    ResourcePoolFactory,
    UserFactory,
    example_cluster,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"


@dataclass
class Centre:
    cluster: Cluster
    cpu: ResourcePool
    gpu: ResourcePool
    staff: User
    chair: User
    reviewer: User
    alice: User  # PI of pawsey0001, member of pawsey0003
    bob: User  # PI of pawsey0002
    carol: User  # member of pawsey0003 (PI is alice)
    p1: Project
    p2: Project
    p3: Project


@pytest.fixture
def centre(db):
    return centre_build()


def centre_build():
    """The centre, built in the caller's transaction (the ``centre`` fixture's, or a module's:
    tests/api/conftest.py ``shared_world``)."""
    cluster = example_cluster("slurm-testbed")
    cpu = ResourcePoolFactory(name="testbed CPU", cluster=cluster, partitions=["work"])
    gpu = ResourcePoolFactory(
        name="testbed GPU", cluster=cluster, partitions=["gpu"], slurm_account_suffix="-gpu"
    )
    users = {
        name: UserFactory(username=name) for name in ("chair", "reviewer", "alice", "bob", "carol")
    }
    staff = UserFactory(username="ops", is_staff=True)
    p1 = ProjectFactory(code="pawsey0001", title="Climate", pi=users["alice"])
    p2 = ProjectFactory(code="pawsey0002", title="Genomics", pi=users["bob"])
    p3 = ProjectFactory(code="pawsey0003", title="Astro", pi=users["alice"])
    ProjectFactory(code="pawsey0004", title="Materials", pi=users["bob"], pi_membership=False)
    MembershipFactory(project=p3, user=users["carol"], notify=True)
    return Centre(
        cluster=cluster, cpu=cpu, gpu=gpu, staff=staff, chair=users["chair"],
        reviewer=users["reviewer"], alice=users["alice"], bob=users["bob"], carol=users["carol"],
        p1=p1, p2=p2, p3=p3,
    )  # fmt: skip


def open_round_times() -> tuple[datetime, datetime]:
    now = timezone.now()
    return now - timedelta(days=1), now + timedelta(days=14)


PERIOD = (date(2026, 10, 1), date(2027, 10, 1))  # the sample's jobs ran on 2026-11-22
SAMPLE_DAY = date(2026, 11, 22)
AFTER_SAMPLE = datetime(2026, 11, 23, tzinfo=UTC)

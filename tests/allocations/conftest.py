"""A small centre for allocation tests: the testbed cluster, two pools, users with roles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.models import Cluster, Partition
from allocations.models import Membership, PoolPartition, Project, ResourcePool
from tests.factories import UserFactory

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
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    cluster = Cluster.objects.get(name="slurm-testbed")
    cpu = ResourcePool.objects.create(name="testbed CPU", cluster=cluster)
    gpu = ResourcePool.objects.create(name="testbed GPU", cluster=cluster)
    PoolPartition.objects.create(
        pool=cpu, partition=Partition.objects.get(cluster=cluster, name="work")
    )
    PoolPartition.objects.create(
        pool=gpu, partition=Partition.objects.get(cluster=cluster, name="gpu")
    )
    users = {
        name: UserFactory(username=name, email=f"{name}@example.org")
        for name in ("chair", "reviewer", "alice", "bob", "carol")
    }
    staff = UserFactory(username="ops", is_staff=True)
    p1 = Project.objects.create(code="pawsey0001", title="Climate", pi=users["alice"])
    p2 = Project.objects.create(code="pawsey0002", title="Genomics", pi=users["bob"])
    p3 = Project.objects.create(code="pawsey0003", title="Astro", pi=users["alice"])
    Project.objects.create(code="pawsey0004", title="Materials", pi=users["bob"])
    Membership.objects.create(project=p1, user=users["alice"], role=Membership.Role.PI)
    Membership.objects.create(project=p2, user=users["bob"], role=Membership.Role.PI)
    Membership.objects.create(project=p3, user=users["alice"], role=Membership.Role.PI)
    Membership.objects.create(project=p3, user=users["carol"], notify=True)
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

"""factory_boy factories shared by the tests."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import factory
from django.contrib.auth import get_user_model

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.rollups import DAILY_SUMS, daily_apply
from accounting.models import (
    Cluster,
    EfficiencyDaily,
    EfficiencyMonthly,
    Partition,
    PartitionVersion,
)
from projects.models import Membership, PoolPartition, Project, ResourcePool

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "clusters"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.org")
    password = factory.django.Password("pw-for-tests")


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"cluster{n}")
    timezone = "UTC"


class PartitionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Partition

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"part{n}")


class PartitionVersionFactory(factory.django.DjangoModelFactory):
    """A Setonix-like CPU partition version (2 x 64 cores, 245000 MB, 280 W per socket)."""

    class Meta:
        model = PartitionVersion

    partition = factory.SubFactory(PartitionFactory)
    number = 1
    effective_from = datetime(2026, 1, 1, tzinfo=UTC)
    nodelist = "nid[1001-1004]"
    node_count = 4
    sockets = 2
    cores_per_socket = 64
    memory_mb = 245000
    gpus = 0
    cpu_tdp_watts = Decimal(280)
    gpu_tdp_watts = Decimal(0)
    derived_weight = Decimal(128)


# --- The centre the world-builders share ------------------------------------------------------


def example_cluster(name: str = "slurm-testbed") -> Cluster:
    """A cluster from its spec file in examples/clusters/, through the real ``cluster_apply``
    (idempotent: applying it again changes nothing)."""
    cluster_apply(definition=cluster_definition_load(EXAMPLES / f"{name}.json"))
    return Cluster.objects.get(name=name)


def _pi_membership(project: Project, create: bool, extracted: Any) -> None:
    """The PI's membership (``pi_membership=False``: a project whose PI holds none)."""
    if create and project.pi is not None and extracted is not False:
        Membership.objects.get_or_create(
            project=project, user=project.pi, defaults={"role": Membership.Role.PI}
        )


def _free_suffix(pool: Any) -> str:
    """The first pool of a cluster books to the project's own account; each further one gets
    an account suffix of its own (``-p2``, ``-p3``...), as two pools of a cluster must."""
    taken = set(
        ResourcePool.objects.filter(cluster=pool.cluster).values_list(
            "slurm_account_suffix", flat=True
        )
    )
    number = 1
    suffix = ""
    while suffix in taken:
        number += 1
        suffix = f"-p{number}"
    return suffix


def _pool_partitions(pool: ResourcePool, names: Any) -> None:
    for name in names:
        PoolPartition.objects.get_or_create(
            pool=pool, partition=Partition.objects.get(cluster=pool.cluster, name=name)
        )


class ProjectFactory(factory.django.DjangoModelFactory[Project]):
    """A project; its PI also holds a PI membership, as the portal's services make it."""

    class Meta:
        model = Project
        django_get_or_create = ("code",)
        skip_postgeneration_save = True  # the hook adds a membership; the project is saved

    code = factory.Sequence(lambda n: f"pawsey{n:04d}")
    title = factory.LazyAttribute(lambda project: f"Project {project.code}")
    pi = factory.SubFactory(UserFactory)

    pi_membership = factory.PostGeneration(
        lambda project, create, extracted, **kwargs: _pi_membership(project, create, extracted)
    )


class MembershipFactory(factory.django.DjangoModelFactory[Membership]):
    class Meta:
        model = Membership
        django_get_or_create = ("project", "user")

    project = factory.SubFactory(ProjectFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.MEMBER


class ResourcePoolFactory(factory.django.DjangoModelFactory[ResourcePool]):
    """A pool of a cluster's partitions: ``ResourcePoolFactory(cluster=c, partitions=["work"])``."""

    class Meta:
        model = ResourcePool
        django_get_or_create = ("name",)
        skip_postgeneration_save = True  # the hook adds pool partitions; the pool is saved

    name = factory.Sequence(lambda n: f"pool {n}")
    cluster = factory.SubFactory(ClusterFactory)
    slurm_account_suffix = factory.LazyAttribute(_free_suffix)

    partitions = factory.PostGeneration(
        lambda pool, create, extracted, **kwargs: _pool_partitions(pool, extracted or ())
    )


def api_token(user: Any, *, scope: str = "write", name: str = "tests") -> str:
    """A personal API token of ``user`` (the plaintext, as its owner would paste it)."""
    from people.tokens import token_create

    return token_create(user=user, name=name, scope=scope, expires_in_days=30).plaintext


def usage_day_add(project, partition, username, day, *, service_units=0, cost=0, jobs=0):
    """A day of usage written by hand as the import writes it (``daily_apply``: UsageDaily and
    the balance's ProjectUsageDaily), for read-side tests whose figures are computed on paper."""
    amounts = {"service_units": Decimal(service_units), "cost": Decimal(cost), "jobs": jobs}
    daily_apply(
        {
            (project.pk, partition.pk, username, day): [
                amounts.get(name, 0 if name.endswith("jobs") else Decimal(0)) for name in DAILY_SUMS
            ]
        }
    )


def efficiency_rollups_add(project, partition, username, day, *, jobs, measured, **sums):
    """Roll-up rows of a day written by hand (UsageDaily, EfficiencyDaily when ``measured``
    jobs had usage data), and their share of the month's EfficiencyMonthly row, as the import
    keeps them: for read-side tests whose every figure is computed on paper."""
    usage_day_add(
        project, partition, username, day, jobs=jobs,
        service_units=sums.get("service_units", Decimal(0)),
    )  # fmt: skip
    month, _ = EfficiencyMonthly.objects.get_or_create(
        project=project, partition=partition, username=username, month=day.replace(day=1)
    )
    month.all_jobs += jobs
    month.charged_service_units += sums.get("service_units", Decimal(0))
    if measured:
        EfficiencyDaily.objects.create(
            project=project, partition=partition, username=username, day=day, jobs=measured,
            **sums,
        )  # fmt: skip
        month.jobs += measured
        for name, value in sums.items():
            setattr(month, name, getattr(month, name) + value)
    month.save()

"""factory_boy factories shared by the tests."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model

from accounting.models import Cluster, Partition, PartitionVersion


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

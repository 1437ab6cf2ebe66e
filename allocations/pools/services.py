"""Resource pools, written by staff: a pool's policy and the partitions it charges. The page
and any other caller go through these two services, so that a pool's rules live here once."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet

from accounting.models import Cluster, Partition
from allocations.grants.services import AllocationError, check_rule
from kit.access import is_staff, require
from projects.models import POOL_SUFFIX_TAKEN, PoolPartition, ResourcePool

# What staff set on a pool besides its cluster and partitions (projects/models.py).
POOL_SETTINGS = (
    "name", "description", "budget_months", "split", "carry_over", "notify_thresholds",
    "limit_command", "restore_command", "slurm_parent_account", "slurm_qos",
    "slurm_default_qos", "slurm_account_suffix", "slurm_limits_auto",
)  # fmt: skip

ACCOUNT_SUFFIX = re.compile(r"[-_.a-z0-9]{1,16}")


def _others(pool: ResourcePool | None) -> QuerySet[ResourcePool]:
    """Every pool but ``pool``: the ones a new or changed pool must not clash with."""
    pools = ResourcePool.objects.all()
    return pools.exclude(pk=pool.pk) if pool is not None else pools


def _settings_check(
    settings: Mapping[str, Any], cluster: Cluster, pool: ResourcePool | None
) -> None:
    unknown = set(settings) - set(POOL_SETTINGS)
    check_rule(not unknown, f"a pool has no setting {', '.join(sorted(unknown))}")
    name = str(settings.get("name", pool.name if pool else "")).strip()
    check_rule(bool(name), "a pool needs a name", field="name")
    taken = _others(pool).filter(name=name)
    check_rule(not taken.exists(), f"a pool named {name!r} exists already", field="name")
    if "budget_months" in settings:
        months = settings["budget_months"]
        check_rule(
            isinstance(months, int) and 1 <= months <= 120,
            "a budget period lasts from 1 to 120 months",
            field="budget_months",
        )
    if "notify_thresholds" in settings:
        items = [item.strip() for item in str(settings["notify_thresholds"]).split(",")]
        check_rule(
            all(item.isdecimal() and 1 <= int(item) <= 100 for item in items if item),
            "thresholds are whole percentages from 1 to 100, separated by commas",
            field="notify_thresholds",
        )
    for command in ("limit_command", "restore_command"):
        text = str(settings.get(command, ""))
        try:
            text.format(account="account", cluster="cluster")
        except (KeyError, IndexError, ValueError):
            raise AllocationError(
                "a command may name only {account} and {cluster}", field=command
            ) from None
    suffix = str(settings.get("slurm_account_suffix", pool.slurm_account_suffix if pool else ""))
    if suffix:
        check_rule(
            ACCOUNT_SUFFIX.fullmatch(suffix) is not None,
            "an account suffix is up to 16 lower-case letters, digits, '-', '_' or '.'",
            field="slurm_account_suffix",
        )
    # One Slurm account per pool (docs/slurm.md): the blank suffix is one pool's too.
    same = _others(pool).filter(cluster=cluster, slurm_account_suffix=suffix)
    check_rule(not same.exists(), POOL_SUFFIX_TAKEN, field="slurm_account_suffix")


def _partitions_set(pool: ResourcePool, partitions: Iterable[Partition]) -> None:
    wanted = {partition.pk: partition for partition in partitions}
    for partition in wanted.values():
        check_rule(
            partition.cluster_id == pool.cluster_id,
            f"{partition} is not a partition of {pool.cluster}",
            field="partitions",
        )
    elsewhere = PoolPartition.objects.filter(partition_id__in=wanted).exclude(pool=pool)
    taken = elsewhere.select_related("pool", "partition").first()
    check_rule(
        taken is None,
        f"{taken and taken.partition} belongs to the pool {taken and taken.pool} already: a "
        "partition charges one pool",
        field="partitions",
    )
    for link in PoolPartition.objects.filter(pool=pool).exclude(partition_id__in=wanted):
        link.delete()  # one by one, so that the audit log records each
    have = set(PoolPartition.objects.filter(pool=pool).values_list("partition_id", flat=True))
    for pk in wanted.keys() - have:
        PoolPartition.objects.create(pool=pool, partition=wanted[pk])


@transaction.atomic
def pool_create(
    *,
    actor: User,
    cluster: Cluster,
    partitions: Iterable[Partition],
    settings: Mapping[str, Any],
) -> ResourcePool:
    """Staff define a pool on ``cluster``: its policy (``POOL_SETTINGS``) and the partitions
    whose jobs it pays for."""
    require(is_staff(actor), "only centre staff create resource pools")
    _settings_check(settings, cluster, None)
    pool = ResourcePool.objects.create(cluster=cluster, **settings)
    _partitions_set(pool, partitions)
    return pool


@transaction.atomic
def pool_update(
    *,
    pool: ResourcePool,
    actor: User,
    partitions: Iterable[Partition],
    settings: Mapping[str, Any],
) -> ResourcePool:
    """Staff change a pool's policy and partitions; its cluster stays (its grants and jobs
    are there)."""
    require(is_staff(actor), "only centre staff change resource pools")
    pool = ResourcePool.objects.select_for_update().get(pk=pool.pk)
    _settings_check(settings, pool.cluster, pool)
    for name, value in settings.items():
        setattr(pool, name, value)
    pool.save()
    _partitions_set(pool, partitions)
    return pool

"""Projects, memberships, invitations and pools moved from allocations to projects with no
table change (projects 0001, accounting 0018, allocations 0009): a database made by the
release before the move migrates forward and every row is found where the code now looks."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from auditlog.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounting.models import UsageDaily
from allocations.grants.services import allocation_grant
from allocations.models import Allocation
from projects.models import Invitation, Membership, PoolPartition, Project, ResourcePool
from tests.factories import (
    MembershipFactory,
    PartitionFactory,
    ProjectFactory,
    ResourcePoolFactory,
    UserFactory,
    example_cluster,
)

BEFORE_THE_MOVE = [
    ("allocations", "0008_efficiency_summary_notices"),
    ("accounting", "0017_efficiency_monthly"),
    ("projects", None),
]
MOVED = ["project", "membership", "invitation", "resourcepool", "poolpartition"]


def _migrate(targets: list[tuple[str, str | None]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _latest() -> list[tuple[str, str | None]]:
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


@pytest.mark.django_db(transaction=True)
def test_a_database_of_the_release_before_the_move_keeps_every_row() -> None:
    latest = _latest()
    # The rows the release before the move would hold: the tables are the same.
    cluster = example_cluster()
    partition = PartitionFactory.create(cluster=cluster, name="work-move")
    pi, member, staff = (
        UserFactory.create(),
        UserFactory.create(),
        UserFactory.create(is_staff=True),
    )
    project = ProjectFactory.create(code="move0001", pi=pi)
    MembershipFactory.create(project=project, user=member)
    pool = ResourcePoolFactory.create(cluster=cluster, name="move pool", slurm_account_suffix="-m")
    PoolPartition.objects.create(pool=pool, partition=partition)
    invitation = Invitation.objects.create(
        project=project,
        email="new@example.org",
        invited_by=pi,
        nonce="move-nonce",
        expires_at=timezone.now() + timedelta(days=7),
    )
    grant = allocation_grant(
        project=project,
        pool=pool,
        amount=Decimal("1000"),
        period_start=date(2026, 1, 1),
        period_end=date(2027, 1, 1),
        actor=staff,
    )
    UsageDaily.objects.create(
        project=project, partition=partition, username=str(member.username), day=date(2026, 2, 1)
    )
    counts = {model: model.objects.count() for model in (Project, Membership, Invitation)}
    pools = (ResourcePool.objects.count(), PoolPartition.objects.count())

    try:
        _migrate(BEFORE_THE_MOVE)
        # As the release before the move left them: the content types are allocations'.
        old = ContentType.objects.get(app_label="allocations", model="project")
        assert not ContentType.objects.filter(app_label="projects", model__in=MOVED).exists()
        entry = LogEntry.objects.create(
            content_type=old,
            object_pk=str(project.pk),
            object_id=project.pk,
            object_repr=project.code,
            action=LogEntry.Action.UPDATE,
            changes={"title": ["", "moved"]},
        )
    finally:
        _migrate(latest)

    assert {model: model.objects.count() for model in (Project, Membership, Invitation)} == counts
    assert (ResourcePool.objects.count(), PoolPartition.objects.count()) == pools
    found = Project.objects.get(code="move0001")
    assert found.pk == project.pk
    assert found.pi == pi
    assert set(found.memberships.values_list("user__username", flat=True)) == {
        pi.username,
        member.username,
    }
    assert Invitation.objects.get(pk=invitation.pk).project == found
    assert list(ResourcePool.objects.get(pk=pool.pk).partitions.all()) == [partition]
    moved_grant = Allocation.objects.get(pk=grant.pk)
    assert (moved_grant.project, moved_grant.pool) == (found, pool)
    assert found.usage_days.get().partition == partition
    # The audit log's entries follow the model: its content type moved, it was not re-made.
    entry.refresh_from_db()
    assert (entry.content_type.app_label, entry.content_type.model) == ("projects", "project")
    assert entry.content_type.model_class() is Project
    assert not ContentType.objects.filter(app_label="allocations", model__in=MOVED).exists()

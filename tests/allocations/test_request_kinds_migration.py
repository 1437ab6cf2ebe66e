"""Migration allocations 0012 (request kinds) on a database of the release before it: an
application and a top-up made in a round stay valid under the new constraints, and a top-up
that names a round still finds its chair."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from allocations.access import deciding_round
from allocations.models import AllocationRequest, AllocationRound
from tests.factories import ProjectFactory, UserFactory

BEFORE = ("allocations", "0011_project_requests")


@pytest.mark.django_db(transaction=True)
def test_requests_of_the_release_before_kinds_migrate_and_keep_their_round() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate([BEFORE])
    with connection.cursor() as cursor:
        columns = connection.introspection.get_table_description(
            cursor, AllocationRequest._meta.db_table
        )
    assert "appeal_of_id" not in {column.name for column in columns}  # the release before
    old_apps = MigrationExecutor(connection).loader.project_state([BEFORE]).apps
    OldRequest = old_apps.get_model("allocations", "AllocationRequest")
    OldRound = old_apps.get_model("allocations", "AllocationRound")
    OldMember = old_apps.get_model("allocations", "CommitteeMember")
    pi, chair = UserFactory.create(), UserFactory.create()
    project = ProjectFactory.create(code="kinds0001", pi=pi)
    now = timezone.now()
    old_round = OldRound.objects.create(
        name="before kinds", opens_at=now - timedelta(days=1), closes_at=now + timedelta(days=9),
        period_start=now.date(), period_end=now.date() + timedelta(days=365),
    )  # fmt: skip
    OldMember.objects.create(round_id=old_round.pk, user_id=chair.pk, is_chair=True)
    for kind in ("new", "top_up"):
        OldRequest.objects.create(
            round_id=old_round.pk, project_id=project.pk, kind=kind, state="submitted",
            created_by_id=pi.pk,
        )  # fmt: skip

    MigrationExecutor(connection).migrate(latest)

    round_ = AllocationRound.objects.get(pk=old_round.pk)
    requests = {r.kind: r for r in AllocationRequest.objects.filter(project=project)}
    assert set(requests) == {"new", "top_up"}
    assert all(r.round_id == round_.pk and r.state == "submitted" for r in requests.values())
    assert deciding_round(requests["top_up"]) == round_

"""A read-only page reads a person's role in a project once, however many rules it asks; every
other caller reads it each time, so a write that changes a role is seen at once."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from projects.access import (
    can_delegate,
    can_manage_project,
    is_pi,
    project_role,
    roles_read_once,
)
from projects.models import Membership
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


def _membership_reads(queries: CaptureQueriesContext) -> int:
    return sum('FROM "allocations_membership"' in query["sql"] for query in queries)


def test_within_it_each_rule_asks_the_role_read_once():
    manager = UserFactory.create()
    project = ProjectFactory.create()
    MembershipFactory.create(project=project, user=manager, role=Membership.Role.MANAGER)

    with roles_read_once(), CaptureQueriesContext(connection) as queries:
        answers = [
            project_role(manager, project),
            can_manage_project(manager, project),
            is_pi(manager, project),
            can_delegate(manager, project),
        ]
    assert answers == [Membership.Role.MANAGER, True, False, False]
    assert _membership_reads(queries) == 1


def test_outside_it_a_changed_role_is_seen_at_once():
    person = UserFactory.create()
    project = ProjectFactory.create()
    membership = MembershipFactory.create(project=project, user=person, role=Membership.Role.MEMBER)
    assert not can_manage_project(person, project)

    membership.role = Membership.Role.MANAGER
    membership.save()
    assert can_manage_project(person, project)

    with roles_read_once():
        assert can_manage_project(person, project)
    membership.delete()
    assert project_role(person, project) is None  # the kept answer went with the block


def test_each_person_and_project_is_its_own_answer():
    first, second = UserFactory.create(), UserFactory.create()
    project, other = ProjectFactory.create(), ProjectFactory.create()
    MembershipFactory.create(project=project, user=first, role=Membership.Role.MANAGER)
    MembershipFactory.create(project=other, user=second, role=Membership.Role.PI)

    with roles_read_once():
        assert can_manage_project(first, project)
        assert not can_manage_project(second, project)
        assert not can_manage_project(first, other)
        assert is_pi(second, other)


def test_the_project_page_reads_the_viewer_s_role_once(client):
    manager = UserFactory.create()
    project = ProjectFactory.create()
    MembershipFactory.create(project=project, user=manager, role=Membership.Role.MANAGER)
    client.force_login(manager)

    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("allocations:project-detail", args=[project.code]))

    assert response.status_code == 200
    assert "manager" in response.content.decode()
    role_reads = [
        query["sql"]
        for query in queries
        if 'FROM "allocations_membership"' in query["sql"]
        and re.search(r'"allocations_membership"\."user_id" = \d', query["sql"])
    ]
    assert len(role_reads) == 1, role_reads

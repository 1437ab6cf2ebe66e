"""The project page's header names the viewer's role as the access rules define it."""

from __future__ import annotations

import pytest

from projects.models import Membership
from projects.selectors import role_in_project
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_the_header_names_each_role_of_a_project():
    pi, manager, member, staff, stranger = (UserFactory.create() for _ in range(5))
    staff.is_staff = True
    staff.save()
    project = ProjectFactory.create(pi=pi)
    MembershipFactory.create(project=project, user=manager, role=Membership.Role.MANAGER)
    MembershipFactory.create(project=project, user=member, role=Membership.Role.MEMBER)

    assert role_in_project(user=pi, project=project) == "PI"
    # Labelled "member" before: the PI's proxy runs the project and the header says so.
    assert role_in_project(user=manager, project=project) == "manager"
    assert role_in_project(user=member, project=project) == "member"
    assert role_in_project(user=staff, project=project) == "staff"
    assert role_in_project(user=stranger, project=project) == ""


def test_a_member_row_with_the_pi_role_is_the_pi():
    pi = UserFactory.create()
    project = ProjectFactory.create()
    MembershipFactory.create(project=project, user=pi, role=Membership.Role.PI)
    assert role_in_project(user=pi, project=project) == "PI"

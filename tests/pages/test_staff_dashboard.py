"""The staff dashboard: no "you are not a member" for staff, and every project's use."""

from __future__ import annotations

import pytest

from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def test_staff_see_every_project_with_its_use_and_no_membership_hint(site):
    page = client_for(site.users["staff"]).get("/").content.decode()
    assert "You are not a member of any project yet" not in page
    assert "Used this budget period" in page
    project_row = page[page.index(f">{site.project.code}</a></td>") :].split("</tr>")[0]
    assert " %</span>" in project_row  # the scenario's project holds grants

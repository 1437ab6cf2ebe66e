"""The journey "a grant expires and the project is archived", in Chromium: pawsey0009's only
grant ended months ago; the daily task (on the real Celery worker) expires and archives it; its
PI sees the archived banner and no write action, still reads its jobs, and a request on it is
refused with the sentence (docs/allocations.md, "When a grant ends")."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from allocations.grants.services import allocation_grant
from allocations.tasks import grant_endings_task
from projects.models import Project
from tests.factories import (
    MembershipFactory,
    ProjectFactory,
    ResourcePoolFactory,
    UserFactory,
    example_cluster,
)

REFUSAL = "pawsey0009 is archived: it is read-only"


@pytest.fixture
def ended(transactional_db):
    cluster = example_cluster("slurm-testbed")
    pool = ResourcePoolFactory.create(name="testbed CPU", cluster=cluster, partitions=["work"])
    pi = UserFactory.create(username="petra")
    staff = UserFactory.create(username="staff", is_staff=True)
    project = ProjectFactory.create(code="pawsey0009", title="Coastal models", pi=pi)
    MembershipFactory.create(project=project, user=UserFactory.create(username="max"))
    today = timezone.localdate()
    allocation_grant(
        project=project, pool=pool, amount=Decimal(1000), actor=staff,
        period_start=today - timedelta(days=300), period_end=today - timedelta(days=120),
    )  # fmt: skip
    return project


def test_a_grant_ends_and_the_archived_project_is_read_only_for_its_pi(
    ended, celery_worker, live_server, sign_in
):
    outcome = grant_endings_task.delay().get(timeout=60)  # the beat's daily run, on the worker
    assert outcome["archived"] == ["pawsey0009"]
    ended.refresh_from_db()
    assert ended.status == Project.Status.ARCHIVED

    page = sign_in("petra")
    page.goto(f"{live_server.url}/allocations/projects/pawsey0009/")
    banner = page.locator("#archived-banner")
    banner.wait_for()
    assert "pawsey0009 is archived: it is read-only." in banner.inner_text()
    for action in ("Apply for SU", "Send invitation", "New request →", "Remove", "Un-archive"):
        assert page.get_by_text(action, exact=True).count() == 0, action
    assert page.locator("form[action$='/remove/']").count() == 0
    page.get_by_role("link", name="Jobs", exact=True).click()
    page.wait_for_url("**/accounting/projects/pawsey0009/jobs/")
    assert page.locator("#archived-banner").is_visible()

    # A request typed by hand (or from a page left open) is refused with the sentence.
    page.goto(f"{live_server.url}/allocations/projects/pawsey0009/requests/new/")
    page.wait_for_url(f"{live_server.url}/allocations/projects/pawsey0009/")
    assert page.locator("ul.messages li.error").inner_text() == REFUSAL
    assert page.errors == []

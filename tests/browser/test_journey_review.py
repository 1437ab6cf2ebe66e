"""Journey: the chair assigns a reviewer to a request in Chromium; the reviewer walks from the
round's page to the request, reads the applicant's record (and the project's summary the
project link leads a reviewer to) and submits a review; a member the chair did not assign is
refused (docs/allocations.md, "The applicant's record")."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.ledger.pipeline import jobs_import
from allocations.grants.services import allocation_grant
from allocations.models import Review
from allocations.rounds.services import (
    request_create,
    request_review_start,
    request_submit,
    round_create,
)
from benchmarks.sacct_generator import sacct_lines
from kit.calendar import add_months
from tests.factories import ProjectFactory, ResourcePoolFactory, UserFactory, example_cluster

pytestmark = pytest.mark.django_db(transaction=True)


def _round_with_a_request():
    """pawsey0001 (PI alice) ran jobs in the last week under a grant made by staff, and asks
    the round "2027 call" (chair dana; erin and fred on its committee) for 5000 CPU SU."""
    cluster = example_cluster("slurm-testbed")
    users = {name: UserFactory.create(username=name) for name in ("alice", "dana", "erin", "fred")}
    staff = UserFactory.create(username="ops", is_staff=True)
    project = ProjectFactory.create(code="pawsey0001", title="Climate", pi=users["alice"])
    cpu = ResourcePoolFactory.create(name="testbed CPU", cluster=cluster, partitions=["work"])
    ResourcePoolFactory.create(name="testbed GPU", cluster=cluster, partitions=["gpu"])
    now = timezone.now()
    today = timezone.localdate()
    allocation_grant(
        project=project, pool=cpu, amount=Decimal(8000), period_start=add_months(today, -9),
        period_end=add_months(today, 3), actor=staff,
    )  # fmt: skip
    history = sacct_lines(
        lines=300, seed=7, start=now - timedelta(days=8), now=now,
        mean_gap_seconds=int(8 * 86400 / (300 / 4.2)),
    )  # fmt: skip
    jobs_import(cluster=cluster, lines=history, source="generated history")
    round_ = round_create(
        name="2027 call", opens_at=now - timedelta(days=2), closes_at=now + timedelta(days=5),
        period_start=add_months(today, 3), period_end=add_months(today, 15),
        available={cpu: Decimal(100_000)}, chair=users["dana"],
        committee=[users["erin"], users["fred"]], actor=staff,
    )  # fmt: skip
    request = request_create(
        round_=round_, project=project, actor=users["alice"], amounts={cpu: Decimal(5000)},
        justification="the next campaign",
    )  # fmt: skip
    request_submit(request=request, actor=users["alice"])
    request_review_start(request=request, actor=users["dana"])
    return round_, request


def test_a_reviewer_reads_the_record_and_reviews_the_request_assigned_to_them(live_server, sign_in):
    round_, request = _round_with_a_request()
    request_url = f"{live_server.url}/allocations/requests/{request.pk}/"

    chair = sign_in("dana")
    chair.goto(request_url)
    chair.locator("#assignments").get_by_label("Committee member").select_option(label="erin")
    chair.locator("#assignments").get_by_role("button", name="Assign").click()
    chair.get_by_text("erin is assigned to review this request.").wait_for()
    assert "erin" in chair.locator("#assignments").inner_text()

    reviewer = sign_in("erin")
    reviewer.goto(f"{live_server.url}/allocations/rounds/{round_.pk}/")
    reviewer.get_by_role("link", name="pawsey0001").first.click()
    reviewer.wait_for_url(request_url)
    reviewer.get_by_role("link", name="Review", exact=True).click()
    reviewer.wait_for_url(re.compile(r".*/review/$"))
    record = reviewer.locator("#record")
    assert "Asks for" in record.locator("#ask-total").inner_text()
    assert "work from" in record.locator("#record-repricing + p + .table-wrap").inner_text()
    assert "testbed CPU" in record.inner_text()
    # The project's link leads a reviewer to the project's summary, not to a 404.
    reviewer.get_by_role("link", name="pawsey0001").first.click()
    reviewer.wait_for_url(re.compile(r".*/review/#project$"))
    assert "Climate" in reviewer.locator("#project").inner_text()
    reviewer.get_by_label("4", exact=True).check()
    reviewer.fill("#id_comment", "A steady user: the ask is twice last year's.")
    reviewer.get_by_role("button", name="Save review").click()
    # Back to the round (the browser keeps the page's #project across the redirect).
    reviewer.wait_for_url(re.compile(rf".*/allocations/rounds/{round_.pk}/(#project)?$"))
    reviewer.get_by_text("Review saved.").wait_for()
    assert Review.objects.get(request=request, reviewer__username="erin").score == 4

    other = sign_in("fred")  # on the committee, not assigned: neither reviews nor reads
    response = other.goto(f"{request_url}review/")
    assert response is not None
    assert response.status == 403
    other.goto(request_url)
    assert other.locator("#record").count() == 0
    assert "reviewers the chair assigned" in other.locator("#project").inner_text()
    assert chair.errors == []
    assert reviewer.errors == []

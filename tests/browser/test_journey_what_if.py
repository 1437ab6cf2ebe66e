"""Journey: the chair opens an oversubscribed round in Chromium, runs a pro rata what-if, changes
one proposal with its reason, applies the draft and sees the requests granted
(docs/allocations.md, "Fitting a round to capacity")."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from allocations.models import AllocationRequest, RequestAmount
from allocations.rounds.services import (
    request_create,
    request_review_start,
    request_submit,
    review_submit,
    round_create,
)
from kit.calendar import add_months
from tests.factories import ProjectFactory, ResourcePoolFactory, UserFactory, example_cluster

pytestmark = pytest.mark.django_db(transaction=True)


def _round() -> tuple[AllocationRequest, AllocationRequest]:
    """A round of 1,000 CPU SU (chair dana, reviewer erin); pawsey0001 asks 1,000 and
    pawsey0002 500, both under review and scored."""
    cluster = example_cluster("slurm-testbed")
    users = {name: UserFactory.create(username=name) for name in ("alice", "bob", "dana", "erin")}
    cpu = ResourcePoolFactory.create(name="testbed CPU", cluster=cluster, partitions=["work"])
    now = timezone.now()
    start = timezone.localdate() + timedelta(days=30)
    round_ = round_create(
        name="2027 call", opens_at=now - timedelta(days=20), closes_at=now + timedelta(days=5),
        period_start=start, period_end=add_months(start, 12), available={cpu: Decimal(1000)},
        chair=users["dana"], committee=[users["erin"]],
        actor=UserFactory.create(username="ops", is_staff=True),
    )  # fmt: skip
    requests = []
    for code, pi, asked, score in (
        ("pawsey0001", "alice", 1000, 5),
        ("pawsey0002", "bob", 500, 3),
    ):
        project = ProjectFactory.create(code=code, title=code, pi=users[pi])
        request = request_create(
            round_=round_, project=project, actor=users[pi], amounts={cpu: Decimal(asked)},
            justification="science",
        )  # fmt: skip
        request_submit(request=request, actor=users[pi])
        request_review_start(request=request, actor=users["dana"])
        review_submit(request=request, reviewer=users["erin"], score=score)
        requests.append(request)
    return requests[0], requests[1]


def _no_serious_violation(page, axe_script) -> None:
    """axe-core on the page as it stands (as tests/browser/test_accessibility.py runs it)."""
    page.add_script_tag(path=str(axe_script))
    violations = page.evaluate("axe.run(document, {resultTypes: ['violations']})")["violations"]
    serious = [v["id"] for v in violations if v["impact"] in {"serious", "critical"}]
    assert serious == [], f"{page.url}: {serious}"


def test_the_chair_fits_the_round_edits_one_proposal_and_applies(live_server, sign_in, axe_script):
    climate, genomics = _round()
    chair = sign_in("dana")
    chair.goto(f"{live_server.url}/allocations/rounds/{climate.round_id}/")
    capacity = chair.locator("#round-capacity").inner_text()
    assert "50.0 % oversubscribed" in capacity

    chair.get_by_role("link", name="Fit the round to capacity (what-if) →").click()
    chair.wait_for_url("**/what-if/")
    _no_serious_violation(chair, axe_script)
    chair.select_option("#id_method", "pro_rata")
    chair.get_by_role("button", name="Propose grants").click()
    chair.wait_for_url("**/what-if/*/")
    # 1,500 asked of 1,000: every request cut by 2/3.
    first = chair.locator("tr[data-project='pawsey0001']")
    second = chair.locator("tr[data-project='pawsey0002']")
    assert first.locator("input[name='proposed_su']").input_value() == "666.666666"
    assert second.locator("input[name='proposed_su']").input_value() == "333.333333"
    assert "factor 0.666666" in first.locator("input[name='reason']").input_value()
    _no_serious_violation(chair, axe_script)

    second.locator("input[name='proposed_su']").fill("300")
    second.locator("input[name='reason']").fill("the pilot runs need less")
    second.get_by_role("button", name="Change").click()
    chair.locator(".messages", has_text="300 SU proposed").wait_for()
    assert "changed" in chair.locator("tr[data-project='pawsey0002']").inner_text()

    chair.get_by_role("button", name="Apply this what-if").click()
    chair.wait_for_url(f"**/allocations/rounds/{climate.round_id}/")
    chair.locator(".messages", has_text="The what-if is applied").wait_for()
    figures = chair.locator("#round-capacity").inner_text()
    assert "not oversubscribed" in figures

    chair.goto(f"{live_server.url}/allocations/requests/{genomics.pk}/")
    assert chair.locator("#request-state").inner_text() == "partially granted"
    assert "the pilot runs need less" in chair.locator("body").inner_text()
    granted = {
        amount.request.project.code: amount.granted_su
        for amount in RequestAmount.objects.select_related("request__project")
    }
    assert granted == {"pawsey0001": Decimal("666.666666"), "pawsey0002": Decimal(300)}
    assert chair.errors == []

"""Journey: a PI whose budget is nearly spent asks for a top-up from the alert on the project
page, in Chromium; the chair of the round that granted the grant decides it in Chromium; the
balance shows the SU (docs/allocations.md, "Changing an allocation")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounting.ledger.pipeline import jobs_import
from allocations.grants.selectors import balance_get
from allocations.models import AllocationRequest, AllocationRound
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_review_start,
    request_submit,
    round_create,
)
from benchmarks.sacct_generator import sacct_lines
from kit.calendar import add_months
from projects.models import Project, ResourcePool
from tests.factories import ProjectFactory, ResourcePoolFactory, UserFactory, example_cluster

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Granted:
    project: Project
    cpu: ResourcePool
    gpu: ResourcePool
    round: AllocationRound
    application: AllocationRequest  # decided: 1000 CPU SU granted, 200 of 500 GPU SU
    users: dict[str, User]


def granted_project(*, history_lines: int = 0, used_share: Decimal | None = None) -> Granted:
    """pawsey0001 (PI alice) holds grants made by the chair (dana) of a round whose period
    began ten days ago; with ``history_lines`` generated jobs and ``used_share``, its current
    CPU budget is sized so that it has used that share of it."""
    cluster = example_cluster("slurm-testbed")
    users = {name: UserFactory.create(username=name) for name in ("alice", "dana", "erin")}
    project = ProjectFactory.create(code="pawsey0001", title="Climate", pi=users["alice"])
    cpu = ResourcePoolFactory.create(name="testbed CPU", cluster=cluster, partitions=["work"])
    gpu = ResourcePoolFactory.create(name="testbed GPU", cluster=cluster, partitions=["gpu"])
    now = timezone.now()
    start = timezone.localdate() - timedelta(days=10)
    round_ = round_create(
        name="granting round", opens_at=now - timedelta(days=20), closes_at=now + timedelta(days=5),
        period_start=start, period_end=add_months(start, 12),
        available={cpu: Decimal(100_000), gpu: Decimal(1000)}, chair=users["dana"],
        committee=[users["erin"]], actor=UserFactory.create(username="ops", is_staff=True),
    )  # fmt: skip
    application = request_create(
        round_=round_, project=project, actor=users["alice"],
        amounts={cpu: Decimal(1000), gpu: Decimal(500)}, justification="the next campaign",
    )  # fmt: skip
    request_submit(request=application, actor=users["alice"])
    request_review_start(request=application, actor=users["dana"])
    request_decide(
        request=application, actor=users["dana"], reason="the GPU pool is oversubscribed",
        granted={cpu: Decimal(1000), gpu: Decimal(200)},
    )  # fmt: skip
    if history_lines:
        history = sacct_lines(
            lines=history_lines, seed=7, start=now - timedelta(days=8), now=now,
            mean_gap_seconds=int(8 * 86400 / (history_lines / 4.2)),
        )  # fmt: skip
        jobs_import(cluster=cluster, lines=history, source="generated history")
    if used_share is not None:
        balance = balance_get(project=project, pool=cpu)
        assert balance is not None
        assert balance.used_su > 0
        period = project.allocations.get(pool=cpu).budget_periods.order_by("start").first()
        assert period is not None
        period.budget_su = (balance.used_su / used_share).quantize(Decimal(1), ROUND_HALF_UP)
        period.save(update_fields=["budget_su"])
    application.refresh_from_db()
    return Granted(
        project=project, cpu=cpu, gpu=gpu, round=round_, application=application, users=users
    )


def _available(page, pool_pk: int) -> int:
    card = page.locator(f"section[aria-labelledby='pool-{pool_pk}']")
    text = card.locator(".stat", has_text="Available").locator(".value").inner_text()
    return int(re.sub(r"\D", "", text))


def test_a_pi_tops_up_from_the_alert_and_the_chair_grants_it(live_server, sign_in):
    granted = granted_project(history_lines=150, used_share=Decimal("0.93"))
    project_url = f"{live_server.url}/allocations/projects/pawsey0001/"

    pi = sign_in("alice")
    pi.goto(project_url)
    before = _available(pi, granted.cpu.pk)
    alert = pi.locator(f"section[aria-labelledby='pool-{granted.cpu.pk}'] .alert")
    assert "used: past the 90" in alert.inner_text()
    alert.get_by_role("link", name="Ask for a top-up").click()
    pi.wait_for_url("**kind=top_up**")
    assert pi.locator("#id_pool").input_value() == str(granted.cpu.pk)  # the alert's pool
    pi.fill("#id_su", "5000 SU")  # not a number: said on the field, nothing lost
    pi.fill("#id_justification", "The campaign's last runs before the deadline.")
    pi.get_by_role("button", name="Save draft").click()
    pi.locator(".field", has=pi.locator("#id_su")).locator(".errorlist").wait_for()
    assert "as a number" in pi.locator(".field", has=pi.locator("#id_su")).inner_text()
    assert "last runs" in pi.locator("#id_justification").input_value()
    pi.fill("#id_su", "5000")
    pi.get_by_role("button", name="Save draft").click()
    pi.wait_for_url(re.compile(r".*/allocations/requests/\d+/$"))
    request_url = pi.url
    pi.get_by_role("button", name="Submit", exact=True).click()
    pi.locator("#request-state", has_text="submitted").wait_for()
    assert "dana" in pi.locator("#next-step").inner_text()  # the chair behind the grant

    chair = sign_in("dana")  # from the round whose decision made the grant
    chair.goto(f"{live_server.url}/allocations/rounds/{granted.round.pk}/")
    changes = chair.locator("#changes-to-decide")
    assert "top-up" in changes.inner_text()
    changes.get_by_role("link", name="Decide").click()
    chair.get_by_role("button", name="Record the decision").click()
    chair.wait_for_url(request_url)
    chair.locator("#request-state", has_text="granted").wait_for()

    pi.goto(project_url)
    assert _available(pi, granted.cpu.pk) == before + 5000
    assert pi.locator("#adjustments", has_text="Adjustments").count() == 1
    assert "top-up request" in pi.locator("section[aria-labelledby='adjustments']").inner_text()
    assert pi.errors == []
    assert chair.errors == []

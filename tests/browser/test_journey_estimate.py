"""Journey in Chromium: on a draft application's page the PI types SU and a justification, does
not press Save, and adds an estimate line: the line is added and what was typed is still there;
then types a line and presses Enter in it (Save): the line is still there as typed; a line
left half typed does not stop Save (issue 31, item 8; docs/allocations.md, "Requests")."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from allocations.rounds.services import request_create, round_create
from kit.calendar import add_months
from tests.factories import ProjectFactory, ResourcePoolFactory, UserFactory, example_cluster

pytestmark = pytest.mark.django_db(transaction=True)


def test_adding_an_estimate_line_keeps_the_su_typed_and_not_saved(live_server, sign_in):
    cluster = example_cluster("slurm-testbed")
    alice = UserFactory.create(username="alice")
    project = ProjectFactory.create(code="pawsey0001", title="Climate", pi=alice)
    cpu = ResourcePoolFactory.create(name="testbed CPU", cluster=cluster, partitions=["work"])
    now = timezone.now()
    today = timezone.localdate()
    round_ = round_create(
        name="2027 call", opens_at=now - timedelta(days=2), closes_at=now + timedelta(days=5),
        period_start=add_months(today, 3), period_end=add_months(today, 15),
        available={cpu: Decimal(100_000)}, chair=UserFactory.create(username="dana"),
        actor=UserFactory.create(username="ops", is_staff=True),
    )  # fmt: skip
    draft = request_create(round_=round_, project=project, actor=alice, justification="x")

    pi = sign_in("alice")
    pi.goto(f"{live_server.url}/allocations/requests/{draft.pk}/")
    pi.fill(f"#id_pool_{cpu.pk}", "3000")
    pi.fill("#id_justification", "Typed, and Save never pressed.")
    pi.fill("#id_jobs", "10")
    pi.fill("#id_hours", "2")
    pi.get_by_role("button", name="Add to the estimate").click()
    pi.get_by_text("Estimate added: 2,560 SU.").wait_for()

    assert pi.locator(f"#id_pool_{cpu.pk}").input_value() == "3000"
    assert pi.locator("#id_justification").input_value() == "Typed, and Save never pressed."
    assert draft.estimates.count() == 1
    assert draft.amounts.get(pool=cpu).requested_su == Decimal(3000)

    # Enter in one of the line's fields presses the draft's Save: the line stays as typed.
    pi.fill("#id_jobs", "7")
    pi.locator("#id_jobs").press("Enter")
    pi.get_by_text("The estimate line typed below is not added yet").wait_for()
    assert pi.locator("#id_jobs").input_value() == "7"
    assert draft.estimates.count() == 1

    # A line left half typed (a required field emptied) does not stop Save.
    pi.fill("#id_jobs", "")
    pi.fill(f"#id_pool_{cpu.pk}", "3500")
    pi.get_by_role("button", name="Save", exact=True).click()
    pi.wait_for_url(re.compile(r"[?&]jobs=(&|$)"))  # saved, and the emptied field kept empty
    assert draft.amounts.get(pool=cpu).requested_su == Decimal(3500)
    assert pi.errors == []

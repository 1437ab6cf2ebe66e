"""One balance everywhere: on random ledgers, the project page, the dashboard, the API, the
``su-balance`` command's JSON and enforcement show the same figures, because they all read
``allocations.grants.selectors`` (``_balances``: one implementation).

Each example grants SU on both pools over budget periods around today, books usage on random
days (before and inside the periods), leaves jobs running, adjusts (refunds, top-ups,
transfers) and may let unused SU carry over; then it reads every surface."""

from __future__ import annotations

import importlib.util
import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from accounting.models import Job, Partition
from allocations.grants.selectors import balance_for_period, balance_get, pool_today
from allocations.grants.services import (
    AllocationError,
    adjustment_refund,
    adjustment_top_up,
    adjustment_transfer,
    allocation_grant,
)
from allocations.models import BudgetPeriod
from allocations.slurm.enforcement import thresholds_check
from kit.calendar import add_months
from tests.factories import usage_day_add

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("su_balance", ROOT / "clients" / "su_balance.py")
assert _spec is not None
assert _spec.loader is not None
su_balance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(su_balance)

FIELDS = (
    "budget_su", "carried_in_su", "adjustments_su", "available_su", "used_su", "pending_su",
    "remaining_su", "reserved_su", "free_su", "percent_used", "used_last_7_days_su",
    "used_last_30_days_su", "burn_rate_7_days", "burn_rate_30_days", "projected_exhaustion",
)  # fmt: skip

amounts = st.integers(min_value=1, max_value=2_000_000).map(lambda units: Decimal(units) / 1000)
ledgers = st.fixed_dictionaries(
    {
        "grants": st.tuples(amounts, amounts),
        "months": st.sampled_from([1, 3, 12]),  # budget period length of the CPU pool
        "carry_over": st.booleans(),
        "usage": st.lists(
            st.tuples(st.integers(0, 1), st.integers(-200, 40), amounts), max_size=10
        ),
        # A running job's pending SU and what it reserves (None: imported before the column,
        # so it reserves its pending SU).
        "running": st.lists(st.tuples(st.integers(0, 1), amounts, st.none() | amounts), max_size=3),
        "adjustments": st.lists(
            st.tuples(st.sampled_from(["refund", "top_up", "transfer"]), amounts), max_size=4
        ),
    }
)


class _TestClientPortal(su_balance.Portal):  # type: ignore[name-defined]
    """su-balance's own client code, its requests answered by the portal in this process."""

    def __init__(self, client: APIClient) -> None:
        super().__init__("http://testserver", "unused")
        self.client = client

    def get(self, path, params=None):
        response = self.client.get(f"/api/v1/{path}", params or {})
        assert response.status_code == 200, response.content
        return response.json()


def _figures(balance) -> dict[str, str | None]:
    """A balance's figures as the API writes them (6 decimals, percent with 2, ISO dates)."""
    values: dict[str, str | None] = {}
    for name in FIELDS:
        value = getattr(balance, name)
        if value is None:
            values[name] = None
        elif name == "projected_exhaustion":
            values[name] = value.isoformat()
        elif name == "percent_used":
            values[name] = f"{value:.2f}"
        else:
            values[name] = f"{value:.6f}"
    return values


def _build(centre, ledger):
    today = pool_today(centre.cpu)
    start = today.replace(day=1) - timedelta(days=62)
    centre.cpu.carry_over = ledger["carry_over"]
    centre.cpu.budget_months = ledger["months"]
    centre.cpu.save()
    for pool, amount in zip((centre.cpu, centre.gpu), ledger["grants"], strict=True):
        allocation_grant(
            project=centre.p3, pool=pool, amount=amount, period_start=start,
            period_end=add_months(start, 12), actor=centre.staff,
        )  # fmt: skip
    partitions = [Partition.objects.get(cluster=centre.cluster, name=n) for n in ("work", "gpu")]
    for index, offset, amount in ledger["usage"]:
        usage_day_add(
            centre.p3, partitions[index], "carol", today + timedelta(days=offset - 40),
            service_units=amount, jobs=1,
        )  # fmt: skip
    for number, (index, amount, reserved) in enumerate(ledger["running"]):
        Job.objects.create(
            cluster=centre.cluster, job_id_raw=f"77{number}", job_id=f"77{number}",
            project=centre.p3, username="carol", partition=partitions[index], state="RUNNING",
            state_raw="RUNNING", pending_service_units=amount, reserved_service_units=reserved,
        )  # fmt: skip
    for kind, amount in ledger["adjustments"]:
        try:
            if kind == "refund":
                adjustment_refund(project=centre.p3, pool=centre.cpu, actor=centre.staff,
                                  reason="r", amount=amount)  # fmt: skip
            elif kind == "top_up":
                adjustment_top_up(project=centre.p3, pool=centre.cpu, actor=centre.staff,
                                  reason="t", amount=amount)  # fmt: skip
            else:
                adjustment_transfer(source=centre.p3, target=centre.p1, pool=centre.cpu,
                                    amount=amount, actor=centre.staff, reason="x")  # fmt: skip
        except AllocationError:
            pass  # refused (more than the balance holds): nothing changed
    return today


@pytest.mark.django_db
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ledger=ledgers)
def test_page_dashboard_api_cli_and_enforcement_show_the_same_balance(centre, client, ledger):
    with transaction.atomic():
        today = _build(centre, ledger)
        api = APIClient()
        api.force_authenticate(centre.alice)
        client.force_login(centre.alice)

        expected = {}
        for index, pool in enumerate((centre.cpu, centre.gpu)):
            balance = balance_get(project=centre.p3, pool=pool)
            assert balance is not None
            assert balance.on == today
            expected[pool.name] = _figures(balance)
            held = [r if r is not None else a for i, a, r in ledger["running"] if i == index]
            assert balance.reserved_su == sum(held, Decimal(0))
            assert balance.free_su == balance.available_su - balance.used_su - balance.reserved_su

        answer = api.get("/api/v1/projects/pawsey0003/balance/").json()
        from_api = {
            item["pool"]: {f: item["current"][f] for f in FIELDS} for item in answer["pools"]
        }
        assert from_api == expected

        cli = json.loads(json.dumps(su_balance.collect(
            _TestClientPortal(api), project="pawsey0003", year=False, users=False
        )))  # fmt: skip
        from_cli = {item["pool"]: {f: item["current"][f] for f in FIELDS}
                    for item in cli[0]["pools"]}  # fmt: skip
        assert from_cli == expected

        page = client.get("/allocations/projects/pawsey0003/")
        from_page = {entry["pool"].name: _figures(entry["balance"])
                     for entry in page.context["pools"]}  # fmt: skip
        assert from_page == expected

        dashboard = client.get("/")
        card = next(c for c in dashboard.context["cards"] if c["project"].code == "pawsey0003")
        assert {e["pool"].name: _figures(e["balance"]) for e in card["pools"]} == expected

        for pool in (centre.cpu, centre.gpu):
            period = BudgetPeriod.objects.get(
                allocation__project=centre.p3, allocation__pool=pool,
                start__lte=today, end__gt=today,
            )  # fmt: skip
            assert _figures(balance_for_period(period=period, on=today)) == expected[pool.name]
        report = thresholds_check(on=today)
        crossed = {(n.budget_period.allocation.pool.name, n.threshold) for n in report.notices}
        for pool in (centre.cpu, centre.gpu):
            percent = expected[pool.name]["percent_used"]
            wanted = {t for t in pool.thresholds if percent is not None and Decimal(percent) >= t}
            assert {t for name, t in crossed if name == pool.name} == wanted
        transaction.set_rollback(True)


@pytest.mark.django_db
def test_a_tiny_grant_far_overspent_is_noticed_not_a_crash(centre):
    """Found by the test above: 0.001 SU granted and 100,000 used is 10^10 % used, more than
    a notice records; the thresholds check failed for every project with a DataError."""
    today = pool_today(centre.cpu)
    allocation_grant(
        project=centre.p3, pool=centre.cpu, amount=Decimal("0.001"),
        period_start=today.replace(day=1), period_end=add_months(today.replace(day=1), 1),
        actor=centre.staff,
    )  # fmt: skip
    work = Partition.objects.get(cluster=centre.cluster, name="work")
    usage_day_add(
        centre.p3,
        work,
        "carol",
        today,
        service_units=Decimal(100_000),
        jobs=1,
    )

    report = thresholds_check(on=today)

    assert {notice.threshold for notice in report.notices} == {75, 90, 100}
    assert all(notice.percent_used == Decimal("9999999.99") for notice in report.notices)

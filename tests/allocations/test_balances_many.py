"""Balances of many projects at once: the same figures as one by one, in a fixed number of
queries (the staff dashboard, issue 33)."""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounting.ledger.pipeline import jobs_import
from accounting.ledger.selectors import LedgerWanted, pool_ledger_get, pools_ledger_get
from accounting.models import Partition, UsageDaily
from allocations.grants.selectors import (
    _balances_of,
    balances_for_project,
    balances_for_projects,
    grant_balances_of,
    project_balances_get,
)
from allocations.grants.services import adjustment_refund, adjustment_top_up, allocation_grant
from allocations.models import Allocation
from tests.allocations.conftest import PERIOD, SAMPLE, SAMPLE_DAY
from tests.factories import ProjectFactory, usage_day_add

SECOND_QUARTER = date(2027, 2, 1)


def _use(project, partition, day, amount):
    usage_day_add(
        project,
        partition,
        "u",
        day,
        service_units=Decimal(amount),
        cost=(Decimal(amount) / 10).quantize(Decimal("0.000001")),  # as the column keeps it
        jobs=1,
    )


@pytest.fixture
def busy(centre):
    """Three projects on two pools (the CPU pool carries unused SU over), each with usage over
    several quarters, a refund and a top-up, and the sample's running jobs pending."""
    centre.cpu.carry_over = True
    centre.cpu.save()
    work = Partition.objects.get(cluster=centre.cluster, name="work")
    gpu = Partition.objects.get(cluster=centre.cluster, name="gpu")
    for index, project in enumerate((centre.p1, centre.p2, centre.p3)):
        for pool in (centre.cpu, centre.gpu):
            allocation_grant(
                project=project, pool=pool, amount=Decimal(400 + 40 * index),
                period_start=PERIOD[0], period_end=PERIOD[1], actor=centre.staff,
            )  # fmt: skip
        for offset in range(0, 130, 9):  # usage in the first and second quarters
            day = PERIOD[0] + timedelta(days=offset)
            _use(project, work, day, f"{3 + index}.123456")
            _use(project, gpu, day, f"{1 + offset % 4}.5")
        adjustment_refund(
            project=project, pool=centre.cpu, actor=centre.staff, reason="node fault",
            amount=Decimal("7.25"), on=date(2026, 10, 20),
        )  # fmt: skip
        adjustment_top_up(
            project=project, pool=centre.gpu, amount=Decimal(30 + index), actor=centre.staff,
            reason="campaign", on=SECOND_QUARTER,
        )  # fmt: skip
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    return centre


@pytest.mark.parametrize("on", [SAMPLE_DAY, SECOND_QUARTER, date(2027, 9, 30), None])
def test_many_projects_read_at_once_have_exactly_the_balances_each_has_alone(busy, on):
    projects = [busy.p1, busy.p2, busy.p3]
    together = balances_for_projects(projects=projects, on=on, grants=True)
    for project in projects:
        alone = balances_for_project(project=project, on=on, grants=True)
        assert together[project.pk] == alone
        assert len(alone) == 2
    carried = {item.pool.pk: item.balance for item in together[busy.p2.pk]}
    if on == SECOND_QUARTER:  # the test covers what it says: SU carried in, top-up, refund
        assert carried[busy.cpu.pk].carried_in_su > 0
        assert carried[busy.gpu.pk].adjustments_su == Decimal(31)


@pytest.mark.parametrize("on", [SAMPLE_DAY, SECOND_QUARTER])
def test_the_balances_days_are_the_rollups_per_day_of_the_period_up_to_its_day(busy, on):
    """The burn-down's points come with the balance (no query of their own): each day of the
    period up to ``on`` with its SU on the pool's partitions, as the daily roll-ups sum them."""
    days_seen = 0
    for project in (busy.p1, busy.p2, busy.p3):
        for item in balances_for_project(project=project, on=on, per_day=True):
            balance = item.balance
            until = min(balance.end, balance.on + timedelta(days=1))
            expected = {}
            for row in UsageDaily.objects.filter(
                project=project, partition__in=item.pool.partitions.all(),
                day__gte=balance.start, day__lt=until,
            ).order_by("day"):  # fmt: skip
                expected[row.day] = expected.get(row.day, Decimal(0)) + row.service_units
            assert dict(balance.used_per_day) == expected
            days_seen += len(expected)
            assert [day for day, _ in balance.used_per_day] == sorted(expected)
            assert sum(expected.values(), Decimal(0)) <= balance.used_su
            if on >= balance.end - timedelta(days=1):
                assert sum(expected.values(), Decimal(0)) == balance.used_su
    assert days_seen > 10


@pytest.mark.parametrize("on", [PERIOD[0], SAMPLE_DAY, SECOND_QUARTER, date(2027, 9, 30), None])
@pytest.mark.parametrize(
    "asked",
    [{}, {"grants": True}, {"all_periods": True}, {"all_periods": True, "grants": True}],
    ids=["current", "grants", "all periods", "all periods and grants"],
)
def test_balances_read_per_range_of_days_equal_those_read_per_day(busy, on, asked):
    """Without their days, balances read one sum per range between the days their sums start
    and end at (_cuts): every figure is the one the per-day read gives, to the last SU."""
    projects = [busy.p1, busy.p2, busy.p3]
    per_range = _balances_of(projects=projects, on=on, **asked)
    per_day = _balances_of(projects=projects, on=on, per_day=True, **asked)
    compared = 0
    for project in projects:
        for ranged, daily in zip(per_range[project.pk].pools, per_day[project.pk].pools,
                                 strict=True):  # fmt: skip
            assert ranged.grants == daily.grants
            assert len(ranged.periods) == len(daily.periods)
            for one, other in zip(ranged.periods, daily.periods, strict=True):
                assert one.used_per_day == ()
                assert one == dataclasses.replace(other, used_per_day=())
                compared += 1
            if daily.current is not None:
                assert ranged.current == dataclasses.replace(daily.current, used_per_day=())
    assert compared >= 6


def test_the_ledger_read_per_range_gives_a_sum_per_range_not_a_row_per_day(busy):
    """What the staff dashboard reads: one sum per range between cuts, however many days of
    the range had use; each the sum of those days."""
    pools = [busy.cpu.pk, busy.gpu.pk]
    daily = pool_ledger_get(project_id=busy.p2.pk, pool_ids=pools, since=PERIOD[0],
                            until=PERIOD[1]).used  # fmt: skip
    cut = PERIOD[0] + timedelta(days=45)
    wanted = LedgerWanted(pool_ids=pools, since=PERIOD[0], until=PERIOD[1],
                          cuts={pool: [cut] for pool in pools})  # fmt: skip
    ranged = pools_ledger_get(wanted={busy.p2.pk: wanted})[busy.p2.pk].used
    for pool in pools:
        assert len(daily[pool]) > 8  # a day of use in every nine
        before = sum((amount for day, amount in daily[pool] if day < cut), Decimal(0))
        after = sum((amount for day, amount in daily[pool] if day >= cut), Decimal(0))
        assert ranged[pool] == [(PERIOD[0], before), (cut, after)]


def test_a_project_without_a_grant_reads_no_pools_among_others(busy):
    empty = ProjectFactory(code="pawsey0099", pi=busy.bob)
    found = balances_for_projects(projects=[busy.p1, empty], on=SAMPLE_DAY)
    assert found[empty.pk] == []
    assert found[busy.p1.pk] == balances_for_project(project=busy.p1, on=SAMPLE_DAY)


def test_grants_of_many_projects_match_each_projects_own(busy):
    allocations = list(Allocation.objects.select_related("project"))
    found = grant_balances_of(allocations=allocations)
    for project in (busy.p1, busy.p2, busy.p3):
        for pool in project_balances_get(project=project, grants=True).pools:
            for grant in pool.grants:
                assert found[grant.allocation_id] == grant
    assert len(found) == 6


def test_the_balances_of_many_projects_take_three_queries(busy, django_assert_num_queries):
    with django_assert_num_queries(3):
        balances_for_projects(projects=[busy.p1, busy.p2, busy.p3], on=SAMPLE_DAY)


def _projects_with_grants(centre, count):
    projects = []
    for number in range(count):
        project = ProjectFactory(code=f"scale{number:04d}", pi=centre.bob)
        for pool in (centre.cpu, centre.gpu):
            allocation_grant(
                project=project, pool=pool, amount=Decimal(100), period_start=PERIOD[0],
                period_end=PERIOD[1], actor=centre.staff,
            )  # fmt: skip
        projects.append(project)
    return projects


def _dashboard_queries(client):
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/")
    assert response.status_code == 200
    return len(queries), response


def test_the_staff_dashboard_takes_as_many_queries_for_40_projects_as_for_5(
    centre, client, django_assert_max_num_queries
):
    client.force_login(centre.staff)
    _projects_with_grants(centre, 5)
    few, response = _dashboard_queries(client)
    assert b"scale0004" in response.content
    _projects_with_grants(centre, 35)[0]
    many, response = _dashboard_queries(client)
    assert b"scale0019" in response.content  # a full page of projects with their balances
    assert many == few
    with django_assert_max_num_queries(20):
        client.get("/")
    page = response.context["all_projects"]
    assert all(len(project.pool_use) == 2 for project in page if project.code.startswith("scale"))

"""The efficiency read side: ratios of sums of the roll-ups, the jobs without usage data counted
apart, months, groups, distributions by overlapping month, and the users who left the most SU
on the table. Rows are written by hand so every expected figure is computed on paper."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from accounting.ledger.efficiency_selectors import (
    EfficiencyFilters,
    efficiency_by,
    efficiency_by_month,
    efficiency_distributions,
    efficiency_summary,
    efficiency_top_users,
)
from accounting.models import EfficiencyBucket, EfficiencyDaily, EfficiencySums, UsageDaily
from projects.models import Project
from tests.factories import PartitionFactory, ProjectFactory, efficiency_rollups_add

pytestmark = pytest.mark.django_db


@pytest.fixture
def centre():
    work = PartitionFactory(name="work")
    gpu = PartitionFactory(name="gpu", cluster=work.cluster)
    alpha, beta = ProjectFactory(code="alpha"), ProjectFactory(code="beta")
    # alice, alpha, work, March: 3 jobs, 2 measured.
    efficiency_rollups_add(
        alpha, work, "alice", date(2026, 3, 10), jobs=3, measured=2,
        service_units=Decimal(100), right_sized_service_units=Decimal(40),
        core_hours_held=Decimal(100), core_hours_used=Decimal(25),
        memory_jobs=1, memory_mb_hours_held=Decimal(1000), memory_mb_hours_used=Decimal(100),
        walltime_jobs=2, hours_run=Decimal(2), hours_asked=Decimal(8),
    )  # fmt: skip
    # bob, alpha, gpu, April: 1 job, measured, with GPUs.
    efficiency_rollups_add(
        alpha, gpu, "bob", date(2026, 4, 2), jobs=1, measured=1,
        service_units=Decimal(64), right_sized_service_units=Decimal(48),
        core_hours_held=Decimal(8), core_hours_used=Decimal(6),
        gpu_jobs=1, gpu_hours_held=Decimal(4), gpu_hours_used=Decimal(1),
        walltime_jobs=1, hours_run=Decimal(1), hours_asked=Decimal(1),
    )  # fmt: skip
    # carol, beta, work, April: 5 jobs, none measured.
    efficiency_rollups_add(beta, work, "carol", date(2026, 4, 20), jobs=5, measured=0,
         service_units=Decimal(500))  # fmt: skip
    for metric, bucket, jobs in (("cpu", 2, 2), ("memory", 0, 1), ("walltime", 2, 2)):
        EfficiencyBucket.objects.create(
            project=alpha, partition=work, username="alice", month=date(2026, 3, 1),
            metric=metric, bucket=bucket, jobs=jobs,
        )  # fmt: skip
    for metric, bucket in (("cpu", 7), ("gpu", 2), ("walltime", 9)):
        EfficiencyBucket.objects.create(
            project=alpha, partition=gpu, username="bob", month=date(2026, 4, 1),
            metric=metric, bucket=bucket, jobs=1,
        )  # fmt: skip
    return alpha, beta


def test_summary_is_a_ratio_of_sums_and_counts_unmeasured_jobs_apart(centre):
    totals = efficiency_summary(projects=Project.objects.all(), filters=EfficiencyFilters())
    assert totals.jobs == 9
    assert totals.charged_service_units == Decimal(664)  # every job's: 100 + 64 + 500
    assert totals.measured_jobs == 3
    assert totals.unmeasured_jobs == 6
    assert totals.cpu == Decimal("0.2870")  # (25 + 6) / (100 + 8)
    assert totals.memory == Decimal("0.1000")  # 100 / 1000
    assert totals.gpu == Decimal("0.2500")  # 1 / 4
    assert totals.walltime == Decimal("0.3333")  # (2 + 1) / (8 + 1)
    assert totals.service_units == Decimal(164)  # the measured jobs' SU only
    assert totals.su_left_on_the_table == Decimal(76)  # 164 - (40 + 48)


def test_nothing_measured_gives_no_ratio_not_zero(centre):
    _, beta = centre
    totals = efficiency_summary(
        projects=Project.objects.all(), filters=EfficiencyFilters(project=beta.code)
    )
    assert (totals.jobs, totals.measured_jobs) == (5, 0)
    assert (totals.cpu, totals.memory, totals.gpu, totals.walltime) == (None,) * 4
    assert totals.su_left_on_the_table == 0


def test_filters_narrow_by_user_partition_and_days(centre):
    everything = Project.objects.all()
    bob = efficiency_summary(projects=everything, filters=EfficiencyFilters(username="bob"))
    assert (bob.jobs, bob.cpu) == (1, Decimal("0.7500"))
    work = efficiency_summary(projects=everything, filters=EfficiencyFilters(partition="work"))
    assert (work.jobs, work.measured_jobs) == (8, 2)
    april = efficiency_summary(
        projects=everything,
        filters=EfficiencyFilters(start=date(2026, 4, 1), end=date(2026, 5, 1)),
    )
    assert (april.jobs, april.measured_jobs, april.su_left_on_the_table) == (6, 1, 16)


def test_only_the_projects_given_are_read(centre):
    alpha, _ = centre
    totals = efficiency_summary(
        projects=Project.objects.filter(pk=alpha.pk), filters=EfficiencyFilters()
    )
    assert totals.jobs == 4


def test_months_hold_every_month_with_jobs(centre):
    months = efficiency_by_month(projects=Project.objects.all(), filters=EfficiencyFilters())
    assert [row.key for row in months] == [date(2026, 3, 1), date(2026, 4, 1)]
    assert months[0].totals.cpu == Decimal("0.2500")
    assert (months[1].totals.jobs, months[1].totals.measured_jobs) == (6, 1)


def test_groups_put_the_most_su_left_first(centre):
    users = efficiency_by(projects=Project.objects.all(), filters=EfficiencyFilters(), group="user")
    assert [(row.key, row.totals.su_left_on_the_table) for row in users] == [
        ("alice", Decimal(60)), ("bob", Decimal(16)), ("carol", Decimal(0)),
    ]  # fmt: skip
    assert users[2].totals.unmeasured_jobs == 5
    partitions = efficiency_by(
        projects=Project.objects.all(), filters=EfficiencyFilters(), group="partition"
    )
    assert [row.key for row in partitions] == ["work", "gpu"]


def test_distributions_count_whole_months_that_overlap_the_period(centre):
    everything = Project.objects.all()
    mid_april = efficiency_distributions(
        projects=everything, filters=EfficiencyFilters(start=date(2026, 4, 15))
    )
    assert mid_april["cpu"] == [0, 0, 0, 0, 0, 0, 0, 1, 0, 0]  # April counted whole
    ends_first_of_april = efficiency_distributions(
        projects=everything, filters=EfficiencyFilters(end=date(2026, 4, 1))
    )
    assert ends_first_of_april["cpu"] == [0, 0, 2, 0, 0, 0, 0, 0, 0, 0]  # March only
    assert ends_first_of_april["gpu"] == [0] * 10
    assert (
        sum(efficiency_distributions(projects=everything, filters=EfficiencyFilters())["walltime"])
        == 3
    )


def test_top_users_are_ranked_by_su_left_and_name_their_projects(centre):
    top = efficiency_top_users(projects=Project.objects.all(), filters=EfficiencyFilters())
    assert [(user.username, user.totals.su_left_on_the_table) for user in top] == [
        ("alice", Decimal(60)), ("bob", Decimal(16)),
    ]  # fmt: skip
    assert top[0].projects == ["alpha"]
    assert top[0].totals.cpu == Decimal("0.2500")
    assert top[0].totals.unmeasured_jobs == 1
    assert len(efficiency_top_users(projects=Project.objects.all(),
                                    filters=EfficiencyFilters(), limit=1)) == 1  # fmt: skip


def test_the_months_of_a_period_add_up_to_its_summary(centre):
    """The API's summary is the sum of its months (one pass over the roll-ups)."""
    from accounting.ledger.efficiency_selectors import totals_added

    projects = Project.objects.all()
    filters = EfficiencyFilters()

    assert totals_added(efficiency_by_month(projects=projects, filters=filters)) == (
        efficiency_summary(projects=projects, filters=filters)
    )


PERIODS = [
    (None, None),
    (date(2026, 3, 1), date(2026, 5, 1)),  # whole months only
    (date(2026, 3, 10), date(2026, 4, 3)),  # days at both ends, no whole month
    (date(2026, 3, 11), None),  # days of March, then whole months
    (None, date(2026, 4, 3)),  # whole months, then days of April
    (date(2026, 2, 15), date(2026, 4, 21)),  # days, a whole month, days
    (date(2026, 4, 2), date(2026, 4, 3)),  # one day
    (date(2026, 4, 20), date(2026, 4, 20)),  # nothing
    (date(2026, 4, 1), date(2026, 5, 1)),  # one whole month
]


@pytest.mark.parametrize(("start", "end"), PERIODS)
def test_whole_months_and_the_days_at_the_ends_give_what_the_days_alone_give(centre, start, end):
    """The months come from EfficiencyMonthly and the days at a period's ends from the daily
    rows: every total is what the daily rows of the period add up to."""
    filters = EfficiencyFilters(start=start, end=end)
    totals = efficiency_summary(projects=Project.objects.all(), filters=filters)

    def within(day: date) -> bool:
        return (start is None or day >= start) and (end is None or day < end)

    charged = [row for row in UsageDaily.objects.all() if within(row.day)]
    measured = [row for row in EfficiencyDaily.objects.all() if within(row.day)]
    assert totals.jobs == sum(row.jobs for row in charged)
    assert totals.charged_service_units == sum(row.service_units for row in charged)
    assert totals.measured_jobs == sum(row.jobs for row in measured)
    for field in EfficiencySums._meta.fields:
        if field.name != "jobs":
            assert getattr(totals, field.name) == sum(getattr(r, field.name) for r in measured)
    months = efficiency_by_month(projects=Project.objects.all(), filters=filters)
    assert [row.key for row in months] == sorted({row.day.replace(day=1) for row in charged})
    users = efficiency_by(projects=Project.objects.all(), filters=filters, group="user")
    assert sorted(row.key for row in users) == sorted({row.username for row in charged})

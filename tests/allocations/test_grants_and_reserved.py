"""Issue 27, items 3 and 6: every grant with its status, what queued and running jobs reserve
(priced once by the import at their size and time limit) and what is free once they end, and
the Slurm account of each pool; one definition, in the one balance."""

from __future__ import annotations

import re
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from accounting.ledger.pipeline import jobs_import
from accounting.ledger.policy import reserved_for
from accounting.models import Job, Partition
from allocations.grants.budget import Balance, GrantStatus, grant_status
from allocations.grants.selectors import (
    balance_get,
    balances_for_project,
    pool_today,
    project_balances_get,
)
from allocations.grants.services import adjustment_top_up, allocation_grant
from allocations.models import BudgetPeriod
from kit.calendar import add_months
from projects.accounts import submit_commands
from tests.allocations.conftest import PERIOD, SAMPLE_DAY
from tests.factories import usage_day_add
from tests.pages.conftest import client_for

# --- The status rule (pure) ------------------------------------------------------------------


def test_a_grant_is_future_before_its_first_day_current_to_its_last_and_ended_the_day_after():
    start, end = date(2027, 1, 1), date(2028, 1, 1)  # end: the day after the last day

    def status(day: date) -> GrantStatus:
        return grant_status(start=start, end=end, today=day)

    assert status(date(2026, 12, 31)) == GrantStatus.FUTURE
    assert status(start) == GrantStatus.CURRENT
    assert status(date(2027, 12, 31)) == GrantStatus.CURRENT  # the last day
    assert status(end) == GrantStatus.ENDED  # the day after
    assert status(date(2030, 6, 1)) == GrantStatus.ENDED


def test_a_job_reserves_its_price_at_its_limit_what_it_used_without_one_and_nothing_once_done():
    assert reserved_for(
        finished=False, pending_service_units=Decimal(3), at_time_limit=Decimal(10)
    ) == Decimal(10)
    # A job past what its limit would cost (a limit raised while it runs) holds what it used.
    assert reserved_for(
        finished=False, pending_service_units=Decimal(12), at_time_limit=Decimal(10)
    ) == Decimal(12)
    assert reserved_for(
        finished=False, pending_service_units=Decimal(3), at_time_limit=None
    ) == Decimal(3)
    assert (
        reserved_for(finished=True, pending_service_units=Decimal(0), at_time_limit=Decimal(10))
        is None
    )


def test_free_is_remaining_less_reserved_and_the_balance_identity_is_unchanged():
    balance = Balance(
        start=date(2026, 10, 1), end=date(2027, 1, 1), budget_su=Decimal(100),
        carried_in_su=Decimal(5), adjustments_su=Decimal(-2), used_su=Decimal(40),
        pending_su=Decimal(3), used_last_7_days_su=Decimal(0), used_last_30_days_su=Decimal(0),
        on=date(2026, 11, 22), reserved_su=Decimal("70.5"),
    )  # fmt: skip
    assert balance.remaining_su == Decimal(63) == balance.available_su - balance.used_su
    assert balance.free_su == Decimal("-7.5")  # jobs may hold more than is left


def test_one_account_per_partition_of_the_pool_by_the_naming_rule():
    assert submit_commands("pawsey0004-gpu", ["gpu"]) == [
        "sbatch --account=pawsey0004-gpu --partition=gpu"
    ]
    assert submit_commands("pawsey0004", ["work", "highmem"]) == [
        "sbatch --account=pawsey0004 --partition=highmem",
        "sbatch --account=pawsey0004 --partition=work",
    ]
    assert submit_commands("pawsey0004", []) == ["sbatch --account=pawsey0004"]


# --- Reserved and free through the real import -------------------------------------------------

HEADER = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|Elapsed|"
    "ElapsedRaw|NNodes|NCPUS|NodeList|ReqTRES|AllocTRES|ReqMem|ConsumedEnergyRaw|TimelimitRaw"
)
SIZE = "billing=8,cpu=8,mem=14G,node=1"


def _line(job: str, state: str, start: str, end: str, elapsed: int, limit: str) -> str:
    held = SIZE if start != "Unknown" else ""  # a queued job holds nothing yet: no AllocTRES
    nodes = "nid1001" if held else "None assigned"
    return (
        f"{job}|{job}|reserve|carol|pawsey0003|work|normal|{state}|0:0|2026-11-22T01:00:00|"
        f"{start}|{end}|00:00:00|{elapsed}|1|8|{nodes}|{SIZE}|{held}|14G|0|{limit}"
    )


# One job of 8 cores for its whole 2-hour limit, finished; the same job queued, running for an
# hour and running for half an hour without a limit.
FINISHED = _line("3000001", "COMPLETED", "2026-11-22T02:00:00", "2026-11-22T04:00:00", 7200, "120")
QUEUED = _line("3000002", "PENDING", "Unknown", "Unknown", 0, "120")
RUNNING = _line("3000003", "RUNNING", "2026-11-22T02:00:00", "Unknown", 3600, "120")
UNLIMITED = _line("3000004", "RUNNING", "2026-11-22T02:00:00", "Unknown", 1800, "UNLIMITED")


@pytest.fixture
def granted(centre):
    allocation_grant(
        project=centre.p3, pool=centre.cpu, amount=Decimal(400), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=centre.staff,
    )  # fmt: skip
    return centre


def _import(centre, *lines: str) -> None:
    jobs_import(cluster=centre.cluster, lines=[HEADER, *lines], source="reserve.psv")


def test_queued_and_running_jobs_reserve_their_size_and_time_limit_and_finished_ones_nothing(
    granted,
):
    _import(granted, FINISHED, QUEUED, RUNNING, UNLIMITED)
    jobs = {job.job_id: job for job in Job.objects.filter(job_name="reserve")}
    whole = jobs["3000001"].service_units  # what the job costs over its whole limit
    assert whole > 0
    assert jobs["3000001"].reserved_service_units is None
    # Queued: nothing held yet, priced at its request (ReqTRES) for its 2-hour limit.
    assert jobs["3000002"].reserved_service_units == whole
    assert jobs["3000002"].pending_service_units == 0
    # Running for half its limit: half pending, all of it reserved.
    assert jobs["3000003"].pending_service_units == whole / 2
    assert jobs["3000003"].reserved_service_units == whole
    # No limit: it holds what it used so far.
    assert (
        jobs["3000004"].reserved_service_units == whole / 4 == jobs["3000004"].pending_service_units
    )

    balance = balance_get(project=granted.p3, pool=granted.cpu, on=SAMPLE_DAY)
    assert balance is not None
    assert balance.used_su == whole
    assert balance.pending_su == whole / 2 + whole / 4
    assert balance.reserved_su == whole + whole + whole / 4
    # A quarter of the 400 SU grant is this budget period's.
    assert balance.remaining_su == balance.available_su - balance.used_su == 100 - whole
    assert balance.free_su == balance.remaining_su - balance.reserved_su
    # The project page and the dashboard show them beside the remaining SU.
    shown = f"{balance.reserved_su:,.0f} reserved · {balance.free_su:,.0f} free"
    for url in (reverse("allocations:project-detail", args=["pawsey0003"]), reverse("home")):
        assert shown in client_for(granted.carol).get(url).content.decode()
    # The dashboard's sentence on them gives the same figures ("12,288", not "12,288.0").
    home = client_for(granted.carol).get(reverse("home")).content.decode()
    reserve = f"reserve {balance.reserved_su:,.0f} SU at their size and time limit: "
    assert reserve + f"{balance.free_su:,.0f} SU free once they end" in home
    assert f"Plus {balance.pending_su:,.0f} SU pending on running jobs" in home
    project = reverse("allocations:project-detail", args=["pawsey0003"])
    assert (
        f"+ {balance.pending_su:,.0f} pending"
        in client_for(granted.carol).get(project).content.decode()
    )

    # The running job ends within its limit: it is charged and reserves nothing any more.
    ended = RUNNING.replace("|RUNNING|", "|COMPLETED|").replace(
        "|2026-11-22T02:00:00|Unknown|", "|2026-11-22T02:00:00|2026-11-22T03:00:00|"
    )
    _import(granted, ended)
    assert Job.objects.get(job_id="3000003").reserved_service_units is None
    after = balance_get(project=granted.p3, pool=granted.cpu, on=SAMPLE_DAY)
    assert after is not None
    assert after.reserved_su == whole + whole / 4
    assert after.used_su == whole + whole / 2
    assert after.free_su == after.available_su - after.used_su - after.reserved_su


def test_reserved_counts_in_the_budget_period_of_the_day_only(granted):
    _import(granted, QUEUED)
    (pool,) = project_balances_get(project=granted.p3, on=SAMPLE_DAY, all_periods=True).pools
    assert pool.current is not None
    assert pool.current.reserved_su > 0
    assert pool.periods[0] == pool.current
    assert [period.reserved_su for period in pool.periods[1:]] == [0, 0, 0]


# --- Every grant, its status and figures; the account; the project page -----------------------


@pytest.fixture
def three_grants(centre):
    """pawsey0003 on the CPU pool: last year's grant (ended), this year's (current, 10 SU
    topped up, 50 used yesterday) and next year's (future); the CPU pool has its own account
    suffix."""
    today = pool_today(centre.cpu)
    start = today.replace(day=1)
    spans = [
        (add_months(start, -12), start, 1000),
        (start, add_months(start, 12), 1200),
        (add_months(start, 12), add_months(start, 24), 80000),
    ]
    for first, end, amount in spans:
        allocation_grant(
            project=centre.p3, pool=centre.cpu, amount=Decimal(amount), period_start=first,
            period_end=end, actor=centre.staff,
        )  # fmt: skip
    adjustment_top_up(
        project=centre.p3, pool=centre.cpu, amount=Decimal(10), actor=centre.staff, reason="x"
    )
    usage_day_add(
        centre.p3,
        Partition.objects.get(cluster=centre.cluster, name="work"),
        "carol",
        max(today - timedelta(days=1), start),
        service_units=Decimal(50),
        jobs=1,
    )
    centre.cpu.slurm_account_suffix = "-cpu"
    centre.cpu.save(update_fields=["slurm_account_suffix"])
    return centre, spans


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_every_grant_of_a_pool_with_its_status_and_figures(three_grants):
    centre, spans = three_grants
    (pool,) = balances_for_project(project=centre.p3, grants=True)
    assert [(g.start, g.end, g.status) for g in pool.grants] == [
        (spans[0][0], spans[0][1], GrantStatus.ENDED),
        (spans[1][0], spans[1][1], GrantStatus.CURRENT),
        (spans[2][0], spans[2][1], GrantStatus.FUTURE),
    ]
    current = pool.grants[1]
    assert (current.granted_su, current.adjustments_su, current.used_su) == (1200, 10, 50)
    assert current.remaining_su == 1160
    assert (pool.grants[2].used_su, pool.grants[2].remaining_su) == (0, 80000)
    assert pool.account == "pawsey0003-cpu"
    assert pool.submit_with == ["sbatch --account=pawsey0003-cpu --partition=work"]
    # Staff changed a budget period by hand: the grant counts what its periods hold, as
    # every balance does.
    last = BudgetPeriod.objects.filter(allocation_id=current.allocation_id).latest("start")
    last.budget_su = Decimal(500)
    last.save(update_fields=["budget_su"])
    (pool,) = balances_for_project(project=centre.p3, grants=True)
    assert pool.grants[1].granted_su == 300 * 3 + 500


def test_the_allocations_api_gives_each_grants_status_used_and_remaining(three_grants):
    centre, spans = three_grants
    client = _api(centre.carol)
    body = client.get("/api/v1/allocations/?project=pawsey0003").json()
    found = [
        (row["period_start"], row["status"], row["used_su"], row["remaining_su"])
        for row in body["results"]
    ]
    assert found == [
        (spans[0][0].isoformat(), "ended", "0.000000", "1000.000000"),
        (spans[1][0].isoformat(), "current", "50.000000", "1160.000000"),
        (spans[2][0].isoformat(), "future", "0.000000", "80000.000000"),
    ]
    row = body["results"][1]
    assert row["granted_su"] == "1200.000000"  # the fields it had keep their values
    assert row["adjustments_su"] == "10.000000"
    assert row["period_last_day"] == (spans[1][1] - timedelta(days=1)).isoformat()
    one = client.get(f"/api/v1/allocations/{row['id']}/").json()
    assert one["status"] == "current"
    # Someone outside the project sees none of its grants, as before.
    outsider = _api(centre.bob)
    assert outsider.get("/api/v1/allocations/?project=pawsey0003").json()["results"] == []


def test_the_balance_api_lists_the_grants_and_the_account_with_periods_all(three_grants):
    centre, _ = three_grants
    client = _api(centre.carol)
    body = client.get("/api/v1/projects/pawsey0003/balance/?periods=all").json()
    (pool,) = body["pools"]
    assert pool["account"] == "pawsey0003-cpu"
    assert pool["submit_with"] == ["sbatch --account=pawsey0003-cpu --partition=work"]
    assert [grant["status"] for grant in pool["grants"]] == ["ended", "current", "future"]
    assert pool["current"]["reserved_su"] == "0.000000"
    assert pool["current"]["free_su"] == pool["current"]["remaining_su"]
    assert client.get("/api/v1/projects/pawsey0003/balance/").json()["pools"][0]["grants"] == []


def test_the_project_page_lists_every_grant_and_says_which_account_to_use(three_grants):
    centre, _ = three_grants
    content = (
        client_for(centre.carol)
        .get(reverse("allocations:project-detail", args=["pawsey0003"]))
        .content.decode()
    )
    shown = re.sub(r"</?span[^>]*>", "", content)  # each word of the command in a span
    assert "<code>sbatch --account=pawsey0003-cpu --partition=work</code>" in shown
    (pool,) = balances_for_project(project=centre.p3, grants=True)
    for grant in pool.grants:
        row = content[content.index(f'id="grant-{grant.allocation_id}"') :]
        row = row[: row.index("</tr>")]
        assert grant.start.isoformat() in row
        assert grant.last_day.isoformat() in row
        assert f'class="badge grant-{grant.status}">{grant.status}<' in row
    assert "1,160" in content  # the current grant's remaining SU
    assert "SU, none reserved" in content


def test_the_project_page_reads_no_more_queries_for_more_grants(three_grants):
    centre, spans = three_grants
    client = client_for(centre.carol)
    url = reverse("allocations:project-detail", args=["pawsey0003"])
    client.get(url)  # the charts are cached under the ledger's stamp: count a warm page

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    before = queries()
    for years in (3, 4, 5):  # after the three grants
        allocation_grant(
            project=centre.p3, pool=centre.cpu, amount=Decimal(5), actor=centre.staff,
            period_start=add_months(spans[0][0], 12 * years),
            period_end=add_months(spans[0][0], 12 * (years + 1)),
        )  # fmt: skip
    content = client.get(url).content.decode()
    assert content.count('class="badge grant-future"') == 4
    assert queries() == before

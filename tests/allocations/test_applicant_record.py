"""The applicant's record (issue 28, item 1): its figures on a small hand-built project, every
one computed on paper; who reads it (pages and API) and who assigns reviewers.

pawsey0003 (PI alice, member carol) asks the round "desk" (period 2027) for 2500 SU on CPU and
100 on GPU; its request's day is 2026-11-27, so the record's quarters are 2025 Q4 to 2026 Q3
and the last year runs from 2025-11-27. It holds a grant of 4000 SU on CPU for 2026 (1000 a
quarter) and a top-up of 500 in 2026 Q2. The partition "work" gets a second rate version on
2027-01-01 whose weight is 2 SU per node-hour: every job there costs 2 x hours x its share of
the node at the round's rates (a quarter of a node is 0.5 SU an hour).
"""

from __future__ import annotations

import importlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from itertools import count

import pytest
from django.apps import apps
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from accounting.ledger.repricing import reprice_project
from accounting.models import Job, Partition, PartitionVersion
from allocations.access import can_read_record, can_review
from allocations.grants.services import AllocationError, adjustment_top_up, allocation_grant
from allocations.models import (
    AllocationRequest,
    ProgressReport,
    RequestEstimate,
    ResearchOutput,
    ReviewAssignment,
)
from allocations.rounds.record import Ask, applicant_record
from allocations.rounds.services import (
    request_create,
    request_review_start,
    request_submit,
    review_assign,
    review_submit,
    review_unassign,
    round_create,
)
from tests.allocations.conftest import open_round_times
from tests.factories import UserFactory, efficiency_rollups_add

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)  # the request's day
ROUND_PERIOD = (date(2027, 1, 1), date(2028, 1, 1))
_numbers = count(1)
TIMES = "\N{MULTIPLICATION SIGN}"


def _shape_rollups_fill() -> None:
    """The per-shape roll-ups of the jobs made here by hand (an import keeps them itself):
    what re-pricing reads, filled as migration accounting 0021 fills them."""
    backfill = importlib.import_module("accounting.migrations.0021_usage_shape_monthly")
    backfill.shapes_backfill(apps, connection.schema_editor())


def _job(project, partition, end, *, cpus, memory_mb, elapsed, charged, nnodes=1, state="charged"):
    number = str(next(_numbers))
    return Job.objects.create(
        cluster=partition.cluster, job_id_raw=number, job_id=number,
        project=project, username="alice", partition=partition, state="COMPLETED",
        state_raw="COMPLETED", start=end - timedelta(seconds=elapsed), end=end,
        elapsed_seconds=elapsed, nnodes=nnodes, cpus=cpus, memory_mb=Decimal(memory_mb),
        charge_state=state, service_units=Decimal(charged),
    )  # fmt: skip


@pytest.fixture
def desk(centre):
    """The round, pawsey0003's request under review, and its history (module docstring)."""
    p3, cpu, gpu = centre.p3, centre.cpu, centre.gpu
    work = Partition.objects.get(cluster=centre.cluster, name="work")
    first = PartitionVersion.objects.get(partition=work)
    PartitionVersion.objects.create(
        **{
            field.name: getattr(first, field.name)
            for field in PartitionVersion._meta.concrete_fields
            if field.name not in ("id", "number", "effective_from", "created_at")
        }
        | {
            "number": 2, "effective_from": datetime(2027, 1, 1, tzinfo=UTC),
            "weight_override": Decimal(2), "weight_override_reason": "the 2027 rates",
        }
    )  # fmt: skip
    member = UserFactory(username="member2")
    opens, closes = open_round_times()
    round_ = round_create(
        name="desk", opens_at=opens, closes_at=closes, period_start=ROUND_PERIOD[0],
        period_end=ROUND_PERIOD[1], available={cpu: Decimal(10000), gpu: Decimal(1000)},
        chair=centre.chair, committee=[centre.reviewer, member, centre.carol],
        actor=centre.staff,
    )  # fmt: skip
    allocation_grant(
        project=p3, pool=cpu, amount=Decimal(4000), period_start=date(2026, 1, 1),
        period_end=date(2027, 1, 1), actor=centre.staff,
    )  # fmt: skip
    adjustment_top_up(
        project=p3, pool=cpu, amount=Decimal(500), actor=centre.staff, reason="more",
        on=date(2026, 5, 1),
    )  # fmt: skip
    # Daily roll-ups: used CPU SU per quarter 100 | 400 | 600 | 200, and 50 in 2026 Q4.
    efficiency_rollups_add(p3, work, "alice", date(2025, 11, 10), jobs=2, measured=0,
                           service_units=Decimal(100))  # fmt: skip
    efficiency_rollups_add(
        p3, work, "alice", date(2026, 2, 10), jobs=10, measured=10,
        service_units=Decimal(400), right_sized_service_units=Decimal(300),
        core_hours_held=Decimal(400), core_hours_used=Decimal(200), walltime_jobs=10,
        hours_run=Decimal(40), hours_asked=Decimal(80),
    )  # fmt: skip
    efficiency_rollups_add(p3, work, "alice", date(2026, 5, 5), jobs=5, measured=0,
                           service_units=Decimal(600))  # fmt: skip
    efficiency_rollups_add(
        p3, work, "alice", date(2026, 8, 20), jobs=4, measured=4,
        service_units=Decimal(200), right_sized_service_units=Decimal(200),
        core_hours_held=Decimal(200), core_hours_used=Decimal(150), memory_jobs=4,
        memory_mb_hours_held=Decimal(1000), memory_mb_hours_used=Decimal(250),
    )  # fmt: skip
    efficiency_rollups_add(p3, work, "alice", date(2026, 11, 5), jobs=1, measured=0,
                           service_units=Decimal(50))  # fmt: skip
    # Jobs of the last year (what re-pricing reads), and two it leaves out.
    june = datetime(2026, 6, 1, 12, tzinfo=UTC)
    for _ in range(3):  # a 32nd of a node for an hour: 0.0625 SU at 2 SU a node-hour
        _job(p3, work, june, cpus=4, memory_mb=7000, elapsed=3600, charged="4")
    for _ in range(2):  # a whole node for half an hour: 1 SU
        _job(p3, work, june, cpus=128, memory_mb=245000, elapsed=1800, charged="64")
    for _ in range(2):  # 7 seconds on one core: 0.0000303819 SU, 0.000030 a job once rounded
        _job(p3, work, june, cpus=1, memory_mb=100, elapsed=7, charged="0.002")
    _job(p3, work, june, cpus=129, memory_mb=1000, elapsed=60, charged="10")  # fits no node
    _job(p3, work, june, cpus=0, memory_mb=0, elapsed=0, charged="0", nnodes=0)  # never ran
    _job(p3, work, datetime(2025, 11, 26, 23, tzinfo=UTC), cpus=4, memory_mb=7000, elapsed=3600,
         charged="4")  # before the last year  # fmt: skip
    _job(p3, work, june, cpus=4, memory_mb=7000, elapsed=3600, charged="0", state="refunded")
    _shape_rollups_fill()
    request = request_create(
        round_=round_, project=p3, actor=centre.alice,
        amounts={cpu: Decimal(2500), gpu: Decimal(100)},
    )  # fmt: skip
    request_submit(request=request, actor=centre.alice)
    request_review_start(request=request, actor=centre.chair)
    AllocationRequest.objects.filter(pk=request.pk).update(created_at=DAY)
    RequestEstimate.objects.create(
        request=request, partition=work, jobs=10, nodes=1, hours=Decimal(10),
        service_units=Decimal(1280),
    )  # fmt: skip
    before = ResearchOutput.objects.create(
        project=p3, kind="publication", title="Old paper", year=2025, added_by=centre.alice
    )
    after = ResearchOutput.objects.create(
        project=p3, kind="software", title="The code", url="https://example.org/code",
        added_by=centre.alice,
    )  # fmt: skip
    ResearchOutput.objects.filter(pk=before.pk).update(added_at=datetime(2025, 12, 1, tzinfo=UTC))
    ResearchOutput.objects.filter(pk=after.pk).update(added_at=datetime(2026, 3, 1, tzinfo=UTC))
    request.refresh_from_db()
    return {"round": round_, "request": request, "member": member, "work": work}


def _api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def _page(user):
    client = Client()
    client.force_login(user)
    return client


# --- The figures ------------------------------------------------------------------------------


def test_the_record_shows_each_quarters_grant_use_and_share_used(centre, desk):
    record = applicant_record(desk["request"])
    assert record.day == date(2026, 11, 27)
    assert [quarter.label for quarter in record.quarters] == [
        "2025 Q4", "2026 Q1", "2026 Q2", "2026 Q3",
    ]  # fmt: skip
    pools = {pool.pool_name: pool for pool in record.pools}
    assert set(pools) == {"testbed CPU", "testbed GPU"}
    cpu = pools["testbed CPU"].quarters
    assert [cell.granted_su for cell in cpu] == [0, 1000, 1500, 1000]
    assert [cell.used_su for cell in cpu] == [100, 400, 600, 200]
    assert [cell.share_used for cell in cpu] == [
        None, Decimal("0.40"), Decimal("0.40"), Decimal("0.20"),
    ]  # fmt: skip
    gpu = pools["testbed GPU"].quarters
    assert [(cell.granted_su, cell.used_su, cell.share_used) for cell in gpu] == [(0, 0, None)] * 4


def test_the_record_shows_efficiency_per_quarter_from_the_rollups(centre, desk):
    record = applicant_record(desk["request"])
    rows = {row.quarter.label: row.totals for row in record.efficiency}
    q1, q2, q3 = rows["2026 Q1"], rows["2026 Q2"], rows["2026 Q3"]
    assert (q1.jobs, q1.measured_jobs) == (10, 10)
    assert (q1.cpu, q1.walltime, q1.memory, q1.gpu) == (
        Decimal("0.5000"), Decimal("0.5000"), None, None,
    )  # fmt: skip
    assert q1.su_left_on_the_table == 100
    assert (q2.jobs, q2.measured_jobs, q2.cpu) == (5, 0, None)
    assert (q3.cpu, q3.memory, q3.su_left_on_the_table) == (
        Decimal("0.7500"), Decimal("0.2500"), 0,
    )  # fmt: skip
    assert rows["2025 Q4"].jobs == 2


def test_the_last_years_jobs_are_repriced_per_shape_at_the_rounds_rates(centre, desk):
    record = applicant_record(desk["request"])
    repricing = record.repricing
    assert (repricing.start, repricing.end, repricing.at) == (
        date(2025, 11, 27), date(2026, 11, 27), date(2027, 1, 1),
    )  # fmt: skip
    (work,) = repricing.partitions
    assert work.partition_name == "slurm-testbed/work"
    assert work.version_label == "work from 2027-01-01"
    assert work.version_id == PartitionVersion.objects.get(partition=desk["work"], number=2).pk
    # The job too big for a node and the one that never ran (no node to price) are unpriced.
    assert (work.jobs, work.unpriced_jobs) == (9, 2)
    assert work.charged_su == Decimal("150.004")  # 3 x 4 + 2 x 64 + 2 x 0.002 + 10
    # 3 x 0.0625 + 2 x 1 + 0.000061: the two 7-second jobs priced as one shape of 14
    # seconds, not 2 x 0.000030 rounded per job (the bound in "Re-pricing at the round's rates")
    assert work.repriced_su == Decimal("2.187561")
    assert repricing.charged_su == Decimal("150.004")
    assert record.repriced_change == Decimal("0.01")


def test_repricing_at_the_first_version_gives_back_the_engines_own_charge(centre, desk):
    """Under the version the jobs were charged by (C = 128: SU are core-hours), re-pricing
    gives what the import charged, to one quantum per shape: 3 x 4 + 2 x 64 + 14/3600."""
    repricing = reprice_project(
        centre.p3.pk, date(2025, 11, 27), date(2026, 11, 27), at=date(2026, 6, 1)
    )
    (work,) = repricing.partitions
    assert work.version_label == "work from 1970-01-01"
    assert work.repriced_su == Decimal("140.003889")  # 12 + 128 + 0.003889 (2 x 0.001944 + 1)


def test_the_record_puts_the_ask_against_last_years_use_and_the_estimate(centre, desk):
    record = applicant_record(desk["request"])
    asks = {ask.pool_name: ask for ask in record.asks}
    cpu, gpu = asks["testbed CPU"], asks["testbed GPU"]
    assert (cpu.requested_su, cpu.used_last_year_su) == (2500, 1250)  # 400 + 600 + 200 + 50
    assert cpu.in_words == f"asks for 2.0 {TIMES} last year's use"
    assert gpu.in_words == "no use in the last year"
    assert record.ask_total.requested_su == 2600
    assert record.ask_total.in_words == f"asks for 2.1 {TIMES} last year's use"
    assert record.estimate_total_su == 1280
    assert len(record.estimates) == 1
    small = Ask(pool_name="x", requested_su=Decimal(30000), used_last_year_su=Decimal(782930))
    assert small.in_words == f"asks for 0.04 {TIMES} last year's use"  # hundredths below 1


def test_the_record_lists_outputs_since_the_last_grant_and_the_progress_report(centre, desk):
    request = desk["request"]
    record = applicant_record(request)
    assert record.outputs_since == date(2026, 1, 1)
    assert [output.title for output in record.outputs] == ["The code"]
    assert record.progress_report is None
    ProgressReport.objects.create(request=request, text="We did it.", updated_by=centre.alice)
    request.refresh_from_db()
    assert applicant_record(request).progress_report.text == "We did it."


def test_a_project_that_began_lately_shows_only_its_quarters(centre, desk):
    """pawsey0002 has one grant from 2026-07-01 and no use: the record starts at 2026 Q3."""
    allocation_grant(
        project=centre.p2, pool=centre.cpu, amount=Decimal(400), period_start=date(2026, 7, 1),
        period_end=date(2027, 7, 1), actor=centre.staff,
    )  # fmt: skip
    request = request_create(
        round_=desk["round"], project=centre.p2, actor=centre.bob,
        amounts={centre.cpu: Decimal(300)},
    )  # fmt: skip
    AllocationRequest.objects.filter(pk=request.pk).update(created_at=DAY)
    request.refresh_from_db()
    record = applicant_record(request)
    assert [quarter.label for quarter in record.quarters] == ["2026 Q3"]
    (pool,) = record.pools
    assert [(cell.granted_su, cell.used_su) for cell in pool.quarters] == [(100, 0)]
    assert record.repricing.partitions == ()
    assert record.ask_total.in_words == "no use in the last year"
    assert record.estimate_total_su is None


# --- Who reads it -----------------------------------------------------------------------------


def test_without_assignments_the_whole_committee_reads_the_record_but_no_one_in_conflict(
    centre, desk
):
    request = desk["request"]
    for user in (centre.reviewer, desk["member"], centre.chair, centre.staff):
        assert can_read_record(user, request), user
    for user in (centre.carol, centre.alice, centre.bob):  # in the project, or not a reader
        assert not can_read_record(user, request), user
    url = f"/api/v1/requests/{request.pk}/record/"
    response = _api(desk["member"]).get(url)
    assert response.status_code == 200
    body = response.json()
    assert body["ask_total"]["in_words"] == f"asks for 2.1 {TIMES} last year's use"
    assert body["repricing"]["charged_su"] == "150.004000"
    assert body["repricing"]["partitions"][0]["version_label"] == "work from 2027-01-01"
    assert body["pools"][0]["quarters"][1] == {
        "granted_su": "1000.000000", "used_su": "400.000000", "share_used": "0.40",
    }  # fmt: skip
    assert body["project"] == {
        "code": "pawsey0003", "title": "Astro", "pi": "alice", "field_of_science": "",
    }  # fmt: skip
    # carol and alice see the request (they are in the project) but not the record: 403.
    assert _api(centre.carol).get(url).status_code == 403
    assert _api(centre.alice).get(url).status_code == 403
    assert _api(centre.bob).get(url).status_code == 404  # does not see the request
    assert _api(centre.staff).get(url).status_code == 200


def test_once_assigned_only_the_assigned_reviewers_review_and_read_the_record(centre, desk):
    request, member = desk["request"], desk["member"]
    review_assign(request=request, reviewer=centre.reviewer, actor=centre.chair)
    assert can_review(centre.reviewer, request)
    assert can_read_record(centre.reviewer, request)
    assert not can_review(member, request)
    assert not can_read_record(member, request)
    assert can_read_record(centre.chair, request)  # the chair reads every record
    url = f"/api/v1/requests/{request.pk}/record/"
    assert _api(member).get(url).status_code == 403
    assert _api(centre.reviewer).get(url).status_code == 200
    assert _page(member).get(f"/allocations/requests/{request.pk}/review/").status_code == 403
    round_page = _page(member).get(f"/allocations/rounds/{desk['round'].pk}/").content.decode()
    assert "assigned to other members" in round_page
    with pytest.raises(PermissionDenied):
        review_submit(request=request, reviewer=member, score=3)
    review_submit(request=request, reviewer=centre.reviewer, score=4)
    # Taken off again, the whole committee reviews it.
    review_unassign(request=request, reviewer=centre.reviewer, actor=centre.chair)
    assert can_read_record(member, request)


def test_a_member_in_conflict_cannot_be_assigned_and_nothing_changes(centre, desk):
    request = desk["request"]
    with pytest.raises(AllocationError, match="conflict of interest"):
        review_assign(request=request, reviewer=centre.carol, actor=centre.chair)
    with pytest.raises(PermissionDenied):
        review_assign(request=request, reviewer=desk["member"], actor=centre.reviewer)
    assert not ReviewAssignment.objects.exists()
    response = _page(centre.chair).post(
        f"/allocations/requests/{request.pk}/assignments/", {"reviewer": centre.carol.pk},
        follow=True,
    )  # fmt: skip
    assert "conflict of interest" in response.content.decode()
    assert not ReviewAssignment.objects.exists()


def test_a_chair_in_conflict_never_reads_the_record(centre, desk):
    opens, closes = open_round_times()
    chaired = round_create(
        name="chaired by carol", opens_at=opens, closes_at=closes,
        period_start=ROUND_PERIOD[0], period_end=ROUND_PERIOD[1],
        available={centre.cpu: Decimal(100)}, chair=centre.carol, committee=[centre.reviewer],
        actor=centre.staff,
    )  # fmt: skip
    own = request_create(
        round_=chaired, project=centre.p3, actor=centre.alice, amounts={centre.cpu: Decimal(5)}
    )
    request_submit(request=own, actor=centre.alice)
    assert not can_read_record(centre.carol, own)
    assert _api(centre.carol).get(f"/api/v1/requests/{own.pk}/record/").status_code == 403
    assert can_read_record(centre.reviewer, own)


def test_the_chair_assigns_and_removes_reviewers_through_the_api(centre, desk):
    request = desk["request"]
    url = f"/api/v1/requests/{request.pk}/assignments/"
    chair = _api(centre.chair)
    response = chair.post(url, {"username": "reviewer"}, format="json")
    assert response.status_code == 200, response.content
    assert [item["username"] for item in response.json()] == ["reviewer"]
    refused = chair.post(url, {"username": "carol"}, format="json")
    assert refused.status_code == 400
    assert "conflict of interest" in refused.content.decode()
    assert _api(centre.reviewer).post(url, {"username": "member2"}, format="json").status_code == (
        403
    )
    assert chair.delete(f"{url}reviewer/").status_code == 204
    assert not ReviewAssignment.objects.exists()
    assert chair.delete(f"{url}reviewer/").status_code == 404


def test_the_pages_show_the_record_and_link_the_project_for_each_role(centre, desk):
    request = desk["request"]
    detail = f"/allocations/requests/{request.pk}/"
    reviewer = _page(centre.reviewer).get(detail)
    content = reviewer.content.decode()
    assert 'id="record"' in content
    assert 'href="#project"' in content  # not the project page, which is 404 for them
    assert "/allocations/projects/pawsey0003/" not in content
    assert f"Asks for 2.1 {TIMES} last year&#x27;s use" in content
    review = _page(centre.reviewer).get(f"{detail}review/").content.decode()
    assert 'id="record"' in review
    assert "work from 2027-01-01" in review
    alice = _page(centre.alice).get(detail).content.decode()
    assert 'id="record"' not in alice  # the applicant has the project's own pages
    assert "/allocations/projects/pawsey0003/" in alice
    chair = _page(centre.chair).get(detail)
    assert chair.context["assign_form"] is not None
    assert 'id="assignments"' in chair.content.decode()

"""Projects, members, balances, rounds, requests, reviews, grants and adjustments over the API:
the same services as the pages, so the same rules and the same records."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from allocations.grants.selectors import balance_get
from allocations.models import (
    Adjustment,
    Allocation,
    AllocationRequest,
    BudgetPeriod,
    RequestTransition,
)
from projects.models import Membership, Project, ResourcePool
from tests.allocations.conftest import SAMPLE_DAY

pytestmark = pytest.mark.django_db


def _balance(client, code="pawsey0003", query="on=2026-11-22"):
    return client.get(f"/api/v1/projects/{code}/balance/?{query}")


def test_the_balance_has_every_figure_of_the_budget_period_per_pool(world):
    response = _balance(world.client("member"))
    assert response.status_code == 200
    body = response.json()
    assert (body["project"], body["title"]) == ("pawsey0003", "Astro")
    pools = {pool["pool"]: pool for pool in body["pools"]}
    assert set(pools) == {"testbed CPU", "testbed GPU"}
    cpu = pools["testbed CPU"]
    assert (cpu["cluster"], cpu["partitions"]) == ("slurm-testbed", ["work"])
    expected = balance_get(project=world.centre.p3, pool=world.centre.cpu, on=SAMPLE_DAY)
    current = cpu["current"]
    assert current == {
        "period_start": "2026-10-01",
        "period_end": "2027-01-01",
        "period_last_day": "2026-12-31",
        "budget_su": f"{expected.budget_su:.6f}",
        "carried_in_su": f"{expected.carried_in_su:.6f}",
        "adjustments_su": f"{expected.adjustments_su:.6f}",
        "available_su": f"{expected.available_su:.6f}",
        "used_su": f"{expected.used_su:.6f}",
        "pending_su": f"{expected.pending_su:.6f}",
        "remaining_su": f"{expected.remaining_su:.6f}",
        "reserved_su": f"{expected.reserved_su:.6f}",
        "free_su": f"{expected.free_su:.6f}",
        "percent_used": f"{expected.percent_used:.2f}",
        "used_last_7_days_su": f"{expected.used_last_7_days_su:.6f}",
        "used_last_30_days_su": f"{expected.used_last_30_days_su:.6f}",
        "burn_rate_7_days": f"{expected.burn_rate_7_days:.6f}",
        "burn_rate_30_days": f"{expected.burn_rate_30_days:.6f}",
        "projected_exhaustion": None,
        "on": "2026-11-22",
        "used_cost": f"{expected.used_cost:.6f}",
    }
    assert Decimal(current["used_su"]) > 0
    assert cpu["periods"] == [current]


def test_the_balance_of_every_budget_period_of_the_grant(world):
    body = _balance(world.client("pi"), query="on=2026-11-22&periods=all").json()
    cpu = next(pool for pool in body["pools"] if pool["pool"] == "testbed CPU")
    assert [period["period_start"] for period in cpu["periods"]] == [
        "2026-10-01", "2027-01-01", "2027-04-01", "2027-07-01",
    ]  # fmt: skip
    assert cpu["periods"][0] == cpu["current"]
    assert all(period["used_su"] == "0.000000" for period in cpu["periods"][1:])


def test_a_project_without_a_grant_has_no_pools_and_a_day_without_a_period_no_current(world):
    assert _balance(world.client("outsider"), "pawsey0004").json()["pools"] == []
    later = _balance(world.client("pi"), query="on=2031-01-01").json()
    assert all(pool["current"] is None for pool in later["pools"])
    assert all(pool["periods"] == [] for pool in later["pools"])


def test_staff_create_a_project_whose_code_must_be_new(world):
    staff = world.client("staff")
    body = {"code": "pawsey0042", "title": "Fusion", "pi": "bob", "field_of_science": "physics"}
    created = staff.post("/api/v1/projects/", body, format="json")
    assert created.status_code == 201
    assert created.json()["pi"] == "bob"
    assert Membership.objects.filter(project__code="pawsey0042", user__username="bob").exists()
    again = staff.post("/api/v1/projects/", body, format="json")
    assert again.status_code == 400
    assert again.json()["errors"]["code"] == ["a project pawsey0042 exists already"]


def test_the_pi_adds_and_removes_members_and_access_follows(world):
    pi = world.client("pi")
    added = pi.post("/api/v1/projects/pawsey0003/members/", {"username": "bob"}, format="json")
    assert added.status_code == 201
    assert added.json()["role"] == "member"
    assert world.client("outsider").get("/api/v1/projects/pawsey0003/").status_code == 200
    assert pi.delete("/api/v1/projects/pawsey0003/members/carol/").status_code == 204
    assert world.client("member").get("/api/v1/projects/pawsey0003/").status_code == 404
    refused = pi.delete("/api/v1/projects/pawsey0003/members/alice/")
    assert refused.status_code == 400
    assert "appoint another PI first" in refused.json()["message"]


def test_staff_grant_outside_a_round_split_into_budget_periods(world):
    response = world.client("staff").post(
        "/api/v1/allocations/",
        {"project": "pawsey0004", "pool": "testbed GPU", "amount": "12", "reason": "startup",
         "period_start": "2027-01-01", "period_end": "2028-01-01"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201
    body = response.json()
    assert body["granted_su"] == "12.000000"
    assert [period["budget_su"] for period in body["budget_periods"]] == ["3.000000"] * 4
    assert Allocation.objects.get(pk=body["id"]).granted_by == world.users["staff"]


def test_a_whole_round_through_the_api(world):
    staff, pi, chair, reviewer = (world.client(role) for role in ("staff", "pi", "chair",
                                                                     "committee"))  # fmt: skip
    round_ = staff.post(
        "/api/v1/rounds/",
        {"name": "Open call", "opens_at": "2026-11-01T00:00:00Z",
         "closes_at": "2030-01-01T00:00:00+08:00", "period_start": "2027-01-01",
         "period_end": "2028-01-01", "available": [{"pool": "testbed CPU", "su": "100"}],
         "chair": "chair", "committee": ["reviewer"]},
        format="json",
    )  # fmt: skip
    assert round_.status_code == 201
    assert round_.json()["closes_at"] == "2029-12-31T16:00:00Z"
    draft = pi.post(
        "/api/v1/requests/",
        {"round": round_.json()["id"], "project": "pawsey0001", "justification": "CMIP7",
         "amounts": [{"pool": "testbed CPU", "su": "40"}]},
        format="json",
    )  # fmt: skip
    assert draft.status_code == 201
    url = f"/api/v1/requests/{draft.json()['id']}/"
    estimate = pi.post(
        f"{url}estimates/",
        {"cluster": "slurm-testbed", "partition": "gpu", "jobs": 10, "hours": "0.5",
         "gpus_per_node": 1, "description": "inference"},
        format="json",
    )  # fmt: skip
    assert estimate.status_code == 201
    assert estimate.json()["service_units"] == "320.000000"  # 10 x 512 SU/h x 1/8 x 0.5 h
    assert pi.patch(url, {"justification": "CMIP7 runs"}, format="json").status_code == 200
    assert pi.post(f"{url}submit/").json()["state"] == "submitted"
    assert reviewer.post(f"{url}review-start/").status_code == 403
    assert chair.post(f"{url}review-start/").json()["state"] == "under_review"
    review = reviewer.post(
        "/api/v1/reviews/", {"request": draft.json()["id"], "score": 4, "comment": "fine"},
        format="json",
    )  # fmt: skip
    assert review.status_code == 201
    assert review.json()["reviewer"] == "reviewer"
    overview = chair.get(f"/api/v1/rounds/{round_.json()['id']}/overview/").json()
    assert overview["pools"] == [
        {"pool": "testbed CPU", "available_su": "100.000000", "requested_su": "40.000000",
         "granted_su": "0.000000"},
    ]  # fmt: skip
    assert overview["requests"][0]["average_score"] == "4.00"
    assert overview["requests"][0]["requested"] == [{"pool": "testbed CPU", "su": "40.000000"}]
    less = {"granted": [{"pool": "testbed CPU", "su": "25"}]}
    refused = chair.post(f"{url}decide/", less, format="json")
    assert refused.status_code == 400
    assert refused.json()["message"] == "say why the grant differs from the request"
    decided = chair.post(f"{url}decide/", {**less, "reason": "scaling first"}, format="json")
    assert decided.status_code == 200
    assert decided.json()["state"] == "partially_granted"
    assert [step["to_state"] for step in decided.json()["transitions"]] == [
        "draft", "submitted", "under_review", "partially_granted",
    ]  # fmt: skip
    request = AllocationRequest.objects.get(pk=draft.json()["id"])
    assert RequestTransition.objects.filter(request=request).count() == 4
    grants = pi.get("/api/v1/allocations/?project=pawsey0001&pool=testbed CPU").json()["results"]
    granted = [grant for grant in grants if grant["request"] == request.pk]
    assert [grant["granted_su"] for grant in granted] == ["25.000000"]


def test_staff_refund_a_jobs_charge_once(world):
    staff = world.client("staff")
    other = (
        world.job.__class__.objects.filter(
            project=world.centre.p3, partition__name="work", service_units__gt=0
        )
        .exclude(pk=world.job.pk)
        .first()
    )
    body = {"project": "pawsey0003", "pool": "testbed CPU", "job": other.pk, "reason": "fault",
            "on": "2026-11-22"}  # fmt: skip
    refund = staff.post("/api/v1/adjustments/refund/", body, format="json")
    assert refund.status_code == 201
    assert refund.json()["amount_su"] == f"{other.service_units:.6f}"
    assert refund.json()["job"] == other.pk
    again = staff.post("/api/v1/adjustments/refund/", body, format="json")
    assert again.status_code == 400
    assert again.json()["message"] == f"job {other.job_id} was refunded already"
    missing = staff.post("/api/v1/adjustments/refund/", {**body, "job": 10**9}, format="json")
    assert missing.json()["errors"] == {"job": ["unknown job 1000000000"]}


def test_a_pi_transfers_su_and_both_sides_cancel_out(world):
    body = {"source": "pawsey0003", "target": "pawsey0002", "pool": "testbed CPU",
            "amount": "2.5", "reason": "shared campaign", "on": "2026-11-22"}  # fmt: skip
    response = world.client("pi").post("/api/v1/adjustments/transfer/", body, format="json")
    assert response.status_code == 201
    out, into = response.json()["transfer_out"], response.json()["transfer_in"]
    assert (out["amount_su"], into["amount_su"]) == ("-2.500000", "2.500000")
    assert out["transfer_id"] == into["transfer_id"]
    assert Adjustment.objects.filter(transfer_id=out["transfer_id"]).count() == 2
    too_much = world.client("pi").post(
        "/api/v1/adjustments/transfer/", {**body, "amount": "100000"}, format="json"
    )
    assert too_much.status_code == 400
    assert "SU left on testbed CPU, less than 100000" in too_much.json()["message"]


def test_staff_top_up_the_current_budget_period(world):
    before = balance_get(project=world.centre.p3, pool=world.centre.cpu, on=SAMPLE_DAY)
    response = world.client("staff").post(
        "/api/v1/adjustments/top-up/",
        {"project": "pawsey0003", "pool": "testbed CPU", "amount": "7", "reason": "course",
         "on": "2026-11-22"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201
    assert response.json()["kind"] == "top_up"
    after = balance_get(project=world.centre.p3, pool=world.centre.cpu, on=SAMPLE_DAY)
    assert after.remaining_su == before.remaining_su + 7
    period = BudgetPeriod.objects.get(
        pk=Adjustment.objects.get(pk=response.json()["id"]).budget_period_id
    )
    assert (period.start, period.end) == (date(2026, 10, 1), date(2027, 1, 1))


def test_committee_members_see_the_rounds_submitted_requests_and_not_the_drafts(world):
    codes = {
        request["project"]
        for request in world.client("committee").get("/api/v1/requests/").json()["results"]
    }
    assert codes == {"pawsey0001", "pawsey0003"}
    assert Project.objects.filter(code="pawsey0002", requests__state="draft").exists()
    reviews = world.client("pi").get("/api/v1/reviews/").json()
    assert reviews["count"] == 0  # applicants do not see reviews of their requests


@pytest.mark.parametrize(
    "on",
    [date(2026, 9, 30), SAMPLE_DAY, date(2026, 11, 29), date(2027, 2, 1), date(2027, 10, 1)],
)
def test_the_apis_balances_are_the_figures_of_balance_get_for_every_pool_and_day(world, on):
    from accounting.models import Job, Partition
    from allocations.grants.selectors import balance_for_period, project_balances_get

    c = world.centre
    c.gpu.carry_over = True  # carried-in SU take the earlier periods into account
    c.gpu.save()
    for partition in Partition.objects.filter(cluster=c.cluster):
        Job.objects.create(
            cluster=c.cluster, job_id_raw=f"99{partition.pk}", job_id=f"99{partition.pk}",
            project=c.p3, username="carol", partition=partition, state="RUNNING",
            state_raw="RUNNING", pending_service_units=Decimal("3.25"),
        )  # fmt: skip
    world.client("pi").post(
        "/api/v1/adjustments/transfer/",
        {"source": "pawsey0003", "target": "pawsey0001", "pool": "testbed CPU", "amount": "1.5",
         "reason": "x", "on": "2026-11-22"},
        format="json",
    )  # fmt: skip
    for project in (c.p1, c.p2, c.p3):
        balances = project_balances_get(project=project, on=on, all_periods=True)
        for item in balances.pools:
            pool = ResourcePool.objects.get(name=item.pool)
            assert item.current == balance_get(project=project, pool=pool, on=on)
            grant = BudgetPeriod.objects.filter(
                allocation__project=project, allocation__pool=pool,
                allocation__period_start__lte=on, allocation__period_end__gt=on,
            ).order_by("start")  # fmt: skip
            assert item.periods == [balance_for_period(period=p, on=on) for p in grant]


def test_the_balance_costs_a_fixed_number_of_queries_whatever_the_pools(
    world, django_assert_max_num_queries
):
    client = world.client("member")
    _balance(client)
    # The token, the project, the budget periods, then one query of all the sums.
    with django_assert_max_num_queries(4):
        assert _balance(client).status_code == 200


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/allocations/", {"project": "pawsey0004", "pool": "testbed GPU", "amount": "12"}),
        ("/api/v1/rounds/", {"name": "Backwards call", "opens_at": "2026-11-01T00:00:00Z",
                             "closes_at": "2030-01-01T00:00:00Z", "chair": "chair",
                             "available": [{"pool": "testbed CPU", "su": "100"}]}),
    ],
)  # fmt: skip
@pytest.mark.parametrize("end", ["2026-12-31", "2027-01-01"])
def test_a_period_that_ends_before_it_starts_is_a_400_naming_period_end(world, path, body, end):
    response = world.client("staff").post(
        path, {**body, "period_start": "2027-01-01", "period_end": end}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "period_end" in response.json()["errors"]
    assert "after period_start" in str(response.json()["errors"]["period_end"])


def test_a_round_that_closes_before_it_opens_is_a_400_naming_closes_at(world):
    response = world.client("staff").post(
        "/api/v1/rounds/",
        {"name": "Shut call", "opens_at": "2027-02-01T00:00:00Z",
         "closes_at": "2027-01-01T00:00:00Z", "period_start": "2027-03-01",
         "period_end": "2028-01-01", "available": [{"pool": "testbed CPU", "su": "100"}],
         "chair": "chair"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400, response.content
    assert "closes_at" in response.json()["errors"]

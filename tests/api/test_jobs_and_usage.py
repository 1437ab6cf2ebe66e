"""Jobs with their charge breakdown (filters, ordering, a bounded number of queries) and
usage from the daily roll-ups (never from the jobs)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext

from accounting.clusters import charging
from accounting.models import Job, UsageDaily
from tests.factories import UserFactory, api_token

pytestmark = pytest.mark.django_db


def _jobs(client, query=""):
    return client.get(f"/api/v1/jobs/?page_size=1000&{query}").json()["results"]


def test_a_member_lists_the_jobs_of_their_projects_only(world):
    jobs = _jobs(world.client("member"))
    assert {job["project"] for job in jobs} == {"pawsey0003"}
    assert len(jobs) == Job.objects.filter(project__code="pawsey0003").count()
    # carol also ran jobs under pawsey0004, which she is not a member of: not shown.
    assert Job.objects.filter(username="carol", project__code="pawsey0004").exists()
    assert (
        world.client("member")
        .get(f"/api/v1/jobs/{Job.objects.filter(project__code='pawsey0004').first().pk}/")
        .status_code
        == 404
    )


@pytest.mark.parametrize(
    ("query", "check"),
    [
        ("project=pawsey0002", lambda job: job["project"] == "pawsey0002"),
        ("user=carol", lambda job: job["user"] == "carol"),
        ("partition=gpu", lambda job: job["partition"] == "gpu"),
        ("state=failed", lambda job: job["state"] == "FAILED"),
        ("charge_state=charged", lambda job: job["charge_state"] == "charged"),
        ("cluster=slurm-testbed&partition=work&user=bob",
         lambda job: (job["partition"], job["user"]) == ("work", "bob")),
    ],
)  # fmt: skip
def test_jobs_are_filtered_by_project_user_partition_and_state(world, query, check):
    everything = _jobs(world.client("staff"))
    jobs = _jobs(world.client("staff"), query)
    assert jobs
    assert all(check(job) for job in jobs)
    assert len(jobs) == sum(check(job) for job in everything)


def test_jobs_are_filtered_by_a_range_of_their_end(world):
    jobs = _jobs(world.client("staff"), "start=2026-11-22T02:03:00Z&end=2026-11-22T02:04:00")
    assert jobs
    assert all("2026-11-22T02:03:00Z" <= job["end"] < "2026-11-22T02:04:00Z" for job in jobs)
    ended = Job.objects.filter(end__gte="2026-11-22T02:03:00Z", end__lt="2026-11-22T02:04:00Z")
    assert len(jobs) == ended.count()


def test_a_bad_filter_value_is_a_400_naming_the_filter(world):
    response = world.client("staff").get("/api/v1/jobs/?start=yesterday&charge_state=free")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"start", "charge_state"}


def test_every_job_carries_its_charge_breakdown(world):
    job = world.client("member").get(f"/api/v1/jobs/{world.job.pk}/").json()
    stored = Job.objects.get(pk=world.job.pk)
    assert job["service_units"] == f"{stored.service_units:.6f}"
    assert job["dominant_resource"] == stored.dominant_resource
    assert job["weight"] == "128.000000"
    assert job["partition_version"] == 1
    # Derived from the job's shape (the ledger keeps no copy): what the import's charge showed.
    charged = charging.charge(
        stored.partition_version.spec,
        charging.split_evenly(
            nodes=stored.nnodes, cores=stored.cpus, memory_mb=stored.memory_mb, gpus=stored.gpus
        ),
        elapsed_seconds=stored.elapsed_seconds,
    )
    assert job["node_fractions"] == charging.node_fractions_folded(charged.nodes)
    assert set(job["node_fractions"][0]) >= {"nodes", "cores", "memory", "gpus"}
    first = job["node_fractions"][0]
    assert first["nodes"] == str(stored.nnodes)
    assert Decimal(first["cores"]) == Decimal(stored.cpus) / stored.nnodes / 128
    assert job["charge_state"] == "charged"
    assert job["weight_explanation"].startswith("CPU partition: w = C = 128 cores")


def test_a_page_of_jobs_costs_the_same_few_queries_whatever_its_size(
    world, django_assert_max_num_queries
):
    client = world.client("member")
    client.get("/api/v1/jobs/?page_size=1")  # authenticate once outside the count
    with CaptureQueriesContext(connection) as small:
        client.get("/api/v1/jobs/?page_size=2")
    # A page by cursor reads the ledger a window of months at a time until it is full: a
    # larger page may read more windows (and the catalogue's oldest month), never a query per
    # job. The sample's jobs span a few months: three windows at most.
    with django_assert_max_num_queries(len(small) + 3):
        response = client.get("/api/v1/jobs/?page_size=1000")
    assert len(response.json()["results"]) > 50
    with django_assert_max_num_queries(len(small)):  # by page number: count and rows
        response = client.get("/api/v1/jobs/?page_size=1000&page=1")
    assert len(response.json()["results"]) > 50
    staff = world.client("staff")
    with django_assert_max_num_queries(7):  # token, project, running jobs, windows of months
        staff.get("/api/v1/jobs/?project=pawsey0003&page_size=1000")


def _usage(client, query):
    return client.get(f"/api/v1/usage/?page_size=1000&{query}").json()["results"]


def test_usage_sums_the_roll_ups_of_the_callers_projects_by_user(world):
    rows = _usage(world.client("member"), "group_by=user&granularity=total")
    expected = (
        UsageDaily.objects.filter(project__code="pawsey0003")
        .values("username")
        .annotate(total=Sum("service_units"))
    )
    assert {row["user"]: Decimal(row["service_units"]) for row in rows} == {
        item["username"]: item["total"] for item in expected
    }
    assert {row["project"] for row in rows} == {None}  # not grouped by project


@pytest.mark.parametrize(
    ("granularity", "period"),
    [("day", "2026-11-22"), ("week", "2026-11-16"), ("month", "2026-11-01"), ("total", None)],
)
def test_usage_is_grouped_by_day_iso_week_month_or_in_total(world, granularity, period):
    rows = _usage(
        world.client("staff"), f"granularity={granularity}&group_by=project&group_by=partition"
    )
    assert {row["period"] for row in rows} == {period}  # the sample ran on one Sunday
    by_key = {(row["project"], row["partition"]): Decimal(row["service_units"]) for row in rows}
    for (project, partition), total in by_key.items():
        assert (
            total
            == UsageDaily.objects.filter(
                project__code=project, partition__name=partition
            ).aggregate(total=Sum("service_units"))["total"]
        )
    assert all(row["cluster"] == "slurm-testbed" for row in rows)


def test_usage_filters_by_pool_user_and_day_range(world):
    client = world.client("staff")
    gpu = _usage(client, "pool=testbed GPU&group_by=partition&granularity=total")
    assert [row["partition"] for row in gpu] == ["gpu"]
    assert _usage(client, "start=2026-11-23&granularity=total&group_by=user") == []
    assert _usage(client, "end=2026-11-22&granularity=total&group_by=user") == []
    bob = _usage(client, "user=bob&granularity=total")
    assert len(bob) == 1
    assert (
        bob[0]["jobs"]
        == UsageDaily.objects.filter(username="bob").aggregate(jobs=Sum("jobs"))["jobs"]
    )


def test_usage_never_reads_the_jobs(world):
    with CaptureQueriesContext(connection) as queries:
        response = world.client("staff").get(
            "/api/v1/usage/?group_by=user&group_by=partition&granularity=week"
        )
    assert response.status_code == 200
    assert not any("accounting_job" in query["sql"] for query in queries)


ZERO_TOTAL = {
    "period": None, "project": None, "user": None, "cluster": None, "partition": None,
    "service_units": "0.000000", "core_hours": "0.000000", "gpu_hours": "0.000000",
    "energy_wh": "0.000000", "cost": "0.000000", "currency": None, "jobs": 0,
}  # fmt: skip


def test_a_total_without_grouping_is_one_row_even_with_no_usage(world):
    rows = _usage(world.client("staff"), "granularity=total")
    assert len(rows) == 1
    assert (
        Decimal(rows[0]["service_units"])
        == UsageDaily.objects.aggregate(total=Sum("service_units"))["total"]
    )
    assert _usage(world.client("staff"), "granularity=total&start=2030-01-01") == [ZERO_TOTAL]


def test_usage_of_another_project_is_empty_and_a_stranger_sees_none(world):
    assert _usage(world.client("member"), "project=pawsey0002&group_by=user") == []
    assert _usage(world.client("member"), "project=pawsey0002&granularity=total") == [ZERO_TOTAL]
    stranger = UserFactory(username="stranger")
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(stranger)}")
    assert _usage(client, "granularity=total") == [ZERO_TOTAL]
    assert _usage(client, "granularity=day") == []

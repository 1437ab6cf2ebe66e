"""GET /api/v1/overhead/: staff only, the newest done run covering the window, the stored numbers
and exact fair-billing rates, JSON errors like every other endpoint, and in the schema."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

import pytest
from drf_spectacular.generators import SchemaGenerator

from accounting.models import OverheadRun
from accounting.utilisation.overhead import overhead_results, overhead_run_compute

URL = "/api/v1/overhead/"
DAY_START = datetime(2026, 11, 22, tzinfo=UTC)  # the sample's jobs ran that day
DAY_END = datetime(2026, 11, 23, tzinfo=UTC)
QUERY = {"cluster": "slurm-testbed", "start": "2026-11-22T00:00:00Z", "end": "2026-11-23T00:00:00Z"}


@pytest.fixture
def run(world) -> OverheadRun:
    run = overhead_run_compute(
        cluster=world.centre.cluster, start=DAY_START, end=DAY_END, step="hour"
    )
    assert run.status == OverheadRun.Status.DONE, run.error
    return run


@pytest.mark.parametrize(
    ("role", "status"),
    [("anonymous", 401), ("member", 404), ("pi", 404), ("committee", 404), ("staff", 200)],
)
def test_only_staff_read_true_overhead(world, run, role, status):
    response = world.client(role).get(URL, QUERY)
    assert response.status_code == status
    if status != 200:
        assert set(response.json()) == {"message", "errors"}


def test_the_answer_is_the_stored_run_per_partition(world, run):
    body = world.client("staff").get(URL, QUERY).json()
    assert body["run"] == run.pk
    assert body["cluster"] == "slurm-testbed"
    assert body["window_start"] == "2026-11-22T00:00:00Z"
    assert body["jobs_seen"] == run.jobs_seen > 0
    stored = {result.partition.name: result for result in overhead_results(run=run)}
    assert [p["partition"] for p in body["partitions"]] == sorted(stored)
    for partition in body["partitions"]:
        result = stored[partition["partition"]]
        assert partition["buckets"] == result.buckets
        assert len(partition["buckets"]) == 24
        assert partition["histogram"] == result.histogram
        assert sum(partition["histogram"].values()) == result.node_count * 86400
        assert partition["billable"]["core_seconds"] == result.billable_core_seconds
        cores = partition["fair_rates"]["cores"]
        if result.allocated_core_seconds:
            exact = Fraction(result.billable_core_seconds, result.allocated_core_seconds)
            assert cores == {"ratio": round(float(exact), 6), "exact": str(exact)}
            assert exact >= 1  # billing never bills less than was held
        else:
            assert cores is None
    units = {p["partition"]: p["unit"] for p in body["partitions"]}
    assert units["work"] == {"cores": 1, "memory_mb": 2048, "gpus": 0, "text": "1 core + 2 GiB"}
    assert units["gpu"] == {"cores": 0, "memory_mb": 0, "gpus": 1, "text": "1 GPU"}


def test_a_run_covering_a_wider_window_answers_a_narrower_question(world, run):
    query = {**QUERY, "start": "2026-11-22T06:00:00Z", "end": "2026-11-22T07:00:00Z"}
    assert world.client("staff").get(URL, query).json()["run"] == run.pk


def test_no_run_for_the_window_is_a_json_404(world, run):
    query = {**QUERY, "end": "2026-11-24T00:00:00Z"}
    response = world.client("staff").get(URL, query)
    assert response.status_code == 404
    assert "no done true-overhead run" in response.json()["message"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cluster": "nowhere"}, "cluster"),
        ({"end": "2026-11-21T00:00:00Z"}, "end"),
        ({"start": "yesterday"}, "start"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(world, change, field):
    response = world.client("staff").get(URL, {**QUERY, **change})
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_the_endpoint_is_in_the_openapi_schema(db):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"][URL]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"cluster", "start", "end"}
    assert "200" in operation["responses"]


def test_a_jobs_detail_carries_its_fair_share_beside_the_su(world, run):
    from decimal import Decimal

    from accounting.models import JobFairShare

    share = JobFairShare.objects.filter(run=run, allocated_core_seconds__gt=0).first()
    assert share is not None
    body = world.client("staff").get(f"/api/v1/jobs/{share.job_id}/").json()
    fair = body["fair_share"]
    assert fair["runs"] == [
        {
            "run": run.pk,
            "window_start": "2026-11-22T00:00:00Z",
            "window_end": "2026-11-23T00:00:00Z",
        }
    ]
    cores = next(r for r in fair["resources"] if r["name"] == "cores")
    assert Decimal(cores["allocated"]) == (Decimal(share.allocated_core_seconds) / 3600).quantize(
        Decimal("0.000001")
    )
    assert Decimal(cores["billed"]) >= Decimal(cores["allocated"])
    exact = Fraction(share.billed_core_seconds, share.allocated_core_seconds)
    assert cores["factor"] == f"{Decimal(exact.numerator) / exact.denominator:.6f}"


def test_a_job_no_run_holds_has_no_fair_share(world):
    from accounting.models import Job

    job = Job.objects.filter(project__code="pawsey0003").first()
    body = world.client("staff").get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["fair_share"] is None

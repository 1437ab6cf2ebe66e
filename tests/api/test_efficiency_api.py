"""GET /api/v1/efficiency/ (summary, months, distributions of the caller's projects, from the
roll-ups) and a job's efficiency in GET /api/v1/jobs/{id}/."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounting.models import EfficiencyBucket, Job
from tests.factories import efficiency_rollups_add

pytestmark = pytest.mark.django_db


@pytest.fixture
def measured(world):
    """Hand-written roll-ups on a day of their own: pawsey0003 (carol, alice) and pawsey0002
    (bob), so every figure below is computed on paper."""
    c = world.centre
    day = date(2026, 6, 15)
    rows = (
        (c.p3, "carol", 4, 3, Decimal(90), Decimal(30), Decimal(60), Decimal(15)),
        (c.p3, "alice", 1, 1, Decimal(10), Decimal(10), Decimal(4), Decimal(4)),
        (c.p2, "bob", 2, 2, Decimal(500), Decimal(100), Decimal(100), Decimal(1)),
    )
    for project, user, jobs, measured_jobs, su, right_sized, held, used in rows:
        efficiency_rollups_add(
            project, world.work, user, day, jobs=jobs, measured=measured_jobs, service_units=su,
            right_sized_service_units=right_sized, core_hours_held=held, core_hours_used=used,
        )  # fmt: skip
        EfficiencyBucket.objects.create(
            project=project, partition=world.work, username=user, month=date(2026, 6, 1),
            metric="cpu", bucket=int(10 * used / held) if used < held else 9, jobs=measured_jobs,
        )  # fmt: skip
    return world


JUNE = "start=2026-06-01&end=2026-07-01"


def _efficiency(client, query=JUNE):
    response = client.get(f"/api/v1/efficiency/?{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_member_gets_the_ratios_of_sums_of_their_projects_only(measured):
    body = _efficiency(measured.client("member"))
    summary = body["summary"]
    assert summary["jobs"] == 5
    assert summary["measured_jobs"] == 4
    assert summary["unmeasured_jobs"] == 1
    assert summary["cpu"] == "0.2969"  # (15 + 4) / (60 + 4)
    assert summary["memory"] is None  # no memory measured
    assert summary["service_units"] == "100.000000"
    assert summary["charged_service_units"] == "100.000000"
    assert summary["su_left_on_the_table"] == "60.000000"  # 100 - 40
    assert [month["month"] for month in body["months"]] == ["2026-06-01"]
    assert body["months"][0]["cpu"] == summary["cpu"]
    assert body["distributions"]["cpu"] == [0, 0, 3, 0, 0, 0, 0, 0, 0, 1]  # 25 %, 100 %
    assert body["distributions"]["gpu"] == [0] * 10


def test_staff_see_every_project(measured):
    summary = _efficiency(measured.client("staff"))["summary"]
    assert summary["jobs"] == 7
    assert summary["su_left_on_the_table"] == "460.000000"


def test_a_project_or_user_the_caller_may_not_see_is_empty(measured):
    client = measured.client("member")
    for query in ("project=pawsey0002", "user=bob"):
        summary = _efficiency(client, f"{JUNE}&{query}")["summary"]
        assert (summary["jobs"], summary["measured_jobs"], summary["cpu"]) == (0, 0, None)


def test_a_member_may_narrow_to_another_member_of_their_project(measured):
    summary = _efficiency(measured.client("member"), f"{JUNE}&user=alice")["summary"]
    assert (summary["jobs"], summary["cpu"]) == (1, "1.0000")


def test_a_period_must_end_after_it_starts(measured):
    response = measured.client("member").get("/api/v1/efficiency/?start=2026-06-02&end=2026-06-01")
    assert response.status_code == 400
    assert "end" in response.json()["errors"]


def test_the_summary_never_reads_the_jobs(measured):
    with CaptureQueriesContext(connection) as queries:
        _efficiency(measured.client("staff"), "")
    assert not any("accounting_job" in query["sql"] for query in queries)


def test_a_job_without_usage_data_has_no_efficiency(world):
    body = world.client("member").get(f"/api/v1/jobs/{world.job.pk}/").json()
    assert body["efficiency"] == {"cpu": None, "memory": None, "gpu": None, "walltime": None}
    assert body["right_sized_service_units"] is None


def test_a_measured_job_carries_its_ratios_and_right_sized_su(world):
    job = world.job
    Job.objects.filter(pk=job.pk).update(
        cpu_seconds_used=Decimal(job.elapsed_seconds * job.cpus) / 4,
        memory_peak_mb=job.memory_mb / 2,
        right_sized_service_units=job.service_units / 4,
    )
    body = world.client("member").get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["efficiency"]["cpu"] == "0.2500"
    assert body["efficiency"]["memory"] == "0.5000"
    assert body["efficiency"]["gpu"] is None
    assert Decimal(body["right_sized_service_units"]) == (job.service_units / 4).quantize(
        Decimal("0.000001")
    )

"""Energy and CO2e in the API: a job's ``energy`` and ``co2e_g``, and a project's months
(``/api/v1/projects/{code}/carbon/``) from the daily roll-ups."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from accounting.carbon.services import grid_intensity_csv_load
from accounting.models import Cluster, Job, UsageDaily

pytestmark = pytest.mark.django_db

URL = "/api/v1/projects/pawsey0003/carbon/?start=2026-01-01&end=2027-01-01"


def _set_constant(world, grams):
    Cluster.objects.filter(pk=world.job.cluster_id).update(grid_intensity_g_per_kwh=grams)


def test_a_job_without_a_measurement_gives_the_labelled_estimate_and_no_co2e_without_intensity(
    world,
):
    body = world.client("member").get(f"/api/v1/jobs/{world.job.pk}/").json()
    assert body["energy"] == {"wh": f"{world.job.energy_wh:.6f}", "source": "estimated"}
    assert body["co2e_g"] is None


def test_a_measured_job_gives_its_measurement_and_co2e_over_the_hours_of_its_run(world):
    Job.objects.filter(pk=world.job.pk).update(consumed_energy_joules=7_200_000)  # 2 kWh
    cluster = Cluster.objects.get(pk=world.job.cluster_id)
    first_hour = world.job.start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    after = world.job.end.astimezone(UTC).replace(minute=0, second=0) + timedelta(hours=1)
    grid_intensity_csv_load(
        cluster=cluster,
        lines=[
            "start,g_per_kwh\n",
            "2020-01-01T00:00Z,250\n",
            f"{first_hour.isoformat()},400\n",  # every hour of the run at 400
            f"{after.isoformat()},100\n",  # the end's hour is over: not at its end's 100
        ],
    )
    body = world.client("member").get(f"/api/v1/jobs/{world.job.pk}/").json()
    assert body["energy"] == {"wh": "2000.000000", "source": "measured"}
    assert body["co2e_g"] == "800.000"


def test_a_projects_months_sum_its_rollups_at_the_constant_intensity(world):
    _set_constant(world, Decimal(500))
    body = world.client("pi").get(URL).json()
    assert (body["project"], body["start"], body["end"]) == (
        "pawsey0003",
        "2026-01-01",
        "2027-01-01",
    )
    assert body["months"]
    estimate = UsageDaily.objects.filter(project__code="pawsey0003").aggregate(e=Sum("energy_wh"))[
        "e"
    ]
    assert sum(Decimal(row["energy_wh"]) for row in body["months"]) == estimate
    for row in body["months"]:
        assert row["cluster"] == "slurm-testbed"
        assert row["intensity_set"] is True
        assert row["energy_measured_wh"] == "0.000000"
        assert Decimal(row["co2e_g"]) == (Decimal(row["energy_wh"]) * 500 / 1000).quantize(
            Decimal("0.001")
        )
        assert row["mean_g_per_kwh"] == "500.0"


def test_without_an_intensity_the_months_have_energy_and_a_null_co2e(world):
    body = world.client("member").get(URL).json()
    assert body["months"]
    assert all(row["co2e_g"] is None and row["intensity_set"] is False for row in body["months"])
    assert all(Decimal(row["energy_wh"]) > 0 for row in body["months"])


def test_the_window_defaults_to_the_last_twelve_months(world):
    body = world.client("member").get("/api/v1/projects/pawsey0003/carbon/").json()
    today = datetime.now(UTC).date()
    assert body["end"] > today.isoformat()
    assert body["start"] <= today.replace(day=1).isoformat()


@pytest.mark.parametrize(
    ("query", "field"),
    [("start=2026-02-01&end=2026-01-01", "end"), ("start=2000-01-01&end=2026-01-01", "end"),
     ("start=x", "start"), ("end=", "end")],
)  # fmt: skip
def test_a_bad_window_is_a_400_naming_the_field(world, query, field):
    response = world.client("member").get(f"/api/v1/projects/pawsey0003/carbon/?{query}")
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_another_projects_carbon_is_a_404_even_with_a_bad_window(world):
    response = world.client("member").get("/api/v1/projects/pawsey0001/carbon/?start=x")
    assert response.status_code == 404

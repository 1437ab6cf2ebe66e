"""The energy and CO2e pages: a job's energy and CO2e, a project's months with their CSV, and
the staff page that loads a cluster's grid intensity series."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Sum
from django.urls import reverse

from accounting.models import Cluster, GridIntensity, Job, UsageDaily
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def _energy_url() -> str:
    return reverse("accounting:project-energy", args=["pawsey0003"])


def test_a_job_page_labels_an_estimated_energy_and_says_when_no_intensity_is_set(site):
    page = client_for(site.users["member"]).get(
        reverse("accounting:job-detail", args=[site.job.pk])
    )
    text = page.content.decode()
    assert "estimated by the engine" in text
    assert "No CO<sub>2</sub>e: the grid intensity of" in text


def test_a_job_page_shows_measured_energy_and_its_co2e(site):
    Job.objects.filter(pk=site.job.pk).update(consumed_energy_joules=36_000_000)  # 10 kWh
    Cluster.objects.filter(pk=site.cluster.pk).update(grid_intensity_g_per_kwh=Decimal(450))
    page = client_for(site.users["member"]).get(
        reverse("accounting:job-detail", args=[site.job.pk])
    )
    text = page.content.decode()
    assert "10,000.0 Wh measured by Slurm" in text
    assert "4.5 kg CO<sub>2</sub>e</strong> at 450.0 g/kWh" in text


def test_the_project_energy_page_tables_the_months_and_says_when_no_intensity_is_set(site):
    page = client_for(site.users["member"]).get(_energy_url())
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="intensity-not-set"' in text
    assert '<span class="muted">not set</span>' in text
    assert all(row["co2e"] == "not set" for row in page.context["table"])


def test_the_project_energy_csv_sums_the_rollups_in_kwh_and_co2e_in_kg(site):
    Cluster.objects.filter(pk=site.cluster.pk).update(grid_intensity_g_per_kwh=Decimal(1000))
    response = client_for(site.users["pi"]).get(_energy_url(), {"csv": "energy"})
    assert response["Content-Disposition"] == 'attachment; filename="pawsey0003-energy.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows
    estimate = UsageDaily.objects.filter(project=site.project).aggregate(e=Sum("energy_wh"))["e"]
    assert abs(sum(Decimal(row["energy (kWh)"]) for row in rows) - estimate / 1000) < Decimal(
        "0.01"
    )
    for row in rows:
        assert row["month"].endswith("-01")
        assert Decimal(row["CO2e (kg)"]) == Decimal(row["energy (kWh)"])  # 1 kg per kWh
        assert row["grid intensity (g/kWh)"] == "1000.0"
    page = client_for(site.users["pi"]).get(_energy_url())
    assert 'id="intensity-not-set"' not in page.content.decode()


def _upload(client, cluster, text, **extra):
    upload = SimpleUploadedFile("grid.csv", text.encode(), content_type="text/csv")
    return client.post(
        reverse("accounting:grid-intensity", args=[cluster.name]), {"file": upload, **extra}
    )


def test_staff_load_a_series_and_loading_it_again_changes_nothing(site):
    client = client_for(site.users["staff"])
    text = "start,g_per_kwh\n2026-01-01T00:00Z,500\n2026-06-01,350.5\n"
    first = _upload(client, site.cluster, text)
    assert first.status_code == 302
    assert GridIntensity.objects.filter(cluster=site.cluster).count() == 2
    again = client.get(_upload(client, site.cluster, text)["Location"])
    assert "0 created, 0 updated, 2 unchanged, 0 deleted" in again.content.decode()
    page = client.get(reverse("accounting:grid-intensity", args=[site.cluster.name]))
    assert "2 steps from 2026-01-01 00:00" in page.content.decode()


def test_a_bad_line_is_named_on_the_page_and_nothing_is_saved(site):
    client = client_for(site.users["staff"])
    response = _upload(client, site.cluster, "start,g_per_kwh\n2026-01-01,5\n2026-02-01,-3\n")
    assert response.status_code == 200
    text = response.content.decode()
    assert "Nothing was loaded." in text
    assert "line 3: g_per_kwh -3 is negative" in text
    assert not GridIntensity.objects.exists()


def test_a_file_that_is_not_utf8_is_refused(site):
    client = client_for(site.users["staff"])
    upload = SimpleUploadedFile("grid.csv", b"start,g_per_kwh\n\xff\xfe,1\n")
    response = client.post(
        reverse("accounting:grid-intensity", args=[site.cluster.name]), {"file": upload}
    )
    assert "the file is not UTF-8 text" in response.content.decode()

"""Grid intensity: the cluster spec's constant, the series loaded from CSV (service and command),
and the footprints read from it: a job's, and a project's months from the roll-ups."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from accounting.carbon.footprint import Intensity, IntensityStep, run_footprint
from accounting.carbon.selectors import (
    intensity_at,
    job_footprint_get,
    project_footprint_monthly,
)
from accounting.carbon.series_csv import IntensityCsvError
from accounting.carbon.services import grid_intensity_csv_load
from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import SpecFileError, cluster_definition_parse
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, GridIntensity, Job
from projects.models import Project
from tests.accounting.test_carbon_rollups import SPEC, _history

pytestmark = pytest.mark.django_db

SERIES = "start,g_per_kwh\n2026-02-10,600\n2026-02-15T12:00,300\n2026-02-20T00:00+00:00,450\n"


@pytest.fixture
def perth():
    """The testbed, on Perth's clock, with its jobs of February 2026 (half measured)."""
    spec = json.loads(SPEC.read_text())
    spec["timezone"] = "Australia/Perth"
    cluster_apply(definition=cluster_definition_parse(spec))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.create(code=code, title=code)
    cluster = Cluster.objects.get(name="slurm-testbed")
    jobs_import(cluster=cluster, lines=_history(lines=1200), source="generated")
    return cluster


def _load(cluster, text, **kwargs):
    return grid_intensity_csv_load(cluster=cluster, lines=text.splitlines(keepends=True), **kwargs)


def _series(cluster):
    return list(GridIntensity.objects.filter(cluster=cluster).values_list("starts_at", "g_per_kwh"))


# --- the spec's constant ------------------------------------------------------------------------


def test_a_cluster_spec_may_give_a_grid_intensity_and_leaving_it_out_keeps_the_admins():
    spec = json.loads(SPEC.read_text())
    cluster_apply(definition=cluster_definition_parse({**spec, "grid_intensity_g_per_kwh": 520}))
    assert Cluster.objects.get().grid_intensity_g_per_kwh == Decimal(520)
    result = cluster_apply(definition=cluster_definition_parse(spec))
    assert not result.cluster_updated
    assert Cluster.objects.get().grid_intensity_g_per_kwh == Decimal(520)


@pytest.mark.parametrize("value", [-1, "x", 10**6, 1.2345])
def test_a_bad_grid_intensity_in_a_spec_is_refused(value):
    spec = json.loads(SPEC.read_text())
    with pytest.raises(SpecFileError, match="grid_intensity_g_per_kwh"):
        cluster_definition_parse({**spec, "grid_intensity_g_per_kwh": value})


# --- loading a series ---------------------------------------------------------------------------


def test_a_series_is_loaded_in_utc_and_loading_it_again_changes_nothing(perth):
    first = _load(perth, SERIES)
    assert (first.created, first.updated, first.unchanged, first.deleted) == (3, 0, 0, 0)
    stored = _series(perth)
    assert stored[0] == (datetime(2026, 2, 9, 16, tzinfo=UTC), Decimal(600))  # Perth midnight
    again = _load(perth, SERIES)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)
    assert _series(perth) == stored


def test_a_new_value_for_a_known_start_updates_it_and_replace_removes_the_rest(perth):
    _load(perth, SERIES)
    changed = _load(perth, "start,g_per_kwh\n2026-02-10,610\n", replace=True)
    assert (changed.created, changed.updated, changed.deleted) == (0, 1, 2)
    assert _series(perth) == [(datetime(2026, 2, 9, 16, tzinfo=UTC), Decimal(610))]


def test_a_file_with_a_bad_line_saves_nothing(perth):
    _load(perth, SERIES)
    before = _series(perth)
    with pytest.raises(IntensityCsvError, match="line 3: g_per_kwh 'oops' is not a number"):
        _load(perth, "start,g_per_kwh\n2026-03-01,100\n2026-03-02,oops\n", replace=True)
    assert _series(perth) == before


def test_the_command_loads_a_file_and_names_a_bad_line(perth, tmp_path, capsys):
    good = tmp_path / "grid.csv"
    good.write_text(SERIES)
    call_command("grid_intensity_load", str(good), cluster="slurm-testbed")
    assert "3 created, 0 updated, 0 unchanged, 0 deleted" in capsys.readouterr().out
    bad = tmp_path / "bad.csv"
    bad.write_text("start,g_per_kwh\n2026-13-01,5\n")
    with pytest.raises(CommandError, match="line 2: start '2026-13-01' is not an ISO 8601 time"):
        call_command("grid_intensity_load", str(bad), cluster="slurm-testbed")
    with pytest.raises(CommandError, match="unknown cluster"):
        call_command("grid_intensity_load", str(good), cluster="nowhere")
    assert len(_series(perth)) == 3


# --- footprints ---------------------------------------------------------------------------------


def test_the_intensity_at_a_time_is_the_series_else_the_constant_else_none(perth):
    assert intensity_at(cluster=perth, when=datetime(2026, 2, 1, tzinfo=UTC)) is None
    Cluster.objects.filter(pk=perth.pk).update(grid_intensity_g_per_kwh=Decimal(700))
    perth.refresh_from_db()
    _load(perth, SERIES)
    assert intensity_at(cluster=perth, when=datetime(2026, 2, 1, tzinfo=UTC)) == Decimal(700)
    assert intensity_at(cluster=perth, when=datetime(2026, 2, 16, tzinfo=UTC)) == Decimal(300)


def test_a_jobs_co2e_is_its_best_energy_over_the_hours_of_its_run(perth):
    _load(perth, "start,g_per_kwh\n2026-01-01,900\n" + SERIES.split("\n", 1)[1])
    steps = [IntensityStep(starts_at=s, g_per_kwh=g) for s, g in _series(perth)]
    series = Intensity(steps=steps, constant=None)
    measured = Job.objects.filter(consumed_energy_joules__gt=0).exclude(end=None).first()
    footprint = job_footprint_get(job=measured)
    assert footprint.energy.source == "measured"
    wh = (Decimal(measured.consumed_energy_joules) / 3600).quantize(Decimal("0.000001"))
    run = run_footprint(energy_wh=wh, start=measured.start, end=measured.end, intensity=series)
    assert (footprint.co2e_g, footprint.g_per_kwh) == (run.co2e_g, run.g_per_kwh)
    estimated = Job.objects.exclude(consumed_energy_joules__gt=0).exclude(end=None).last()
    footprint = job_footprint_get(job=estimated)
    assert footprint.energy.source == "estimated"
    assert footprint.energy.wh == estimated.energy_wh
    run = run_footprint(
        energy_wh=estimated.energy_wh, start=estimated.start, end=estimated.end, intensity=series
    )
    assert footprint.co2e_g == run.co2e_g


def test_a_job_across_a_step_is_taken_at_both_sides_of_it_not_at_its_end(perth):
    """Issue 31 item 9: job 3870 showed 47.8 kg at its end's intensity while its month took it
    at 58.1. A job half before and half after a step from 600 to 300 g/kWh is at 450."""
    _load(perth, SERIES)
    step = datetime(2026, 2, 15, 4, tzinfo=UTC)  # 2026-02-15T12:00 in Perth
    job = Job.objects.exclude(end=None).exclude(consumed_energy_joules__gt=0).first()
    Job.objects.filter(pk=job.pk).update(
        start=step.replace(hour=2), end=step.replace(hour=6), energy_wh=Decimal(4000)
    )
    job.refresh_from_db()
    footprint = job_footprint_get(job=job)
    assert footprint.g_per_kwh == Decimal(450)
    assert footprint.co2e_g == Decimal(1800)


def test_a_job_without_an_intensity_has_no_co2e(perth):
    footprint = job_footprint_get(job=Job.objects.exclude(end=None).first())
    assert footprint.g_per_kwh is None
    assert footprint.co2e_g is None


def _months_from_jobs(cluster, project):
    """Energy and CO2e per month recomputed from the project's jobs, one by one, with the job
    page's own figure."""
    zone = cluster.zoneinfo
    energy = defaultdict(Decimal)
    grams = defaultdict(Decimal)
    measured = defaultdict(Decimal)
    jobs = defaultdict(int)
    for job in (
        Job.objects.filter(project=project).exclude(charge_state="pending").exclude(end=None)
    ):
        month = job.end.astimezone(zone).date().replace(day=1)
        footprint = job_footprint_get(job=job)
        energy[month] += footprint.energy.wh
        measured[month] += footprint.energy.wh if job.consumed_energy_joules else 0
        grams[month] += footprint.co2e_g
        jobs[month] += 1
    return energy, measured, grams, jobs


def test_a_projects_months_are_the_sums_of_its_jobs_pages(perth):
    """One rule: the month's CO2e is what its jobs' pages add up to (to the milligram each)."""
    Cluster.objects.filter(pk=perth.pk).update(grid_intensity_g_per_kwh=Decimal(800))
    perth.refresh_from_db()
    _load(perth, SERIES)
    project = Project.objects.get(code="pawsey0001")
    months = project_footprint_monthly(
        project=project, start=date(2026, 1, 1), end=date(2026, 4, 1)
    )
    energy, measured, grams, jobs = _months_from_jobs(perth, project)
    assert [row.footprint.month for row in months] == sorted(energy)
    for row in months:
        month = row.footprint.month
        assert row.cluster == "slurm-testbed"
        assert row.intensity_set
        assert row.footprint.energy.best_wh == energy[month]
        assert row.footprint.energy.measured_wh == measured[month]
        assert abs(row.footprint.co2e_g - grams[month]) <= Decimal("0.0005") * jobs[month]


def test_a_project_on_a_cluster_without_an_intensity_has_energy_but_no_co2e(perth):
    project = Project.objects.get(code="pawsey0001")
    months = project_footprint_monthly(
        project=project, start=date(2026, 1, 1), end=date(2026, 4, 1)
    )
    assert months
    assert all(row.footprint.co2e_g is None and not row.intensity_set for row in months)
    assert all(row.footprint.energy.best_wh > 0 for row in months)


def test_a_projects_months_read_the_rollups_not_the_jobs(perth, django_assert_max_num_queries):
    _load(perth, SERIES)
    project = Project.objects.get(code="pawsey0001")
    with django_assert_max_num_queries(4):  # two roll-ups, clusters, one cluster's series
        project_footprint_monthly(project=project, start=date(2026, 1, 1), end=date(2026, 4, 1))

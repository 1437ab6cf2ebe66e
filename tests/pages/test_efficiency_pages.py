"""The efficiency pages: a job's efficiency, a project's efficiency page and the staff page of
the users who leave the most SU on the table."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from accounting.ledger.usage import USAGE_COLUMNS
from accounting.models import Job
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def _job_page(site, job):
    return client_for(site.users["member"]).get(reverse("accounting:job-detail", args=[job.pk]))


def _wasteful_job(site) -> Job:
    job = (
        Job.objects.filter(
            project=site.project, charge_state=Job.ChargeState.CHARGED, partition__name="work",
            right_sized_service_units__isnull=False, cpus__gte=4, nnodes=1,
        )
        .order_by("-service_units")
        .first()
    )  # fmt: skip
    assert job is not None, "the generated history has measured jobs"
    return job


def test_a_measured_job_shows_its_efficiency_and_what_a_right_sized_request_costs(site):
    job = _wasteful_job(site)
    # A quarter of its cores busy, a tenth of its memory: right-sizing halves what it holds.
    Job.objects.filter(pk=job.pk).update(
        cpu_seconds_used=Decimal(job.elapsed_seconds * job.cpus) / 4,
        memory_peak_mb=job.memory_mb / 10, gpu_utilisation=None,
    )  # fmt: skip
    page = _job_page(site, job)
    efficiency = page.context["efficiency"]
    assert efficiency is not None
    assert efficiency.ratios.cpu == Decimal("0.2500")
    assert efficiency.ratios.memory == Decimal("0.1000")
    assert efficiency.left_on_the_table == job.service_units - job.right_sized_service_units
    assert any("--cpus-per-task" in line for line in efficiency.advice)
    content = page.content.decode()
    assert 'id="efficiency"' in content
    assert "25.0&nbsp;%" in content
    assert "no GPUs" in content
    assert "Left on the table" in content
    assert page.context["cheaper"] is None  # measured right-sizing replaces the guess


def test_a_job_without_usage_data_says_so(site):
    job = site.job
    Job.objects.filter(pk=job.pk).update(
        **dict.fromkeys(USAGE_COLUMNS), right_sized_service_units=None
    )
    page = _job_page(site, job)
    assert page.context["efficiency"] is None
    assert 'id="no-usage"' in page.content.decode()

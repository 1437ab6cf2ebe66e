"""The jobs table (filters, sorting, pagination, CSV) and the job detail's explained charge."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.urls import reverse

from accounting.clusters import charging
from accounting.ledger.pages import JOBS_PER_PAGE
from accounting.ledger.usage import USAGE_COLUMNS
from accounting.models import Job
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def _jobs_url() -> str:
    return reverse("accounting:project-jobs", args=["pawsey0003"])


def _csv(response) -> list[dict[str, str]]:
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


def test_the_jobs_table_pages_through_the_projects_jobs(site):
    client = client_for(site.users["member"])
    total = Job.objects.filter(project=site.project).count()
    assert total > JOBS_PER_PAGE
    first = client.get(_jobs_url())
    assert first.context["page"].paginator.count == total
    assert len(first.context["rows"]) == JOBS_PER_PAGE
    last = client.get(_jobs_url(), {"page": first.context["page"].paginator.num_pages})
    shown = {job.pk for job, _ in first.context["rows"]} | {
        job.pk for job, _ in last.context["rows"]
    }
    assert len(shown) == JOBS_PER_PAGE + len(last.context["rows"])


def test_filters_narrow_the_table_and_the_csv_alike(site):
    client = client_for(site.users["pi"])
    query = {"user": "carol", "partition": site.job.partition_id, "state": "COMPLETED"}
    page = client.get(_jobs_url(), query)
    expected = Job.objects.filter(
        project=site.project, username="carol", partition_id=site.job.partition_id,
        state="COMPLETED",
    )  # fmt: skip
    assert page.context["page"].paginator.count == expected.count() > 0
    rows = _csv(client.get(_jobs_url(), {**query, "format": "csv"}))
    assert len(rows) == expected.count()
    assert {row["user"] for row in rows} == {"carol"}
    assert {row["state"] for row in rows} == {"COMPLETED"}
    assert sum(Decimal(row["service_units"]) for row in rows) == sum(
        job.service_units for job in expected
    )


def test_the_table_sorts_by_service_units(site):
    page = client_for(site.users["pi"]).get(_jobs_url(), {"sort": "-su"})
    units = [job.service_units for job, _ in page.context["rows"]]
    assert units == sorted(units, reverse=True)
    assert units[0] == max(j.service_units for j in Job.objects.filter(project=site.project))


def test_a_date_range_that_ends_before_it_starts_is_explained(site):
    page = client_for(site.users["pi"]).get(
        _jobs_url(), {"ended_from": "2026-05-02", "ended_to": "2026-05-01"}
    )
    assert page.status_code == 200
    assert "must not be after" in page.content.decode()


def test_a_malformed_date_is_reported_not_crashed_on(site):
    page = client_for(site.users["pi"]).get(_jobs_url(), {"ended_from": "yesterday"})
    assert page.status_code == 200
    assert "Enter a valid date." in page.content.decode()


def test_the_csv_export_is_a_download_of_every_matching_job(site):
    response = client_for(site.users["pi"]).get(_jobs_url(), {"format": "csv"})
    assert response["Content-Disposition"] == 'attachment; filename="pawsey0003-jobs.csv"'
    rows = _csv(response)
    assert len(rows) == Job.objects.filter(project=site.project).count()
    assert set(rows[0]) >= {"job_id", "service_units", "dominant_resource", "energy_wh"}


def test_job_detail_explains_the_charge(site):
    job = site.job
    content = (
        client_for(site.users["member"])
        .get(reverse("accounting:job-detail", args=[job.pk]))
        .content.decode()
    )
    assert f"Job {job.job_id}" in content
    assert job.dominant_resource in content
    assert "SU per node-hour" in content
    if job.partition_version.is_gpu:
        assert "eq 15" in content
        assert "TDP ratio" in content
    else:
        assert "w = C" in content


def _memory_job(site) -> Job:
    job = (
        Job.objects.filter(
            project=site.project,
            dominant_resource="memory",
            charge_state=Job.ChargeState.CHARGED,
            partition__name="work",
        )
        .order_by("-service_units")
        .first()
    )
    if job is None:
        pytest.skip("the generated history has no memory-bound job of pawsey0003")
    # The hint is for jobs without usage data: measured usage right-sizes them instead.
    Job.objects.filter(pk=job.pk).update(
        **dict.fromkeys(USAGE_COLUMNS), right_sized_service_units=None
    )
    return job


def test_a_memory_bound_job_shows_what_the_cores_share_of_memory_would_have_cost(site):
    job = _memory_job(site)
    spec = job.partition_version.spec
    usage = charging.split_evenly(
        nodes=job.nnodes, cores=job.cpus, memory_mb=Decimal(spec.memory_mb // spec.cores) * job.cpus
    )
    expected = charging.charge(spec, usage, elapsed_seconds=job.elapsed_seconds).service_units
    page = client_for(site.users["pi"]).get(reverse("accounting:job-detail", args=[job.pk]))
    cheaper = page.context["cheaper"]
    assert cheaper is not None
    assert cheaper.service_units == expected < job.service_units
    assert "Could have cost less" in page.content.decode()


def test_a_job_dominated_by_its_cores_gets_no_hint(site):
    job = Job.objects.filter(
        project=site.project, dominant_resource="cores", partition__name="work",
        charge_state=Job.ChargeState.CHARGED,
    ).first()  # fmt: skip
    assert job is not None
    page = client_for(site.users["pi"]).get(reverse("accounting:job-detail", args=[job.pk]))
    assert page.context["cheaper"] is None
    assert "Could have cost less" not in page.content.decode()


def test_the_per_node_fractions_chart_has_its_data_table_as_csv(site):
    url = reverse("accounting:job-detail", args=[site.job.pk])
    response = client_for(site.users["pi"]).get(url, {"csv": "fractions"})
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["nodes", "cores %", "memory %", "GPUs %"]
    assert len(rows) >= 2


def test_a_job_is_found_by_its_id_or_words_of_its_name(site):
    client = client_for(site.users["pi"])
    job = Job.objects.filter(project=site.project).exclude(job_name="").order_by("pk").first()
    by_id = client.get(_jobs_url(), {"search": job.job_id})
    assert [row.pk for row, _ in by_id.context["rows"]] == list(
        Job.objects.filter(project=site.project, job_id=job.job_id).values_list("pk", flat=True)
    )
    word = job.job_name.split()[0][:5]
    by_name = client.get(_jobs_url(), {"search": word})
    expected = Job.objects.filter(project=site.project, job_name__icontains=word).count()
    assert by_name.context["page"].paginator.count == expected > 0
    assert (
        client.get(_jobs_url(), {"search": "no-such-job-name"}).context["page"].paginator.count == 0
    )


def test_the_partition_filter_offers_only_where_the_projects_jobs_ran(site):
    from tests.factories import example_cluster

    example_cluster("setonix")  # partitions the project never ran on
    page = client_for(site.users["pi"]).get(_jobs_url())
    offered = set(page.context["form"].fields["partition"].queryset)
    ran_on = {job.partition for job in Job.objects.filter(project=site.project)}
    assert offered == ran_on
    assert all(partition.cluster.name != "setonix" for partition in offered)


def test_the_state_filter_offers_the_common_states_in_words_and_keeps_a_rare_one(site):
    client = client_for(site.users["pi"])
    offered = dict(client.get(_jobs_url()).context["form"].fields["state"].choices)
    assert len(offered) == 10  # any state, and nine a researcher looks for
    assert offered["TIMEOUT"] == "ran out of time"
    assert "BOOT_FAIL" not in offered
    assert "REVOKED" not in offered
    # A rare state from a link still filters, and is shown as chosen.
    rare = client.get(_jobs_url(), {"state": "BOOT_FAIL"})
    assert rare.context["form"].is_valid()
    assert dict(rare.context["form"].fields["state"].choices)["BOOT_FAIL"] == "BOOT_FAIL"
    assert client.get(_jobs_url(), {"state": "NOT_A_STATE"}).context["form"].errors


def test_a_partitions_first_rates_are_not_dated_1970(site):
    from accounting.models import PartitionVersion

    job = site.job
    PartitionVersion.objects.filter(pk=job.partition_version_id).update(
        effective_from="1970-01-01T00:00:00Z"
    )
    client = client_for(site.users["member"])
    content = client.get(reverse("accounting:job-detail", args=[job.pk])).content.decode()
    assert "1970-01-01" not in content
    assert "the partition's first rates" in content
    listing = client.get(reverse("accounting:partition-list")).content.decode()
    assert "1970-01-01" not in listing


def test_where_money_stands_beside_su_the_page_says_why_they_differ(site):
    page = client_for(site.users["pi"]).get(_jobs_url()).content.decode()
    assert 'id="money-vs-su"' in page
    assert "Money does not follow SU" in page

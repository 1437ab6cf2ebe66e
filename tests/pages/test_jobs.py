"""The jobs table (filters, sorting, pagination, CSV) and the job detail's explained charge."""

from __future__ import annotations

import base64
import csv
import io
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounting.clusters import charging
from accounting.ledger import pages
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


def test_the_jobs_table_pages_through_the_projects_jobs_newest_first_by_cursor(site):
    """Issue 33: the default order pages by the jobs API's keyset cursor, never counting every
    job; following "Older" from the first page walks every job once, in the API's order."""
    client = client_for(site.users["member"])
    expected = list(
        Job.objects.filter(project=site.project)
        .order_by(F("end").desc(nulls_first=True), "-id")
        .values_list("pk", flat=True)
    )
    assert len(expected) > JOBS_PER_PAGE
    first = client.get(_jobs_url())
    listing = first.context["listing"]
    assert listing.page is None
    assert listing.newest
    # Counted from the roll-ups and the running jobs, not by reading the ledger.
    assert listing.count == len(expected)
    assert f"{len(expected):,} jobs" in first.content.decode()
    seen, response = [], first
    while True:
        listing = response.context["listing"]
        seen += [job.pk for job, _ in response.context["rows"]]
        if listing.older is None:
            break
        assert 'id="jobs-older"' in response.content.decode()
        response = client.get(_jobs_url(), {"after": listing.older})
        assert 'id="jobs-newest"' in response.content.decode()
    assert seen == expected


def test_the_numbered_pages_stay_for_the_other_orders(site):
    client = client_for(site.users["member"])
    total = Job.objects.filter(project=site.project).count()
    first = client.get(_jobs_url(), {"sort": "-su"})
    page = first.context["listing"].page
    assert page.paginator.count == total
    assert len(first.context["rows"]) == JOBS_PER_PAGE
    last = client.get(_jobs_url(), {"sort": "-su", "page": page.paginator.num_pages})
    shown = {job.pk for job, _ in first.context["rows"]} | {
        job.pk for job, _ in last.context["rows"]
    }
    assert len(shown) == JOBS_PER_PAGE + len(last.context["rows"])


def test_the_count_comes_from_the_rollups_by_user_and_partition_and_from_jobs_in_a_year(site):
    client = client_for(site.users["pi"])
    by_user = client.get(_jobs_url(), {"user": "carol", "partition": site.job.partition_id})
    expected = Job.objects.filter(
        project=site.project, username="carol", partition_id=site.job.partition_id
    ).count()
    assert by_user.context["listing"].count == expected > 0
    ends = Job.objects.filter(project=site.project).exclude(end=None).values_list("end", flat=True)
    first_day, last_day = min(ends).date(), max(ends).date()
    assert (last_day - first_day).days < 366
    dated = client.get(_jobs_url(), {"ended_from": first_day, "ended_to": last_day})
    assert dated.context["listing"].count == ends.count()


def test_a_filter_the_rollups_cannot_count_says_how_to_count_it(site, monkeypatch):
    monkeypatch.setattr(pages, "JOBS_PER_PAGE", 2)  # more than one page of COMPLETED jobs
    page = client_for(site.users["pi"]).get(_jobs_url(), {"state": "COMPLETED"})
    assert page.context["listing"].count is None
    assert len(page.context["rows"]) == 2
    assert "to count them" in page.content.decode()


def test_a_page_link_that_is_not_one_shows_the_newest_jobs_and_says_why(site):
    page = client_for(site.users["pi"]).get(_jobs_url(), {"after": "not-a-cursor"}, follow=True)
    assert page.status_code == 200
    assert page.context["listing"].newest
    assert "the page link was not a cursor of this list" in page.content.decode()


def test_filters_narrow_the_table_and_the_csv_alike(site):
    client = client_for(site.users["pi"])
    query = {"user": "carol", "partition": site.job.partition_id, "state": "COMPLETED"}
    page = client.get(_jobs_url(), query)
    expected = Job.objects.filter(
        project=site.project, username="carol", partition_id=site.job.partition_id,
        state="COMPLETED",
    )  # fmt: skip
    assert len(page.context["rows"]) == expected.count() > 0
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
    expected = list(
        Job.objects.filter(project=site.project, job_name__icontains=word)
        .order_by(F("end").desc(nulls_first=True), "-id")
        .values_list("pk", flat=True)
    )
    shown = [row.pk for row, _ in by_name.context["rows"]]
    assert shown == expected[:JOBS_PER_PAGE]
    # A search over all of the project's jobs is not counted (it would read every one) unless
    # it fits on the page.
    count = by_name.context["listing"].count
    assert count == len(expected) if len(expected) <= JOBS_PER_PAGE else count is None
    assert client.get(_jobs_url(), {"search": "no-such-job-name"}).context["listing"].count == 0


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


def test_the_first_page_does_not_count_the_ledger(site):
    """At ten million jobs a count of a project's jobs read every partition's index (issue 33):
    newest first, the page counts roll-ups and the jobs with no end, never the ended ones."""
    client = client_for(site.users["member"])
    with CaptureQueriesContext(connection) as queries:
        client.get(_jobs_url())
    counts = [query["sql"] for query in queries if "COUNT(" in query["sql"].upper()]
    ledger_counts = [sql for sql in counts if '"accounting_job"' in sql]
    assert all('"end" IS NULL' in sql for sql in ledger_counts), ledger_counts


@pytest.mark.parametrize(
    "text",
    [
        "0001-01-01T00:00:00+00:00,5",  # the calendar's first month: no month before it
        "9999-12-31T23:59:59+00:00,5",
        "2026-01-01T00:00:00+14:00,999999999999999999",
        ",0",  # a running job's cursor
    ],
)
def test_a_crafted_cursor_at_the_calendars_edges_is_a_page_not_a_crash(site, text):
    """A cursor is read back strictly, but one that decodes can name any instant: the pages'
    month windows must not step before year 1 (it raised 'unreachable' in add_months)."""
    crafted = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    client = client_for(site.users["pi"])
    page = client.get(_jobs_url(), {"after": crafted})
    assert page.status_code == 200
    assert page.context["listing"].newest is False
    with CaptureQueriesContext(connection) as queries:
        answer = client.get("/api/v1/jobs/", {"project": site.project.code, "cursor": crafted})
    assert answer.status_code == 200
    assert isinstance(answer.json()["results"], list)
    # A page reads a few windows of months, wherever the cursor points: counted back from
    # year 9999 in windows of 16 months it made about 6,000 queries (minutes of a worker).
    assert len(queries.captured_queries) < 20

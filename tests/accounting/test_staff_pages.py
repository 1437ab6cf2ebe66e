"""Staff import pages: who may see them, upload, quarantine and retry."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Sum
from django.urls import reverse

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import jobs_import
from accounting.models import (
    Cluster,
    ImportRun,
    ImportRunChange,
    Job,
    QuarantinedRecord,
    UsageDaily,
)
from kit import numbers
from projects.models import Project
from tests.factories import ClusterFactory, UserFactory

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct" / "sacct_allocations.psv"
PAGES = ["accounting:import-list", "accounting:quarantine-list"]

pytestmark = pytest.mark.django_db


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003"):
        Project.objects.create(code=code)
    return Cluster.objects.get(name="slurm-testbed")


@pytest.fixture
def staff_client(client):
    client.force_login(UserFactory(username="ops", is_staff=True))
    return client


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_visitors_are_sent_to_sign_in(client, page):
    response = client.get(reverse(page))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("page", PAGES)
def test_researchers_get_not_found(client, page):
    client.force_login(UserFactory(username="alice"))
    assert client.get(reverse(page)).status_code == 404


def test_staff_upload_imports_the_file_and_shows_the_summary(
    staff_client, testbed, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.VAR_DIR = tmp_path
    upload = SimpleUploadedFile("dump.psv", SAMPLE.read_bytes(), content_type="text/plain")
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            reverse("accounting:import-list"), {"cluster": testbed.pk, "file": upload}
        )
    response = staff_client.get(response["Location"])
    assert response.status_code == 200
    run = ImportRun.objects.get()
    assert run.status == "succeeded"
    assert run.lines == 225
    assert run.quarantined > 0  # pawsey0004 does not exist here
    page = response.content.decode()
    assert f"Import {run.pk}: slurm-testbed" in page
    assert "unknown project (Slurm account &#x27;pawsey0004&#x27;)" in page
    assert (tmp_path / "uploads" / f"import-{run.pk}.psv").exists()


def test_an_upload_that_is_not_sacct_output_is_refused_with_a_message(staff_client, testbed):
    upload = SimpleUploadedFile("notes.txt", b"hello world\n")
    response = staff_client.post(
        reverse("accounting:import-list"), {"cluster": testbed.pk, "file": upload}
    )
    assert response.status_code == 200
    assert "does not look like sacct output" in response.content.decode()
    assert not ImportRun.objects.exists()


def test_retry_button_charges_lines_whose_project_now_exists(
    staff_client, testbed, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.VAR_DIR = tmp_path
    upload = SimpleUploadedFile("dump.psv", SAMPLE.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(
            reverse("accounting:import-list"), {"cluster": testbed.pk, "file": upload}
        )
    held = QuarantinedRecord.objects.filter(resolved_at__isnull=True).count()
    assert held > 0
    assert (
        f"{held} open line"
        in staff_client.get(reverse("accounting:quarantine-list")).content.decode()
    )
    Project.objects.create(code="pawsey0004")  # created outside the services: no automatic retry
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            reverse("accounting:quarantine-retry"), {"cluster": testbed.pk}, follow=True
        )
    assert response.status_code == 200
    assert not QuarantinedRecord.objects.filter(resolved_at__isnull=True).exists()
    assert Job.objects.count() == 225


def _upload(client, cluster, content, name="dump.psv", **fields):
    return client.post(
        reverse("accounting:import-list"),
        {"cluster": cluster.pk, "file": SimpleUploadedFile(name, content), **fields},
    )


def test_the_same_file_uploaded_twice_says_so_and_imports_again_only_on_purpose(
    staff_client, testbed, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.VAR_DIR = tmp_path
    with django_capture_on_commit_callbacks(execute=True):
        _upload(staff_client, testbed, SAMPLE.read_bytes())
    first = ImportRun.objects.get()

    again = _upload(staff_client, testbed, SAMPLE.read_bytes(), name="renamed.psv")

    assert again.status_code == 200
    page = again.content.decode()
    assert f"already imported as run {first.pk}" in page
    assert ImportRun.objects.count() == 1
    assert sorted(p.name for p in (tmp_path / "uploads").iterdir()) == [f"import-{first.pk}.psv"]

    with django_capture_on_commit_callbacks(execute=True):
        response = _upload(staff_client, testbed, SAMPLE.read_bytes(), import_again="on")
    assert response.status_code == 302
    second = ImportRun.objects.exclude(pk=first.pk).get()
    assert second.checksum == first.checksum
    assert second.charged == 0  # nothing new: every job is in the ledger as read
    assert second.imported + second.quarantined == first.charged + first.quarantined


def test_an_upload_of_sacct_json_is_read_as_json(
    staff_client, testbed, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.VAR_DIR = tmp_path
    Cluster.objects.filter(pk=testbed.pk).update(slurm_cluster_name="setonix")
    content = (ROOT / "examples" / "sacct" / "sacct.json").read_bytes()

    with django_capture_on_commit_callbacks(execute=True):
        response = _upload(staff_client, testbed, content, name="dump.json")

    assert response.status_code == 302
    run = ImportRun.objects.get()
    assert run.status == "succeeded"
    assert run.charged > 0
    assert run.lines == 733
    assert (tmp_path / "uploads" / f"import-{run.pk}.json").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"JobID|JobIDRaw|User\n123|123|alice\n",  # a header without the columns a charge needs
        b"JobID|JobIDRaw\n" + bytes(range(256)) * 8,  # a header and then binary junk
        b'{"jobs": [{"job_id": 1}, oops',  # JSON broken after the first job
    ],
    ids=["missing-columns", "binary-after-header", "broken-json"],
)
def test_an_upload_that_cannot_be_imported_fails_its_run_not_the_page(
    staff_client, testbed, settings, tmp_path, django_capture_on_commit_callbacks, content
):
    # With the demo's in-process worker the import runs inside the request: a fatal input
    # answered HTTP 500 before.
    settings.VAR_DIR = tmp_path
    with django_capture_on_commit_callbacks(execute=True):
        response = _upload(staff_client, testbed, content)

    assert response.status_code == 302
    run = ImportRun.objects.get()
    assert run.status in {"failed", "succeeded"}
    page = staff_client.get(response["Location"]).content.decode()
    assert f"Import {run.pk}" in page
    if run.status == "failed":
        assert run.error
        assert run.error[:40] in page.replace("&#x27;", "'")


def _changed_sample() -> list[str]:
    """The sample with job 1332598 renamed (its SU unchanged) and job 1332599 run twice as
    long (its SU doubled)."""
    lines = SAMPLE.read_text().splitlines(keepends=True)
    changed = []
    for line in lines:
        if line.startswith("1332598|"):
            line = line.replace("|single-core|", "|single-core-renamed|")
        elif line.startswith("1332599|"):
            line = line.replace(
                "2026-11-22T02:00:40|00:00:12|12|", "2026-11-22T02:00:52|00:00:24|24|"
            )
        changed.append(line)
    return changed


def test_a_run_that_corrected_jobs_lists_them_and_what_it_booked_per_project(staff_client, testbed):
    first, _ = jobs_import(cluster=testbed, lines=SAMPLE.read_text().splitlines(True), source="a")
    doubled = Job.objects.get(job_id_raw="1332599")
    before = doubled.service_units
    second, summary = jobs_import(cluster=testbed, lines=_changed_sample(), source="b")
    assert (summary.updated, summary.charged) == (2, 0)

    page = staff_client.get(reverse("accounting:import-detail", args=[second.pk])).content.decode()

    assert "the difference booked" not in page
    corrected = page[page.index('id="corrected"') :]
    assert ">1332598</a>" in corrected
    assert ">1332599</a>" in corrected
    assert ">1332600</a>" not in corrected  # read again unchanged: not a correction
    doubled.refresh_from_db()
    assert doubled.service_units == 2 * before
    assert f"{numbers.su(doubled.service_units)}</td>" in corrected
    # What the corrections changed: the doubled job adds what it had before, the renamed one
    # nothing; each is counted under its project, as the import recorded them.
    renamed = Job.objects.get(job_id_raw="1332598")
    net = page[
        page.index('id="net-change"') : page.index("</section>", page.index('id="net-change"'))
    ]
    changes = {c.project.code: c for c in ImportRunChange.objects.filter(run=second)}
    assert changes[doubled.project.code].service_units == before
    assert changes[renamed.project.code].corrected_jobs >= 1
    assert sum(c.corrected_jobs for c in changes.values()) == 2
    assert sum(c.service_units for c in changes.values()) == before
    assert f'<td class="num">+{numbers.su(before)}</td>' in net
    # The balance moved by that much: the daily roll-ups hold the new SU.
    total = UsageDaily.objects.filter(project=doubled.project).aggregate(Sum("service_units"))
    jobs_total = Job.objects.filter(project=doubled.project).aggregate(Sum("service_units"))
    assert total["service_units__sum"] == jobs_total["service_units__sum"]

    page = staff_client.get(reverse("accounting:import-detail", args=[first.pk])).content.decode()
    bookings = page[
        page.index('id="bookings"') : page.index("</section>", page.index('id="bookings"'))
    ]
    for project in Project.objects.filter(code__in=["pawsey0001", "pawsey0002", "pawsey0003"]):
        jobs = Job.objects.filter(project=project).exclude(charge_state="pending")
        booked = jobs.filter(import_run=first)
        added = sum(job.service_units for job in booked)
        assert (
            f'<td>{project.code}</td><td class="num">{numbers.count(booked.count())}</td>'
            f'<td class="num">{numbers.su(added)}</td>'
        ) in bookings


def test_a_run_that_booked_nothing_shows_no_bookings(staff_client, testbed):
    jobs_import(cluster=testbed, lines=SAMPLE.read_text().splitlines(True), source="a")
    again, summary = jobs_import(
        cluster=testbed, lines=SAMPLE.read_text().splitlines(True), source="b"
    )
    assert summary.charged == summary.updated == 0
    page = staff_client.get(reverse("accounting:import-detail", args=[again.pk])).content.decode()
    assert 'id="bookings"' not in page
    assert 'id="corrected"' not in page


def test_the_retry_form_defaults_to_the_cluster_whose_lines_are_open(staff_client, testbed):
    ClusterFactory(name="aardvark")  # first by name, nothing quarantined
    jobs_import(cluster=testbed, lines=SAMPLE.read_text().splitlines(True), source="a")
    assert QuarantinedRecord.objects.filter(cluster=testbed, resolved_at__isnull=True).exists()

    page = staff_client.get(reverse("accounting:quarantine-list")).content.decode()

    assert f'<option value="{testbed.pk}" selected>slurm-testbed</option>' in page
    assert page.count(" selected>") == 1


def test_resolved_lines_stay_findable_with_what_resolved_them(
    staff_client, testbed, django_capture_on_commit_callbacks
):
    jobs_import(cluster=testbed, lines=SAMPLE.read_text().splitlines(True), source="a")
    held = QuarantinedRecord.objects.filter(resolved_at__isnull=True)
    lines = sorted(held.values_list("line_number", flat=True))
    assert lines
    Project.objects.create(code="pawsey0004")
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(reverse("accounting:quarantine-retry"), {"cluster": testbed.pk})
    assert not held.exists()

    open_page = staff_client.get(reverse("accounting:quarantine-list")).content.decode()
    resolved = staff_client.get(reverse("accounting:quarantine-list"), {"show": "resolved"})
    every = staff_client.get(reverse("accounting:quarantine-list"), {"show": "all"})

    assert "Nothing quarantined." in open_page
    page = resolved.content.decode()
    assert f"Resolved lines ({numbers.count(len(lines))})" in page
    record = QuarantinedRecord.objects.get(line_number=lines[0])
    assert record.resolution
    assert record.resolution in page
    assert f'<td class="num hide-phone">{lines[0]}</td>' in page
    assert f"All lines ({numbers.count(len(lines))})" in every.content.decode()

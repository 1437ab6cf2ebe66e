"""Staff import pages: who may see them, upload, quarantine and retry."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.models import Cluster, ImportRun, Job, QuarantinedRecord
from projects.models import Project
from tests.factories import UserFactory

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

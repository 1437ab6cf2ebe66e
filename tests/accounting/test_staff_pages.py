"""Staff import pages: who may see them, upload, quarantine and retry."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.models import Cluster, ImportRun, Job, QuarantinedRecord
from allocations.models import Project
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
    assert "does not look like sacct --parsable2 output" in response.content.decode()
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

"""Staff writes of the accounting API: spec files (clusters, partitions and rate versions),
sacct uploads and quarantine retries, through the same services as the pages and commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounting.models import ImportRun, Job, PartitionVersion
from tests.allocations.conftest import SAMPLE

pytestmark = pytest.mark.django_db

SETONIX = json.loads(
    (Path(__file__).resolve().parents[2] / "examples/clusters/setonix.json").read_text()
)


def test_applying_a_cluster_spec_creates_it_and_applying_it_again_changes_nothing(world):
    staff = world.client("staff")
    created = staff.post("/api/v1/clusters/", SETONIX, format="json")
    assert created.status_code == 201
    assert created.json()["cluster"]["name"] == "setonix"
    assert sorted(created.json()["created"]) == ["gpu", "highmem", "work"]
    again = staff.post("/api/v1/clusters/", SETONIX, format="json")
    assert again.status_code == 200
    assert sorted(again.json()["unchanged"]) == ["gpu", "highmem", "work"]
    assert again.json()["versioned"] == []


def test_a_changed_partition_gets_a_new_rate_version_and_keeps_the_old_one(world):
    staff = world.client("staff")
    spec = {**SETONIX["partitions"][0]}
    staff.post("/api/v1/clusters/", SETONIX, format="json")
    changed = {**spec, "cluster": "setonix", "cpu_tdp_watts": 300, "note": "new CPUs"}
    response = staff.post("/api/v1/partitions/", changed, format="json")
    assert response.status_code == 200
    versions = response.json()["versions"]
    assert [version["number"] for version in versions] == [2, 1]
    assert versions[0]["change_note"] == "new CPUs"
    assert response.json()["current"]["number"] == 2
    versions = PartitionVersion.objects.filter(partition__cluster__name="setonix")
    assert versions.filter(partition__name=spec["name"]).count() == 2


def test_a_new_partition_on_an_existing_cluster_is_created(world):
    spec = {
        "cluster": "slurm-testbed", "name": "debug", "nodelist": "nid[3001-3002]", "sockets": 1,
        "cores_per_socket": 32, "memory_mb": 128000, "cpu_tdp_watts": 200,
    }  # fmt: skip
    response = world.client("staff").post("/api/v1/partitions/", spec, format="json")
    assert response.status_code == 201
    assert response.json()["current"]["weight"] == "32.000000"  # w = C on a CPU partition
    assert response.json()["current"]["node_count"] == 2


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"partitions": []}, "This list may not be empty."),
        ({"name": "bad name"}, 'Enter a valid "slug"'),
    ],
)
def test_a_bad_spec_is_refused_with_the_spec_readers_words(world, change, words):
    response = world.client("staff").post("/api/v1/clusters/", {**SETONIX, **change}, format="json")
    assert response.status_code == 400
    assert words in response.json()["message"]


def test_a_gpu_partition_needs_the_gpu_tdp(world):
    gpu = {**SETONIX["partitions"][2]}
    gpu.pop("gpu_tdp_watts")
    response = world.client("staff").post(
        "/api/v1/partitions/", {**gpu, "cluster": "slurm-testbed"}, format="json"
    )
    assert response.status_code == 400
    assert "gpu_tdp_watts" in response.json()["message"]


def test_an_uploaded_sacct_file_is_imported_and_its_run_can_be_followed(
    world, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.VAR_DIR = tmp_path
    content = (SAMPLE / "midrun" / "sacct_midrun_allocations.psv").read_bytes()
    staff = world.client("staff")
    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(
            "/api/v1/imports/",
            {"cluster": "slurm-testbed", "file": SimpleUploadedFile("midrun.psv", content)},
            format="multipart",
        )
    assert response.status_code == 202
    assert response.json()["source"] == "upload midrun.psv"
    run = staff.get(f"/api/v1/imports/{response.json()['id']}/").json()
    assert run["status"] == "succeeded"
    buckets = ("steps_skipped", "imported", "updated", "charged", "pending", "quarantined")
    assert sum(run[bucket] for bucket in buckets) == run["lines"] > 0
    assert run["started_by"] == "ops"
    assert (tmp_path / "uploads" / f"import-{run['id']}.psv").exists()
    assert Job.objects.filter(import_run_id=run["id"]).exists()


def test_a_file_that_is_not_sacct_output_is_refused_before_anything_is_kept(
    world, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    response = world.client("staff").post(
        "/api/v1/imports/",
        {"cluster": "slurm-testbed", "file": SimpleUploadedFile("notes.txt", b"hello\n")},
        format="multipart",
    )
    assert response.status_code == 400
    assert "no header with JobID" in response.json()["errors"]["file"][0]
    assert not ImportRun.objects.filter(source__startswith="upload").exists()


def test_staff_read_an_imports_quarantined_lines_and_retry_them(world):
    staff = world.client("staff")
    lines = staff.get(f"/api/v1/imports/{world.run.pk}/quarantined-lines/").json()["results"]
    assert [line["account"] for line in lines] == ["pawsey9999"]
    assert "pawsey9999" in lines[0]["reason"]
    open_lines = staff.get("/api/v1/quarantined-lines/?resolved=false").json()
    assert open_lines["count"] == 1
    retry = staff.post("/api/v1/quarantined-lines/retry/", {"cluster": "slurm-testbed"})
    assert retry.status_code == 202
    assert retry.json() == {
        "message": "1 open line(s) of slurm-testbed are read again",
    }


def test_uploading_content_imported_before_answers_409_with_the_earlier_run(
    world, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.VAR_DIR = tmp_path
    content = (SAMPLE / "midrun" / "sacct_midrun_allocations.psv").read_bytes()
    staff = world.client("staff")

    def upload(**fields):
        with django_capture_on_commit_callbacks(execute=True):
            return staff.post(
                "/api/v1/imports/",
                {
                    "cluster": "slurm-testbed",
                    "file": SimpleUploadedFile("m.psv", content),
                    **fields,
                },
                format="multipart",
            )

    first = upload()
    second = upload()
    third = upload(import_again=True)

    assert first.status_code == 202
    assert second.status_code == 409
    assert second.json()["import_run"] == first.json()["id"]
    assert "already imported" in second.json()["message"]
    assert third.status_code == 202
    assert third.json()["checksum"] == first.json()["checksum"]


def test_a_cluster_spec_may_set_the_grid_intensity_and_leaving_it_out_keeps_it(world):
    staff = world.client("staff")
    created = staff.post(
        "/api/v1/clusters/", {**SETONIX, "grid_intensity_g_per_kwh": "512.5"}, format="json"
    )
    assert created.json()["cluster"]["grid_intensity_g_per_kwh"] == "512.500"
    again = staff.post("/api/v1/clusters/", SETONIX, format="json")
    assert again.json()["cluster"]["grid_intensity_g_per_kwh"] == "512.500"
    refused = staff.post(
        "/api/v1/clusters/", {**SETONIX, "grid_intensity_g_per_kwh": "-1"}, format="json"
    )
    assert refused.status_code == 400
    assert "grid_intensity_g_per_kwh" in refused.json()["errors"]

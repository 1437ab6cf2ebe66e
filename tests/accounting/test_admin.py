"""The admin shows staff the derived weights and the ledger, read-only."""

from pathlib import Path

import pytest
from django.urls import reverse

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, Job, Partition, PartitionVersion
from projects.models import Project
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(UserFactory(username="root-admin", is_staff=True, is_superuser=True))
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/setonix.json"))
    return client


def test_partition_list_shows_the_derived_weight_with_its_reason(admin_client):
    page = admin_client.get(reverse("admin:accounting_partition_changelist")).content.decode()
    assert "GPU node: (8 x 280 W GPU) / (1 x 280 W CPU) x 64 cores = 512 SU per node-hour" in page
    assert "w = C = 128 cores" in page


def test_a_new_version_is_added_through_the_service_and_old_ones_cannot_be_edited(admin_client):
    gpu = Partition.objects.get(name="gpu")
    current = PartitionVersion.objects.get(partition=gpu)
    response = admin_client.post(
        reverse("admin:accounting_partitionversion_add"),
        {
            "partition": gpu.pk, "effective_from_0": "2027-01-01", "effective_from_1": "00:00:00",
            "nodelist": "nid[004000-004153]", "sockets": 1, "cores_per_socket": 64,
            "memory_mb": 245000, "gpus": 8, "cpu_tdp_watts": "280", "gpu_tdp_watts": "350",
            "gpu_streaming_multiprocessors": 0, "node_local": "{}", "weight_override": "",
            "weight_override_reason": "", "change_note": "new GPU firmware, higher TDP",
        },
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    newest = PartitionVersion.objects.filter(partition=gpu).order_by("-effective_from").first()
    assert newest.number == 2
    assert newest.derived_weight == 640
    change = admin_client.get(
        reverse("admin:accounting_partitionversion_change", args=[current.pk])
    )
    assert b'name="gpu_tdp_watts"' not in change.content  # shown, not editable


def test_a_version_that_would_rewrite_history_is_refused_with_a_message(admin_client):
    gpu = Partition.objects.get(name="gpu")
    response = admin_client.post(
        reverse("admin:accounting_partitionversion_add"),
        {
            "partition": gpu.pk, "effective_from_0": "1960-01-01", "effective_from_1": "00:00:00",
            "nodelist": "nid[004000-004153]", "sockets": 1, "cores_per_socket": 64,
            "memory_mb": 245000, "gpus": 8, "cpu_tdp_watts": "280", "gpu_tdp_watts": "350",
            "gpu_streaming_multiprocessors": 0, "node_local": "{}",
        },
    )  # fmt: skip
    assert response.status_code == 200
    assert "a new version must start after version 1" in response.content.decode()


def test_the_ledger_is_visible_and_read_only(admin_client):
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.create(code=code)
    with (ROOT / "examples/sacct/sacct_allocations.psv").open() as lines:
        jobs_import(cluster=Cluster.objects.get(name="slurm-testbed"), lines=lines, source="t")
    assert admin_client.get(reverse("admin:accounting_job_changelist")).status_code == 200
    job = Job.objects.first()
    page = admin_client.get(reverse("admin:accounting_job_change", args=[job.pk]))
    assert page.status_code == 200
    assert b'name="service_units"' not in page.content
    assert admin_client.get(reverse("admin:accounting_job_add")).status_code == 403


def test_cost_model_versions_are_listed_read_only(admin_client):
    from accounting.costs.services import cost_model_version_create

    cluster = Cluster.objects.get(name="setonix")
    text = (ROOT / "examples/costmodels/setonix.cost").read_text()
    version = cost_model_version_create(cluster=cluster, name="demo", text=text)
    listing = admin_client.get(reverse("admin:accounting_costmodelversion_changelist"))
    assert listing.status_code == 200
    assert "demo" in listing.content.decode()
    page = admin_client.get(reverse("admin:accounting_costmodelversion_change", args=[version.pk]))
    assert page.status_code == 200
    assert b'name="text"' not in page.content  # shown, not editable
    assert admin_client.get(reverse("admin:accounting_costmodelversion_add")).status_code == 403
    delete = reverse("admin:accounting_costmodelversion_delete", args=[version.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    version.refresh_from_db()

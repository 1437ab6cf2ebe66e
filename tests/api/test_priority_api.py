"""The dynamic priority API: staff post profiling coefficients (one, a list, a CSV file),
read them, read each project's K, Pr_dyn and command, and set a cluster's policy."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework import serializers

from accounting.models import Job
from accounting.utilisation.priority import PriorityPolicy as MathsPolicy
from accounting.utilisation.priority import dynamic_priority
from allocations.models import PriorityPolicy, ProfilingCoefficient
from allocations.priorities.services import priority_policy_set, profiling_coefficient_post

pytestmark = pytest.mark.django_db

POLICY = {"base_priority": "1000", "k1": "0.4", "k2": "0.7", "c0": "0.5", "c1": "1", "c2": "3"}


def staff(world):
    return world.client("staff")


def a_job(world, project):
    job = (
        Job.objects.filter(project=project, cluster=world.centre.cluster, run="")
        .order_by("pk")
        .first()
    )
    assert job is not None
    return job


@pytest.mark.parametrize("role", ["member", "pi", "chair"])
def test_researchers_and_committee_get_404_everywhere(world, role):
    client = world.client(role)
    assert client.get("/api/v1/profiling-coefficients/").status_code == 404
    assert client.get("/api/v1/priorities/?cluster=slurm-testbed").status_code == 404
    assert client.get("/api/v1/priority-policies/slurm-testbed/").status_code == 404
    response = client.post(
        "/api/v1/profiling-coefficients/",
        {"cluster": "slurm-testbed", "project": "pawsey0003", "k_prof": "0.5"},
        format="json",
    )
    assert response.status_code == 404
    assert not ProfilingCoefficient.objects.exists()


def test_anonymous_callers_get_401(world):
    assert world.client("anonymous").get("/api/v1/priorities/?cluster=x").status_code == 401


def test_staff_post_one_coefficient_for_a_project(world):
    response = staff(world).post(
        "/api/v1/profiling-coefficients/",
        {"cluster": "slurm-testbed", "project": "pawsey0003", "k_prof": "0.55", "note": "x"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    (made,) = response.json()
    assert made["project"] == "pawsey0003"
    assert made["k_prof"] == "0.550000"
    assert made["job"] is None
    assert made["slurm_job_id"] is None
    assert made["source"] == "api"
    assert made["posted_by"] == "ops"
    assert made["posted_at"].endswith("Z")


def test_staff_post_a_list_for_jobs_by_slurm_job_id(world):
    job = a_job(world, world.centre.p3)
    body = [
        {"cluster": "slurm-testbed", "project": "pawsey0003", "k_prof": "0.8",
         "job_id": job.job_id_raw},
        {"cluster": "slurm-testbed", "project": "pawsey0001", "k_prof": 1},
    ]  # fmt: skip
    response = staff(world).post("/api/v1/profiling-coefficients/", body, format="json")
    assert response.status_code == 201, response.json()
    first, second = response.json()
    assert (first["job"], first["slurm_job_id"]) == (job.pk, job.job_id)
    assert second["project"] == "pawsey0001"
    assert ProfilingCoefficient.objects.count() == 2


def test_a_list_with_one_bad_item_saves_nothing_and_names_the_item(world):
    job = a_job(world, world.centre.p3)
    body = [
        {"cluster": "slurm-testbed", "project": "pawsey0003", "k_prof": "0.8"},
        {"cluster": "slurm-testbed", "project": "pawsey0001", "k_prof": "-1"},
        {"cluster": "slurm-testbed", "project": "pawsey0001", "k_prof": "1",
         "job_id": job.job_id_raw},
        {"cluster": "nowhere", "project": "pawsey0001", "k_prof": "1"},
    ]  # fmt: skip
    response = staff(world).post("/api/v1/profiling-coefficients/", body, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert set(errors) == {"1.k_prof", "2.job_id", "3.cluster"}
    assert errors["2.job_id"] == [f"job {job.job_id_raw} is not a job of project pawsey0001"]
    assert errors["3.cluster"][0].startswith("unknown cluster 'nowhere'")
    assert not ProfilingCoefficient.objects.exists()


def test_a_job_id_that_names_no_job_is_a_field_error(world):
    response = staff(world).post(
        "/api/v1/profiling-coefficients/",
        {"cluster": "slurm-testbed", "project": "pawsey0003", "k_prof": "1", "job_id": "42"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {"job_id": ["no job with id 42 on slurm-testbed"]}


def test_an_empty_list_is_refused(world):
    response = staff(world).post("/api/v1/profiling-coefficients/", [], format="json")
    assert response.status_code == 400


def test_staff_upload_a_csv_file(world):
    job = a_job(world, world.centre.p3)
    content = f"project,k_prof,job_id\npawsey0003,0.9,{job.job_id_raw}\npawsey0001,0.2\n"
    response = staff(world).post(
        "/api/v1/profiling-coefficients/csv/",
        {"cluster": "slurm-testbed", "file": SimpleUploadedFile("k.csv", content.encode())},
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["imported"] == 2
    assert [item["source"] for item in body["results"]] == ["csv", "csv"]
    assert body["results"][0]["slurm_job_id"] == job.job_id


def test_a_csv_file_with_bad_lines_is_refused_whole_with_line_numbers(world):
    content = b"project,k_prof\npawsey0003,0.9\npawsey0001,lots\nnosuch,1\n"
    response = staff(world).post(
        "/api/v1/profiling-coefficients/csv/",
        {"cluster": "slurm-testbed", "file": SimpleUploadedFile("k.csv", content)},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["errors"]["file"] == [
        "line 3, column k_prof: K_prof must be a decimal number, got 'lots'",
        "line 4, column project: unknown project 'nosuch'",
    ]
    assert not ProfilingCoefficient.objects.exists()


def test_coefficients_are_listed_newest_first_and_filtered(world):
    c = world.centre
    for project, k in ((c.p1, "0.1"), (c.p3, "0.2"), (c.p3, "0.3")):
        profiling_coefficient_post(cluster=c.cluster, project=project, k_prof=k, posted_by=c.staff)
    client = staff(world)
    everything = client.get("/api/v1/profiling-coefficients/").json()
    assert everything["count"] == 3
    assert [item["k_prof"] for item in everything["results"]] == [
        "0.300000", "0.200000", "0.100000",
    ]  # fmt: skip
    p3 = client.get("/api/v1/profiling-coefficients/?project=pawsey0003&cluster=slurm-testbed")
    assert p3.json()["count"] == 2
    assert client.get("/api/v1/profiling-coefficients/?cluster=other").json()["count"] == 0


def test_priorities_are_eq_14_of_each_projects_k(world):
    c = world.centre
    priority_policy_set(cluster=c.cluster, updated_by=c.staff, **POLICY)
    for project, k in ((c.p1, "0.2"), (c.p2, "0.55"), (c.p3, "0.9")):
        profiling_coefficient_post(cluster=c.cluster, project=project, k_prof=k, posted_by=c.staff)
    response = staff(world).get("/api/v1/priorities/?cluster=slurm-testbed")
    assert response.status_code == 200
    body = response.json()
    assert body["policy"]["k1"] == "0.400000"
    maths = MathsPolicy(
        k1=Decimal("0.4"), k2=Decimal("0.7"), c0=Decimal("0.5"), c1=Decimal(1), c2=Decimal(3)
    )
    rows = {row["project"]: row for row in body["projects"]}
    assert set(rows) == {"pawsey0001", "pawsey0002", "pawsey0003"}
    for row in rows.values():
        expected = dynamic_priority(base=1000, k_prof=Decimal(row["k_prof"]), policy=maths)
        assert Decimal(row["priority"]) == expected
        assert row["slurm_priority"] == int(expected)
        assert row["k_source"] == "project"
        assert row["last_action"] is None
    assert rows["pawsey0003"]["priority"] == "1900.000000"
    assert rows["pawsey0002"]["command"] == (
        "sacctmgr --immediate modify qos pawsey0002 set priority=1150"
    )


def test_priorities_without_a_policy_list_k_with_null_priorities(world):
    c = world.centre
    profiling_coefficient_post(cluster=c.cluster, project=c.p1, k_prof="0.2", posted_by=c.staff)
    body = staff(world).get("/api/v1/priorities/?cluster=slurm-testbed").json()
    assert body["policy"] is None
    (row,) = body["projects"]
    assert (row["k_prof"], row["priority"], row["command"]) == ("0.200000", None, None)


@pytest.mark.parametrize("query", ["", "?cluster=", "?cluster=nowhere"])
def test_priorities_need_a_known_cluster(world, query):
    response = staff(world).get(f"/api/v1/priorities/{query}")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"cluster"}


def test_staff_set_read_and_replace_a_policy(world):
    client = staff(world)
    url = "/api/v1/priority-policies/slurm-testbed/"
    assert client.get(url).status_code == 404
    created = client.put(url, POLICY, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["command_template"] == (
        "sacctmgr --immediate modify qos {qos} set priority={priority}"
    )
    assert created.json()["execution_enabled"] is False
    replaced = client.put(
        url, {**POLICY, "k2": "0.8", "execution_enabled": True,
              "command_template": "echo {account} {priority}"}, format="json",
    )  # fmt: skip
    assert replaced.status_code == 200
    read = client.get(url).json()
    assert (read["k2"], read["execution_enabled"], read["updated_by"]) == ("0.800000", True, "ops")
    assert PriorityPolicy.objects.count() == 1


def test_a_policy_with_k1_not_below_k2_or_a_bad_template_is_a_400(world):
    client = staff(world)
    url = "/api/v1/priority-policies/slurm-testbed/"
    response = client.put(url, {**POLICY, "k2": "0.4"}, format="json")
    assert response.status_code == 400
    assert response.json()["message"] == (
        "the thresholds must satisfy K1 < K2, got K1=0.4 and K2=0.4"
    )
    response = client.put(url, {**POLICY, "command_template": "run {nope}"}, format="json")
    assert response.status_code == 400
    assert "unknown placeholder {nope}" in response.json()["message"]
    assert (
        client.put("/api/v1/priority-policies/nowhere/", POLICY, format="json").status_code == 404
    )


def test_the_quicker_rendering_is_exactly_drfs_for_the_priority_serializers(world):
    from allocations.priorities.api import (
        PriorityPolicyOutputSerializer,
        ProfilingCoefficientOutputSerializer,
    )

    c = world.centre
    policy = priority_policy_set(cluster=c.cluster, updated_by=c.staff, **POLICY)
    job = a_job(world, c.p3)
    coefficients = [
        profiling_coefficient_post(cluster=c.cluster, project=c.p3, k_prof="1", posted_by=c.staff),
        profiling_coefficient_post(
            cluster=c.cluster, project=c.p3, k_prof="1", job=job, posted_by=c.staff
        ),
    ]
    for serializer, instance in [
        (PriorityPolicyOutputSerializer(), policy),
        *((ProfilingCoefficientOutputSerializer(), item) for item in coefficients),
    ]:
        generic = serializers.ModelSerializer.to_representation(serializer, instance)
        assert serializer.to_representation(instance) == generic

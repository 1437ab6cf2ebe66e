"""Conventions every endpoint keeps: pagination, ordering, UTC times, SU as decimal strings,
errors as JSON with a message and field errors."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.utils import timezone

pytestmark = pytest.mark.django_db

UTC_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
DECIMAL = re.compile(r"^-?\d+\.\d+$")


def test_lists_are_pages_with_a_count_and_links(world):
    client = world.client("staff")
    first = client.get("/api/v1/jobs/?page_size=10&page=1").json()
    assert set(first) == {"count", "next", "previous", "results"}
    assert len(first["results"]) == 10
    assert first["previous"] is None
    assert "page=2" in first["next"]
    second = client.get("/api/v1/jobs/?page_size=10&page=2").json()
    assert {job["id"] for job in first["results"]}.isdisjoint(
        job["id"] for job in second["results"]
    )


def test_the_jobs_newest_first_are_pages_by_cursor_in_the_same_envelope(world):
    client = world.client("staff")
    first = client.get("/api/v1/jobs/?page_size=10").json()
    assert set(first) == {"count", "next", "previous", "results"}
    assert first["count"] is None  # no filter bounds it (docs/api.md, "Jobs")
    assert "cursor=" in first["next"]
    by_number = client.get("/api/v1/jobs/?page_size=20&page=1").json()["results"]
    second = client.get(first["next"]).json()
    assert [job["id"] for job in first["results"] + second["results"]] == [
        job["id"] for job in by_number
    ]


def test_a_page_holds_at_most_1000_items(world):
    response = world.client("staff").get("/api/v1/jobs/?page_size=5000")
    assert response.status_code == 200
    assert response.json()["count"] == 225  # the sample's allocations
    assert len(response.json()["results"]) == 225  # below the cap: all of them
    from kit.api import ApiPagination

    assert ApiPagination.max_page_size == 1000


def test_a_page_past_the_end_is_a_json_404(world):
    response = world.client("staff").get("/api/v1/jobs/?page=99")
    assert response.status_code == 404
    assert response.json() == {"message": "Invalid page.", "errors": {}}


def test_ordering_is_chosen_with_the_ordering_parameter(world):
    client = world.client("staff")
    jobs = client.get("/api/v1/jobs/?ordering=-service_units&page_size=1000").json()["results"]
    units = [float(job["service_units"]) for job in jobs]
    assert units == sorted(units, reverse=True)
    jobs = client.get("/api/v1/jobs/?ordering=elapsed_seconds&page_size=1000").json()["results"]
    elapsed = [job["elapsed_seconds"] for job in jobs]
    assert elapsed == sorted(elapsed)


@override_settings(TIME_ZONE="Australia/Perth")
def test_times_are_iso_8601_in_utc_whatever_the_portals_time_zone(world):
    timezone.activate("Australia/Perth")
    try:
        job = world.client("staff").get(f"/api/v1/jobs/{world.job.pk}/").json()
    finally:
        timezone.deactivate()
    assert UTC_TIME.match(job["end"]), job["end"]
    assert job["end"].startswith("2026-11-22T02:")  # the sample ran 02:00-02:06 UTC
    assert UTC_TIME.match(job["charged_at"])


def test_service_units_are_decimal_strings(world):
    job = world.client("staff").get(f"/api/v1/jobs/{world.job.pk}/").json()
    for field in ("service_units", "pending_service_units", "weight", "energy_wh"):
        assert isinstance(job[field], str)
        assert DECIMAL.match(job[field]), (field, job[field])
    balance = world.client("pi").get("/api/v1/projects/pawsey0003/balance/?on=2026-11-22")
    current = balance.json()["pools"][0]["current"]
    assert DECIMAL.match(current["remaining_su"])
    assert DECIMAL.match(current["percent_used"])


def test_invalid_input_is_a_400_with_a_message_and_errors_per_field(world):
    response = world.client("staff").post(
        "/api/v1/quote/", {"cluster": "slurm-testbed", "partition": "work", "hours": "-1",
                           "nodes": "many"}, format="json",
    )  # fmt: skip
    assert response.status_code == 400
    body = response.json()
    assert set(body["errors"]) == {"hours", "nodes"}
    assert body["errors"]["nodes"] == ["A valid integer is required."]
    assert body["message"].startswith(("nodes: ", "hours: "))


def test_a_refusal_by_a_service_is_a_403_with_the_services_words(world):
    response = world.client("member").post(
        "/api/v1/projects/pawsey0003/members/", {"username": "bob"}, format="json"
    )
    assert response.status_code == 403
    assert response.json() == {"message": "only the PI of pawsey0003 adds members", "errors": {}}


def test_a_rule_of_the_allocation_process_is_a_400_with_its_words(world):
    response = world.client("pi").post(
        f"/api/v1/requests/{world.under_review.pk}/submit/", format="json"
    )
    assert response.status_code == 400
    assert response.json() == {"message": "a under review request cannot be edited", "errors": {}}


def test_a_path_that_names_nothing_is_a_json_404(world):
    client = world.client("staff")
    response = client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"message": "Not found.", "errors": {}}
    assert client.get("/api/v1/projects").json()["message"] == (
        "Not found. (API paths end with '/')"
    )


def _model_serializers():
    from accounting.clusters import serializers as cluster_serializers
    from accounting.ledger import serializers as ledger_serializers
    from accounting.utilisation import serializers as utilisation_serializers
    from allocations.grants import serializers as grants_serializers
    from allocations.rounds import serializers as rounds_serializers
    from kit.api import ApiModelSerializer

    modules = (
        cluster_serializers,
        ledger_serializers,
        utilisation_serializers,
        grants_serializers,
        rounds_serializers,
    )
    for module in modules:
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, ApiModelSerializer)
                and value is not ApiModelSerializer
                and value.__module__ == module.__name__
            ):
                yield value


def test_the_quicker_rendering_is_exactly_drfs_for_every_serializer_and_object(world):
    from rest_framework import serializers

    from accounting.ledger.api import jobs_visible
    from accounting.models import Job
    from projects.invitations import invitation_send
    from projects.models import Membership

    world.job.__class__.objects.filter(pk=world.job.pk).update(partition_version=None)
    c = world.centre
    invitation_send(project=c.p3, email="new@x.org", role="member", actor=c.alice)
    checked = set()
    for serializer_class in _model_serializers():
        model = serializer_class.Meta.model
        objects = list(model.objects.all()[:300])
        if model is Membership:
            objects = list(model.objects.select_related("user"))
        if model is Job:  # the names come annotated
            objects = list(jobs_visible(user=world.users["staff"]).select_related())
        assert objects, serializer_class
        serializer = serializer_class()
        for instance in objects:
            generic = serializers.ModelSerializer.to_representation(serializer, instance)
            assert serializer.to_representation(instance) == generic, (serializer_class, instance)
        checked.add(serializer_class.__name__)
    assert {
        "JobOutputSerializer",
        "AllocationOutputSerializer",
        "RequestOutputSerializer",
    } <= checked


def test_a_page_of_jobs_rendered_from_rows_is_exactly_the_jobs_rendered_from_objects(world):
    from accounting.ledger.api import jobs_visible
    from accounting.ledger.serializers import JobOutputSerializer
    from accounting.models import Job

    Job.objects.filter(pk=world.job.pk).update(partition_version=None)
    serializer = JobOutputSerializer()
    rows = {row["pk"]: row for row in Job.objects.values(*serializer.row_columns())}
    jobs = list(jobs_visible(user=world.users["staff"]))
    assert len(jobs) == len(rows) > 200
    for job in jobs:
        assert serializer.render_row(rows[job.pk]) == serializer.to_representation(job)

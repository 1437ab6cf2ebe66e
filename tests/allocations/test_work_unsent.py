"""Work a page hands to a task never ends in silence when the task queue does not take it
(issue 31, item 1): an overhead computation fails at once with the reason, a cost model
version says its jobs were not priced again and offers to ask again, and Slurm's limits or a
decision's plan that could not be sent show as failed on the Slurm page. The sends are real,
to a Redis port nobody listens on (a broker that is down)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.urls import reverse

from accounting.costs.services import cost_model_version_create
from accounting.models import CostModelVersion, OverheadRun
from accounting.utilisation.overhead import overhead_run_start
from allocations.grants.services import allocation_grant
from allocations.models import ProjectRequest, SlurmSyncRequest
from allocations.project_requests.services import project_request_approve
from tests.allocations.test_project_requests import _ask
from tests.allocations.test_slurm_sync_pages import _nobody_at_the_broker
from tests.conftest import needs_real_services
from tests.factories import ProjectFactory, ResourcePoolFactory, UserFactory, example_cluster

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db, pytest.mark.worker]  # sends are real, not eager


@pytest.fixture
def cluster():
    needs_real_services("a task the queue refuses", broker=True)
    return example_cluster("slurm-testbed")


def test_an_overhead_run_the_queue_would_not_take_fails_at_once(
    cluster, django_capture_on_commit_callbacks
):
    start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    with _nobody_at_the_broker(), django_capture_on_commit_callbacks(execute=True):
        run = overhead_run_start(cluster=cluster, start=start, end=end, step="hour")
    run.refresh_from_db()
    assert run.status == OverheadRun.Status.FAILED
    assert run.finished_at is not None
    assert run.error.startswith("not computed: it could not be handed to a worker: the task")


def test_a_cost_model_whose_repricing_was_not_sent_says_so_and_can_ask_again(
    cluster, client, django_capture_on_commit_callbacks
):
    text = (ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text()
    client.force_login(UserFactory.create(is_staff=True))
    with _nobody_at_the_broker(), django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("accounting:cost-models", args=[cluster.name]),
            {"text": text, "name": "v1", "action": "save"},
            follow=True,
        )
    assert response.status_code == 200
    version = CostModelVersion.objects.get()
    assert version.reprice_error.startswith("the jobs that ended since it took effect were not")
    # (Here the send is tried when the test's block ends, after the answer; in production it
    # is tried at the service's commit, and the answer's message says it too.)
    page = client.get(reverse("accounting:cost-models", args=[cluster.name])).content.decode()
    assert "Not priced again: the jobs that ended since it took effect were not priced" in page
    assert "Price those jobs again" in page

    # Asked again while the queue is still down: the reason stays.
    with _nobody_at_the_broker(), django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("accounting:cost-models", args=[cluster.name]),
            {"action": "reprice", "version": version.pk},
        )
    version.refresh_from_db()
    assert version.reprice_error

    # Asked again once the queue answers: sent, and the page no longer says it.
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("accounting:cost-models", args=[cluster.name]),
            {"action": "reprice", "version": version.pk},
            follow=True,
        )
    version.refresh_from_db()
    assert version.reprice_error == ""
    assert "are being priced again" in response.content.decode()


def test_only_staff_ask_for_a_cost_model_to_price_again(cluster, client):
    version = cost_model_version_create(
        cluster=cluster,
        name="v1",
        text=(ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text(),
    )
    CostModelVersion.objects.filter(pk=version.pk).update(reprice_error="not sent")
    url = reverse("accounting:cost-models", args=[cluster.name])
    # Staff pages are not found for others (docs/access.md), whatever is asked.
    client.force_login(UserFactory.create())
    assert client.post(url, {"action": "reprice", "version": version.pk}).status_code == 404
    assert client.post(url, {"action": "reprice", "version": "x"}).status_code == 404
    client.logout()
    assert client.post(url, {"action": "reprice", "version": version.pk}).status_code == 302
    client.force_login(UserFactory.create(is_staff=True))
    assert client.post(url, {"action": "reprice", "version": "x"}).status_code == 404
    assert client.post(url, {"action": "reprice", "version": "99999"}).status_code == 404
    version.refresh_from_db()
    assert version.reprice_error == "not sent"


def test_slurm_limits_that_could_not_be_set_again_show_on_the_slurm_page(
    cluster, client, django_capture_on_commit_callbacks
):
    pool = ResourcePoolFactory.create(cluster=cluster, partitions=["work"])
    pool.slurm_limits_auto = True
    pool.save(update_fields=["slurm_limits_auto"])
    staff = UserFactory.create(is_staff=True)
    with _nobody_at_the_broker(), django_capture_on_commit_callbacks(execute=True):
        allocation_grant(
            project=ProjectFactory.create(),
            pool=pool,
            amount=Decimal(1000),
            period_start=date(2026, 1, 1),
            period_end=date(2026, 12, 31),
            actor=staff,
        )
    request = SlurmSyncRequest.objects.get()
    assert (request.kind, request.outcome) == ("limits", "failed")
    client.force_login(staff)
    page = client.get(reverse("allocations:slurm-sync")).content.decode()
    assert "The limits update failed: Slurm&#x27;s limits were not set again" in page


def test_a_decision_whose_slurm_plan_could_not_be_sent_stands_and_the_slurm_page_says_so(
    centre, client, django_capture_on_commit_callbacks
):
    needs_real_services("a task the queue refuses", broker=True)
    requester = UserFactory.create(username="nina")
    with django_capture_on_commit_callbacks(execute=False):
        request = _ask(centre, requester)
    with _nobody_at_the_broker(), django_capture_on_commit_callbacks(execute=True):
        project_request_approve(request=request, actor=centre.staff)
    request.refresh_from_db()
    assert request.state == ProjectRequest.State.APPROVED
    failed = SlurmSyncRequest.objects.get()
    assert (failed.kind, failed.outcome) == ("plan", "failed")
    client.force_login(centre.staff)
    page = client.get(reverse("allocations:slurm-sync")).content.decode()
    assert (
        "The plan failed: the plan this decision asks for could not be handed to a worker" in page
    )

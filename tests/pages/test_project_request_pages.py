"""The project request pages: where a person with no project finds the way to ask, the form's
errors on their fields with what was typed kept, the named PI's answer, the approvers' queue
and decisions, and the requester's edit and resubmission."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from allocations.models import ProjectRequest
from allocations.project_requests.services import project_request_create
from tests.allocations.conftest import centre  # noqa: F401 (pytest fixture)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
State = ProjectRequest.State
NEW = "/allocations/project-requests/new/"


def _client(user):
    client = Client()
    client.force_login(user)
    return client


def _form(centre, **changes):  # noqa: F811
    data = {
        "title": "Coral reef models", "abstract": "Reef growth.", "field_of_science": "Marine",
        "pi": "", f"pool_{centre.cpu.pk}": "50000", f"pool_{centre.gpu.pk}": "",
        "estimate_partition": "",
    }  # fmt: skip
    return {**data, **changes}


def _ask(centre, requester, pi=""):  # noqa: F811
    return project_request_create(
        requester=requester, title="Coral reef models", abstract="Reef growth.",
        field_of_science="Marine", pi=pi, amounts={"testbed CPU": "50000"},
    )  # fmt: skip


def test_a_person_without_a_project_is_offered_to_ask_for_one(centre):  # noqa: F811
    nina = _client(UserFactory(username="nina"))
    dashboard = nina.get("/").content.decode()
    assert "not a member of any project" in dashboard
    assert NEW in dashboard
    rounds = nina.get("/allocations/rounds/").content.decode()
    assert NEW in rounds
    assert "links above" not in rounds  # there are none for her
    assert "links above" in _client(centre.alice).get("/allocations/rounds/").content.decode()


def test_the_dashboard_of_a_person_without_a_project_shows_her_request_under_way(
    centre,  # noqa: F811
):
    nina = UserFactory(username="nina")
    asked = _ask(centre, nina)
    dashboard = _client(nina).get("/").content.decode()
    link = f"/allocations/project-requests/{asked.pk}/"
    assert f'<a href="{link}">Coral reef models</a>: waiting for a decision.' in dashboard
    ProjectRequest.objects.filter(pk=asked.pk).update(state=State.REJECTED)
    assert link not in _client(nina).get("/").content.decode()  # decided: no longer under way


def test_a_wrong_amount_and_an_unknown_pi_are_shown_on_their_fields_and_keep_the_rest(
    centre,  # noqa: F811
):
    nina = _client(UserFactory(username="nina"))
    response = nina.post(
        NEW, _form(centre, **{f"pool_{centre.cpu.pk}": "lots", "pi": "ghost@example.org"})
    )
    assert response.status_code == 200
    form = response.context["form"]
    assert "number" in form.errors[f"pool_{centre.cpu.pk}"][0]
    assert "signed in to the portal yet" in form.errors["pi"][0]
    page = response.content.decode()
    assert 'value="Coral reef models"' in page
    assert 'value="lots"' in page
    assert not ProjectRequest.objects.exists()
    # An estimate line needs its jobs, nodes and hours.
    work = centre.cluster.partitions.get(name="work")
    response = nina.post(NEW, _form(centre, estimate_partition=str(work.pk)))
    assert "Needed for the estimate line." in response.context["form"].errors["estimate_jobs"]


def test_the_named_pi_confirms_on_the_page_and_the_request_reaches_the_queue(
    centre,  # noqa: F811
):
    nina_user = UserFactory(username="nina")
    nina = _client(nina_user)
    work = centre.cluster.partitions.get(name="work")
    created = nina.post(
        NEW, _form(centre, pi="bob", estimate_partition=str(work.pk), estimate_jobs="10",
                   estimate_nodes="1", estimate_hours="2"),
    )  # fmt: skip
    request = ProjectRequest.objects.get()
    assert created.url == f"/allocations/project-requests/{request.pk}/"
    assert request.state == State.AWAITING_PI
    assert request.estimates.count() == 1
    assert "Do you lead this project?" not in nina.get(created.url).content.decode()
    bob = _client(centre.bob)
    assert "Do you lead this project?" in bob.get(created.url).content.decode()
    staff = _client(centre.staff)
    assert "Project requests to decide (1)" not in staff.get("/").content.decode()  # not yet
    bob.post(f"{created.url}confirm/", {"answer": "confirm"})
    request.refresh_from_db()
    assert request.state == State.SUBMITTED
    dashboard = staff.get("/").content.decode()
    assert "Project requests to decide (1)" in dashboard
    assert "Coral reef models" in staff.get("/allocations/project-requests/queue/").content.decode()
    assert _client(centre.carol).get("/allocations/project-requests/queue/").status_code == 404
    assert _client(centre.carol).get(created.url).status_code == 404


def test_staff_reject_only_with_a_reason_ask_for_changes_and_approve_the_resubmission(
    centre,  # noqa: F811
):
    nina_user = UserFactory(username="nina")
    request = _ask(centre, nina_user)
    url = f"/allocations/project-requests/{request.pk}/"
    staff = _client(centre.staff)
    refused = staff.post(f"{url}decide/", {"decision": "reject", "reason": " "})
    assert refused.status_code == 200
    assert "Say why you reject it." in refused.context["decision_form"].errors["reason"]
    wrong = staff.post(
        f"{url}decide/", {"decision": "approve", "code": "pawsey0001", f"pool_{centre.cpu.pk}": "x"}
    )
    assert "number" in wrong.context["decision_form"].errors[f"pool_{centre.cpu.pk}"][0]
    request.refresh_from_db()
    assert request.state == State.SUBMITTED

    staff.post(f"{url}decide/", {"decision": "changes", "reason": "Less CPU, please."})
    request.refresh_from_db()
    assert request.state == State.CHANGES_REQUESTED
    nina = _client(nina_user)
    assert _client(centre.bob).get(f"{url}edit/").status_code == 404
    edit = nina.get(f"{url}edit/").content.decode()
    assert "Less CPU, please." in edit
    assert 'value="50000"' in edit
    nina.post(f"{url}edit/", _form(centre, **{f"pool_{centre.cpu.pk}": "30000"}))
    request.refresh_from_db()
    assert request.state == State.SUBMITTED

    taken = staff.post(
        f"{url}decide/",
        {"decision": "approve", "code": "pawsey0001", f"pool_{centre.cpu.pk}": "30000"},
    )
    assert "exists already" in taken.content.decode()
    done = staff.post(
        f"{url}decide/",
        {"decision": "approve", "code": "", "period_start": "2027-01-01",
         "period_end": "2028-01-01", f"pool_{centre.cpu.pk}": "30000"},
    )  # fmt: skip
    assert done.status_code == 302
    request.refresh_from_db()
    assert request.state == State.APPROVED
    assert request.project is not None
    assert request.project.code == "pawsey0005"
    assert nina.get(f"/allocations/projects/{request.project.code}/").status_code == 200


def test_members_of_the_approvers_group_get_the_queue(centre, settings):  # noqa: F811
    settings.PORTAL_PROJECT_APPROVERS_GROUP = "project-approvers"
    amy = UserFactory(username="amy")
    amy.groups.add(Group.objects.create(name="project-approvers"))
    _ask(centre, UserFactory(username="nina"))
    assert "Project requests to decide (1)" in _client(amy).get("/").content.decode()
    assert _client(amy).get("/allocations/project-requests/queue/").status_code == 200

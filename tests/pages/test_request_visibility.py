"""Who sees a request and its review form: the page and the API ask one access layer
(allocations/access.py), so they can never disagree about a draft or a conflict of interest.

Both tests failed before the access layer: the request page let a committee member read
another project's draft (the API answered 404), and the review page rendered its form for a
request of the reviewer's own project (saving was refused)."""

from __future__ import annotations

from allocations.models import AllocationRequest
from allocations.rounds.services import request_create
from projects.models import Membership
from tests.pages.conftest import client_for

SECRET = "our unpublished method, in confidence"


def test_a_committee_member_cannot_read_another_projects_draft_on_the_page_or_the_api(site):
    other = site.projects["pawsey0004"]
    draft = request_create(round_=site.round, project=other, actor=other.pi, justification=SECRET)
    assert draft.state == AllocationRequest.State.DRAFT
    committee = client_for(site.users["committee"])

    page = committee.get(f"/allocations/requests/{draft.pk}/")
    api = committee.get(f"/api/v1/requests/{draft.pk}/")

    assert page.status_code == 404
    assert SECRET not in page.content.decode()
    assert api.status_code == 404
    # The project's own PI still reads it, on both.
    pi = client_for(other.pi)
    assert pi.get(f"/allocations/requests/{draft.pk}/").status_code == 200
    assert pi.get(f"/api/v1/requests/{draft.pk}/").json()["justification"] == SECRET


def test_the_review_form_is_not_shown_for_a_request_of_the_reviewers_own_project(site):
    reviewer = site.users["committee"]
    Membership.objects.create(project=site.request.project, user=reviewer)
    client = client_for(reviewer)

    review_page = client.get(f"/allocations/requests/{site.request.pk}/review/")
    detail = client.get(f"/allocations/requests/{site.request.pk}/")
    round_page = client.get(f"/allocations/rounds/{site.round.pk}/")

    assert review_page.status_code == 403
    assert b'name="score"' not in review_page.content
    assert detail.context["can_review"] is False
    assert f"/allocations/requests/{site.request.pk}/review/" not in round_page.content.decode()
    assert "not yours to review" in round_page.content.decode()

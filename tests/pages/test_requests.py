"""PI, committee and chair pages driven end to end through plain HTML forms (no JavaScript),
with CSRF enforced."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from allocations.models import Allocation, AllocationRequest, Review
from allocations.rounds.services import request_decide
from tests.form_reader import FormReader
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def _csrf_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _token(client: Client, url: str) -> str:
    client.get(url)
    return client.cookies["csrftoken"].value


def test_a_post_without_the_csrf_token_is_refused(site):
    client = _csrf_client(site.users["pi"])
    url = reverse("allocations:request-submit", args=[site.request.pk])
    assert client.post(url).status_code == 403


def test_a_pi_applies_estimates_and_submits_through_the_forms(site):
    project = site.projects["pawsey0004"]  # bob's, no request in the round yet
    bob = _csrf_client(site.users["other"])
    new_url = reverse("allocations:request-new", args=[project.code])
    token = _token(bob, new_url)
    created = bob.post(
        new_url, {"round": site.round.pk, "justification": "Cathode screening.",
                  "csrfmiddlewaretoken": token},
    )  # fmt: skip
    request = AllocationRequest.objects.get(project=project, round=site.round)
    assert created["Location"] == reverse("allocations:request-detail", args=[request.pk])
    detail = bob.get(created["Location"]).content.decode()
    assert "Edit the draft" in detail
    assert "Add an estimate line" in detail

    work = site.cluster.partitions.get(name="work")
    bob.post(
        reverse("allocations:request-estimate", args=[request.pk]),
        {"partition": work.pk, "jobs": 10, "nodes": 1, "hours": "2", "description": "screening",
         "csrfmiddlewaretoken": token},
    )  # fmt: skip
    line = request.estimates.get()
    assert line.service_units == Decimal(10 * 2 * 128)  # 10 whole work nodes for 2 h
    bob.post(
        reverse("allocations:request-edit", args=[request.pk]),
        {f"pool_{site.cpu.pk}": "2560", f"pool_{site.gpu.pk}": "0",
         "justification": "Cathode screening, 10 runs.", "csrfmiddlewaretoken": token},
    )  # fmt: skip
    request.refresh_from_db()
    assert request.justification == "Cathode screening, 10 runs."
    bob.post(
        reverse("allocations:request-submit", args=[request.pk]), {"csrfmiddlewaretoken": token}
    )
    request.refresh_from_db()
    assert request.state == AllocationRequest.State.SUBMITTED
    assert (
        "Edit the draft"
        not in bob.get(reverse("allocations:request-detail", args=[request.pk])).content.decode()
    )


def test_a_member_cannot_submit_the_pis_request_and_is_told_why(site):
    client = client_for(site.users["member"])
    url = reverse("allocations:request-submit", args=[site.request.pk])
    response = client.post(url, follow=True)
    assert "only the PI of pawsey0003 edits its request" in response.content.decode()
    site.request.refresh_from_db()
    assert site.request.state == AllocationRequest.State.UNDER_REVIEW


def test_the_committee_reviews_and_the_chair_grants(site):
    reviewer = client_for(site.users["committee"])
    review_url = reverse("allocations:request-review", args=[site.request.pk])
    saved = reviewer.post(review_url, {"score": "5", "comment": "Excellent."})
    assert saved.status_code == 302
    assert Review.objects.get(request=site.request).score == 5

    chair = client_for(site.users["chair"])
    grant_url = reverse("allocations:request-grant", args=[site.request.pk])
    refused = chair.post(grant_url, {f"pool_{site.cpu.pk}": "1000", f"pool_{site.gpu.pk}": "0"})
    assert refused.status_code == 200
    assert "say why the grant differs from the request" in refused.content.decode()
    granted = chair.post(
        grant_url,
        {
            f"pool_{site.cpu.pk}": "80000",
            f"pool_{site.gpu.pk}": "50000",
            "reason": "GPU pool is full",
        },
    )
    assert granted.status_code == 302
    site.request.refresh_from_db()
    assert site.request.state == AllocationRequest.State.PARTIALLY_GRANTED
    assert Allocation.objects.filter(request=site.request).count() == 2


def test_a_score_out_of_range_is_refused_with_a_message(site):
    page = client_for(site.users["committee"]).post(
        reverse("allocations:request-review", args=[site.request.pk]), {"score": "9"}
    )
    assert page.status_code == 200
    assert "Select a valid choice." in page.content.decode()


def test_the_chair_opens_a_submitted_request_for_review(site):
    submitted = AllocationRequest.objects.get(project=site.projects["pawsey0002"], round=site.round)
    client_for(site.users["chair"]).post(
        reverse("allocations:request-start-review", args=[submitted.pk])
    )
    submitted.refresh_from_db()
    assert submitted.state == AllocationRequest.State.UNDER_REVIEW


def test_the_history_names_states_in_words_not_their_codes(site):
    submitted = AllocationRequest.objects.get(project=site.projects["pawsey0002"], round=site.round)
    chair = client_for(site.users["chair"])
    chair.post(reverse("allocations:request-start-review", args=[submitted.pk]))
    page = chair.get(reverse("allocations:request-detail", args=[submitted.pk])).content.decode()
    assert "<strong>Under review</strong>" in page
    assert "Under_review" not in page


def test_the_estimate_fills_the_amount_and_a_request_far_from_it_is_warned_about(site):
    project = site.projects["pawsey0004"]
    bob = _csrf_client(site.users["other"])
    new_url = reverse("allocations:request-new", args=[project.code])
    token = _token(bob, new_url)
    bob.post(new_url, {"round": site.round.pk, "justification": "x", "csrfmiddlewaretoken": token})
    request = AllocationRequest.objects.get(project=project, round=site.round)
    work = site.cluster.partitions.get(name="work")
    bob.post(
        reverse("allocations:request-estimate", args=[request.pk]),
        {"partition": work.pk, "jobs": 10, "nodes": 1, "hours": "2", "csrfmiddlewaretoken": token},
    )  # fmt: skip
    detail = bob.get(reverse("allocations:request-detail", args=[request.pk]))
    form = detail.context["amounts_form"]
    assert form.initial[f"pool_{site.cpu.pk}"] == "2560"  # the estimate's total, not 0
    assert detail.context["estimate_warnings"] == []
    bob.post(
        reverse("allocations:request-edit", args=[request.pk]),
        {f"pool_{site.cpu.pk}": "100000", f"pool_{site.gpu.pk}": "0", "justification": "x",
         "csrfmiddlewaretoken": token},
    )  # fmt: skip
    page = bob.get(reverse("allocations:request-detail", args=[request.pk])).content.decode()
    assert "100,000 SU asked for is 39.1 times the estimate (2,560 SU)" in page


def test_the_estimate_tolerance_is_a_factor_of_two_either_way():
    from allocations.grants.budget import estimate_mismatch

    assert estimate_mismatch(requested_su=Decimal(200), estimated_su=Decimal(100)) is None
    assert estimate_mismatch(requested_su=Decimal(50), estimated_su=Decimal(100)) is None
    assert estimate_mismatch(requested_su=Decimal(201), estimated_su=Decimal(100)) == Decimal(
        "2.01"
    )
    assert estimate_mismatch(requested_su=Decimal(49), estimated_su=Decimal(100)) == Decimal("0.49")
    assert estimate_mismatch(requested_su=Decimal(0), estimated_su=Decimal(100)) is None


def test_the_grant_form_shows_what_the_round_has_left_and_the_justification(site):
    page = client_for(site.users["chair"]).get(
        reverse("allocations:request-grant", args=[site.request.pk])
    )
    content = page.content.decode()
    assert 'id="round-capacity"' in content
    capacity = {item.pool.name: item for item in page.context["capacity"]}
    for item in capacity.values():
        assert item.left_su == item.available_su - item.granted_su
        assert f"{item.left_su:,.0f}" in content
    assert site.request.justification.splitlines()[0][:30] in content


def test_the_rounds_page_offers_a_pi_to_apply_for_each_project_they_lead(site):
    bob = client_for(site.users["other"])  # leads pawsey0004, no application in the round yet
    project = site.projects["pawsey0004"]
    apply = reverse("allocations:request-new", args=[project.code])
    assert (
        f'href="{apply}?round={site.round.pk}"'
        in bob.get(reverse("allocations:round-list")).content.decode()
    )
    form = bob.get(f"{apply}?round={site.round.pk}").context["form"]
    assert form.initial["round"] == site.round
    member_page = client_for(site.users["committee"]).get(reverse("allocations:round-list"))
    assert '<div class="small">Apply for' not in member_page.content.decode()


def test_a_project_that_applied_in_a_round_is_not_offered_it_again(site):
    """Carol's pawsey0003 has its application in the round (under review): the rounds page
    links it instead of offering to apply, and the new request form offers no round at all,
    before anything is typed (issue 31, item 8)."""
    carol = client_for(site.users["pi"])
    apply = reverse("allocations:request-new", args=[site.project.code])

    page = carol.get(reverse("allocations:round-list")).content.decode()

    assert f'href="{apply}?round={site.round.pk}"' not in page
    detail = reverse("allocations:request-detail", args=[site.request.pk])
    assert f'{site.project.code}: <a href="{detail}">application under review</a>' in page
    response = carol.get(f"{apply}?round={site.round.pk}")
    assert site.round not in response.context["form"].fields["round"].queryset
    new_page = response.content.decode()
    assert f"{site.project.code} has applied in {site.round.name} already" in new_page
    assert 'id="no-open-round"' in new_page
    assert "Save draft" not in new_page  # nothing to type that could only be refused


def test_a_decided_application_is_not_offered_again_either(site):
    """Once the chair has decided carol's application, the rounds page still links it rather
    than offering "Apply for" pawsey0003 in that round (issue 31, item 8)."""
    request_decide(
        request=site.request, actor=site.users["chair"], reason="the pools are full",
        granted={site.cpu: Decimal(0), site.gpu: Decimal(0)},
    )  # fmt: skip
    apply = reverse("allocations:request-new", args=[site.project.code])

    page = client_for(site.users["pi"]).get(reverse("allocations:round-list")).content.decode()

    assert f'href="{apply}?round={site.round.pk}"' not in page
    detail = reverse("allocations:request-detail", args=[site.request.pk])
    assert f'{site.project.code}: <a href="{detail}">application rejected</a>' in page


def test_the_request_page_says_what_happens_next_and_who_does_it(site):
    submitted = AllocationRequest.objects.get(project=site.projects["pawsey0002"], round=site.round)
    chair = client_for(site.users["chair"])
    url = reverse("allocations:request-detail", args=[submitted.pk])
    chair_name = site.users["chair"].get_username()
    assert f"chair ({chair_name}) opens it for review" in chair.get(url).content.decode()
    chair.post(reverse("allocations:request-start-review", args=[submitted.pk]))
    page = chair.get(url).content.decode()
    assert "Next: the committee scores it (0 of" in page


def test_submit_takes_the_figures_the_page_shows_even_unsaved(site):
    """The estimate fills the SU field; the PI presses Submit without Save: what was shown
    is what is submitted (issue 31, item 8)."""
    project = site.projects["pawsey0004"]
    bob = _csrf_client(site.users["other"])
    new_url = reverse("allocations:request-new", args=[project.code])
    token = _token(bob, new_url)
    bob.post(new_url, {"round": site.round.pk, "justification": "x", "csrfmiddlewaretoken": token})
    request = AllocationRequest.objects.get(project=project, round=site.round)
    work = site.cluster.partitions.get(name="work")
    bob.post(
        reverse("allocations:request-estimate", args=[request.pk]),
        {"partition": work.pk, "jobs": 10, "nodes": 1, "hours": "2", "csrfmiddlewaretoken": token},
    )  # fmt: skip
    assert not request.amounts.filter(requested_su__gt=0).exists()  # nothing saved yet
    page = bob.get(reverse("allocations:request-detail", args=[request.pk])).content.decode()
    assert "the field shows it, not saved yet" in page

    reader = FormReader("request-submit")
    reader.feed(page)
    action, fields = reader.press()
    assert fields[f"pool_{site.cpu.pk}"] == "2560"
    fields["justification"] = "Cathode screening, typed and not saved."
    response = bob.post(action, fields, follow=True)

    request.refresh_from_db()
    assert "a request must ask for some SU" not in response.content.decode()
    assert request.state == AllocationRequest.State.SUBMITTED
    assert request.amounts.get(pool=site.cpu).requested_su == Decimal(2560)
    assert request.justification == "Cathode screening, typed and not saved."


def test_a_refused_submission_keeps_what_was_typed(site):
    project = site.projects["pawsey0004"]
    bob = _csrf_client(site.users["other"])
    new_url = reverse("allocations:request-new", args=[project.code])
    token = _token(bob, new_url)
    bob.post(new_url, {"round": site.round.pk, "justification": "x", "csrfmiddlewaretoken": token})
    request = AllocationRequest.objects.get(project=project, round=site.round)
    page = bob.get(reverse("allocations:request-detail", args=[request.pk])).content.decode()
    reader = FormReader("request-submit")
    reader.feed(page)
    action, fields = reader.press()
    fields["justification"] = "Typed, no SU yet."

    response = bob.post(action, fields, follow=True)

    assert "a request must ask for some SU" in response.content.decode()
    request.refresh_from_db()
    assert request.state == AllocationRequest.State.DRAFT
    assert request.justification == "Typed, no SU yet."


def _draft_of_bob(site) -> tuple[Client, AllocationRequest, str]:
    """bob's pawsey0004 applies in the round: a draft with no SU, and bob's client on its page."""
    project = site.projects["pawsey0004"]
    bob = _csrf_client(site.users["other"])
    new_url = reverse("allocations:request-new", args=[project.code])
    token = _token(bob, new_url)
    bob.post(new_url, {"round": site.round.pk, "justification": "x", "csrfmiddlewaretoken": token})
    request = AllocationRequest.objects.get(project=project, round=site.round)
    return bob, request, reverse("allocations:request-detail", args=[request.pk])


def _type_an_estimate_line(reader: FormReader, site, *, jobs: str) -> None:
    reader.type("partition", str(site.cluster.partitions.get(name="work").pk))
    reader.type("jobs", jobs)
    reader.type("nodes", "1")
    reader.type("hours", "2")  # one whole work node (128 cores) for 2 h: 256 SU a job


def test_adding_an_estimate_line_keeps_the_su_and_justification_typed_and_not_saved(site):
    """The PI types SU and a justification, does not press Save, and adds an estimate line:
    the line is added and what was typed is kept (issue 31, item 8)."""
    bob, request, url = _draft_of_bob(site)
    reader = FormReader(label="Add to the estimate")
    reader.feed(bob.get(url).content.decode())
    reader.type(f"pool_{site.cpu.pk}", "3000")
    reader.type("justification", "Cathode screening, typed and not saved.")
    _type_an_estimate_line(reader, site, jobs="10")
    action, fields = reader.press()

    response = bob.post(action, fields, follow=True)

    assert response.redirect_chain == [(url, 302)]
    assert request.estimates.get().service_units == Decimal(2560)
    request.refresh_from_db()
    assert request.amounts.get(pool=site.cpu).requested_su == Decimal(3000)
    assert request.justification == "Cathode screening, typed and not saved."
    shown = response.context["amounts_form"]
    assert shown[f"pool_{site.cpu.pk}"].value() == "3000"
    assert "Cathode screening, typed and not saved." in response.content.decode()


def test_a_field_still_showing_the_estimate_keeps_following_it_as_lines_are_added(site):
    """A pool's field filled from the estimate and left as it was is not saved by adding a
    line: it shows the new total, as it did before the button sent the draft's fields."""
    bob, request, url = _draft_of_bob(site)
    reader = FormReader(label="Add to the estimate")
    reader.feed(bob.get(url).content.decode())
    _type_an_estimate_line(reader, site, jobs="10")
    bob.post(*reader.press())
    reader = FormReader(label="Add to the estimate")
    reader.feed(bob.get(url).content.decode())
    assert reader.fields["request-edit"][f"pool_{site.cpu.pk}"] == "2560"  # filled, not saved
    _type_an_estimate_line(reader, site, jobs="5")

    response = bob.post(*reader.press(), follow=True)

    assert request.estimates.count() == 2
    assert not request.amounts.filter(requested_su__gt=0).exists()
    assert response.context["amounts_form"][f"pool_{site.cpu.pk}"].value() == "3840"


def test_an_invalid_draft_field_keeps_the_estimate_line_and_everything_typed(site):
    """SU the draft cannot take: neither the draft nor the line is saved, and the page comes
    back with the error on the field, the line as typed and the justification as typed."""
    bob, request, url = _draft_of_bob(site)
    reader = FormReader(label="Add to the estimate")
    reader.feed(bob.get(url).content.decode())
    reader.type(f"pool_{site.cpu.pk}", "-5")
    reader.type("justification", "Typed before the mistake.")
    _type_an_estimate_line(reader, site, jobs="17")
    reader.type("description", "screening runs")

    response = bob.post(*reader.press())

    assert response.status_code == 200
    page = response.content.decode()
    assert "The estimate line was not added" in page
    assert "Ensure this value is greater than or equal to 0." in page
    assert response.context["amounts_form"][f"pool_{site.cpu.pk}"].value() == "-5"
    assert "Typed before the mistake." in page
    estimate = response.context["estimate_form"]
    assert (estimate["jobs"].value(), estimate["description"].value()) == ("17", "screening runs")
    assert not request.estimates.exists()
    request.refresh_from_db()
    assert request.justification == "x"


def test_an_invalid_estimate_line_keeps_the_draft_typed(site):
    bob, request, url = _draft_of_bob(site)
    reader = FormReader(label="Add to the estimate")
    reader.feed(bob.get(url).content.decode())
    reader.type(f"pool_{site.cpu.pk}", "3000")
    _type_an_estimate_line(reader, site, jobs="0")

    response = bob.post(*reader.press())

    assert response.status_code == 200
    assert "The estimate line was not added" in response.content.decode()
    assert response.context["amounts_form"][f"pool_{site.cpu.pk}"].value() == "3000"
    assert response.context["estimate_form"].errors["jobs"]
    assert not request.estimates.exists()


def test_a_refused_save_keeps_what_was_typed(site):
    bob, request, url = _draft_of_bob(site)
    reader = FormReader(label="Save")
    reader.feed(bob.get(url).content.decode())
    reader.type(f"pool_{site.cpu.pk}", "-5")
    reader.type("justification", "Typed, then Save.")

    response = bob.post(*reader.press())

    assert response.status_code == 200
    assert "Typed, then Save." in response.content.decode()
    assert response.context["amounts_form"][f"pool_{site.cpu.pk}"].value() == "-5"
    request.refresh_from_db()
    assert request.justification == "x"


def test_another_person_posting_the_draft_and_a_line_is_refused_before_either_is_read(site):
    """Who asks is checked first: a member's post, valid or not, is forbidden, and nothing of
    it is echoed back."""
    member = client_for(site.users["member"])
    url = reverse("allocations:request-estimate", args=[site.request.pk])
    response = member.post(url, {f"pool_{site.cpu.pk}": "-5", "justification": "sneaky"})
    assert response.status_code == 403
    assert "sneaky" not in response.content.decode()


def test_save_keeps_an_estimate_line_typed_and_not_added(site):
    """Enter in one of the line's fields presses the draft form's first button, Save: the
    draft is saved, and the line comes back as typed, not added, with a word saying so."""
    bob, request, url = _draft_of_bob(site)
    reader = FormReader(label="Save")
    reader.feed(bob.get(url).content.decode())
    reader.type(f"pool_{site.cpu.pk}", "3000")
    _type_an_estimate_line(reader, site, jobs="17")
    reader.type("description", "screening runs")

    response = bob.post(*reader.press(), follow=True)

    request.refresh_from_db()
    assert request.amounts.get(pool=site.cpu).requested_su == Decimal(3000)
    assert not request.estimates.exists()
    page = response.content.decode()
    assert "Request saved." in page
    assert "The estimate line typed below is not added yet" in page
    estimate = response.context["estimate_form"]
    assert (estimate["jobs"].value(), estimate["hours"].value()) == ("17", "2")
    assert estimate["description"].value() == "screening runs"


def test_save_with_the_line_left_as_it_was_says_nothing_of_it(site):
    bob, request, url = _draft_of_bob(site)
    reader = FormReader(label="Save")
    reader.feed(bob.get(url).content.decode())
    reader.type(f"pool_{site.cpu.pk}", "3000")

    response = bob.post(*reader.press(), follow=True)

    assert response.redirect_chain == [(url, 302)]
    assert "not added yet" not in response.content.decode()
    assert request.amounts.get(pool=site.cpu).requested_su == Decimal(3000)

"""Progress reports at renewal (docs/allocations.md, "Progress reports"): a round may require
one with every renewal; the renewal is not submitted without it; it links only the project's
own research outputs; it is read wherever the request is read; it is written on the request's
page and through the API, and never after submission."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounting.clusters.quotes import QuoteRequest
from accounting.models import Partition
from allocations import request_states
from allocations.grants.selectors import pool_today
from allocations.grants.services import AllocationError
from allocations.models import (
    Allocation,
    AllocationRequest,
    AllocationRound,
    ProgressReport,
    ResearchOutput,
)
from allocations.rounds.selectors import progress_report_of
from allocations.rounds.services import (
    progress_report_set,
    request_create,
    request_decide,
    request_review_start,
    request_save_and_estimate,
    request_submit,
    request_update,
    round_create,
    round_update,
)
from kit.calendar import add_months
from projects.models import Membership, Project
from tests.allocations.conftest import Centre
from tests.factories import MembershipFactory, UserFactory
from tests.form_reader import FormReader

pytestmark = pytest.mark.django_db
Kind = AllocationRequest.Kind
State = AllocationRequest.State


@dataclass
class Renewal:
    centre: Centre
    next_round: AllocationRound  # requires progress reports; reviewer chairs it
    renewal: AllocationRequest  # pawsey0001's draft renewal in next_round
    manager: User  # dave, manager of pawsey0001
    ours: list[ResearchOutput]  # pawsey0001's outputs
    theirs: ResearchOutput  # pawsey0002's


def _output(project: Project, title: str, by: User) -> ResearchOutput:
    return ResearchOutput.objects.create(
        project=project, kind=ResearchOutput.Kind.PUBLICATION, title=title, year=2026,
        doi=f"10.1234/{title.lower().replace(' ', '-')}", added_by=by,
    )  # fmt: skip


def _rounds(centre: Centre, *, requires: bool) -> AllocationRound:
    """pawsey0001 granted in a first round, and the next round open for its renewal."""
    today = pool_today(centre.cpu)
    start = today.replace(day=1)
    now = timezone.now()
    first = round_create(
        name="this year", opens_at=now - timedelta(days=2), closes_at=now + timedelta(days=9),
        period_start=start, period_end=add_months(start, 12),
        available={centre.cpu: Decimal(10_000)}, chair=centre.chair, actor=centre.staff,
    )  # fmt: skip
    application = request_create(
        round_=first, project=centre.p1, actor=centre.alice, amounts={centre.cpu: Decimal(1000)}
    )
    request_submit(request=application, actor=centre.alice)
    request_review_start(request=application, actor=centre.chair)
    request_decide(request=application, actor=centre.chair, granted={centre.cpu: Decimal(1000)})
    end = Allocation.objects.get(request=application).period_end
    return round_create(
        name="next year", opens_at=now - timedelta(hours=1), closes_at=now + timedelta(days=30),
        period_start=end, period_end=add_months(end, 12),
        available={centre.cpu: Decimal(5000)}, chair=centre.reviewer, actor=centre.staff,
        requires_progress_report=requires,
    )  # fmt: skip


@pytest.fixture(name="world")
def world_fixture(centre) -> Renewal:
    next_round = _rounds(centre, requires=True)
    manager = UserFactory.create(username="dave")
    MembershipFactory(project=centre.p1, user=manager, role=Membership.Role.MANAGER)
    MembershipFactory(project=centre.p1, user=centre.carol)
    renewal = request_create(project=centre.p1, actor=centre.alice, kind=Kind.RENEWAL)
    assert renewal.round == next_round
    return Renewal(
        centre=centre, next_round=next_round, renewal=renewal, manager=manager,
        ours=[_output(centre.p1, "Ocean model", centre.alice),
              _output(centre.p1, "Ice sheets", centre.alice)],
        theirs=_output(centre.p2, "Genome atlas", centre.bob),
    )  # fmt: skip


def test_only_a_renewal_in_a_round_that_requires_reports_needs_one():
    assert request_states.needs_progress_report("renewal", True)
    assert not request_states.needs_progress_report("renewal", False)
    for kind in request_states.KINDS - {"renewal"}:
        assert not request_states.needs_progress_report(kind, True)


def test_a_renewal_without_its_report_is_not_submitted_and_the_message_says_what_is_missing(world):
    with pytest.raises(AllocationError, match="requires a progress report") as error:
        request_submit(request=world.renewal, actor=world.centre.alice)
    assert error.value.field == "progress_report"
    assert "next year" in str(error.value)
    world.renewal.refresh_from_db()
    assert world.renewal.state == State.DRAFT
    assert not world.renewal.transitions.filter(to_state=State.SUBMITTED).exists()


def test_a_renewal_with_its_report_is_submitted_and_the_report_keeps_its_outputs(world):
    report = progress_report_set(
        request=world.renewal, actor=world.manager, text="Two papers; the ocean model scaled.",
        output_ids=[output.pk for output in world.ours],
    )  # fmt: skip
    request_submit(request=world.renewal, actor=world.centre.alice)
    assert world.renewal.state == State.SUBMITTED
    read = progress_report_of(world.renewal)
    assert read is not None
    assert read.pk == report.pk
    assert {output.title for output in read.outputs.all()} == {"Ocean model", "Ice sheets"}
    assert read.updated_by == world.manager


def test_a_renewal_in_a_round_that_does_not_require_a_report_is_submitted_without_one(centre):
    _rounds(centre, requires=False)
    renewal = request_create(project=centre.p1, actor=centre.alice, kind=Kind.RENEWAL)
    request_submit(request=renewal, actor=centre.alice)
    assert renewal.state == State.SUBMITTED
    assert progress_report_of(renewal) is None


def test_an_application_in_a_round_that_requires_reports_needs_none_and_cannot_carry_one(world):
    centre = world.centre
    application = request_create(
        round_=world.next_round, project=centre.p2, actor=centre.bob,
        amounts={centre.cpu: Decimal(10)},
    )  # fmt: skip
    with pytest.raises(AllocationError, match="only a renewal carries a progress report"):
        progress_report_set(request=application, actor=centre.bob, text="anything")
    request_submit(request=application, actor=centre.bob)
    assert application.state == State.SUBMITTED


def test_another_projects_output_is_refused_and_nothing_is_written(world):
    progress_report_set(
        request=world.renewal, actor=world.centre.alice, text="first",
        output_ids=[world.ours[0].pk],
    )  # fmt: skip
    with pytest.raises(AllocationError, match="is not an output of pawsey0001") as error:
        progress_report_set(
            request=world.renewal, actor=world.centre.alice, text="second",
            output_ids=[world.ours[1].pk, world.theirs.pk],
        )  # fmt: skip
    assert error.value.field == "outputs"
    assert str(world.theirs.pk) in str(error.value)
    report = ProgressReport.objects.get(request=world.renewal)
    assert report.text == "first"
    assert [output.pk for output in report.outputs.all()] == [world.ours[0].pk]


def test_an_empty_report_is_refused(world):
    with pytest.raises(AllocationError, match="needs its text") as error:
        progress_report_set(request=world.renewal, actor=world.centre.alice, text="  \n ")
    assert error.value.field == "text"
    assert not ProgressReport.objects.filter(request=world.renewal).exists()


def test_only_whoever_manages_the_project_writes_it_and_never_after_submission(world):
    centre = world.centre
    for outsider in (centre.carol, centre.bob, centre.reviewer):
        with pytest.raises(PermissionDenied):
            progress_report_set(request=world.renewal, actor=outsider, text="mine")
    progress_report_set(request=world.renewal, actor=centre.alice, text="done")
    request_submit(request=world.renewal, actor=centre.alice)
    with pytest.raises(AllocationError, match="submitted request cannot be edited"):
        progress_report_set(request=world.renewal, actor=centre.alice, text="changed")
    assert ProgressReport.objects.get(request=world.renewal).text == "done"


def test_staff_make_a_round_require_reports_and_submission_follows_the_rule(world):
    centre = world.centre
    round_ = world.next_round
    round_update(
        round_=round_, actor=centre.staff, name=round_.name, opens_at=round_.opens_at,
        closes_at=round_.closes_at, period_start=round_.period_start,
        period_end=round_.period_end, requires_progress_report=False,
    )  # fmt: skip
    world.renewal.round.refresh_from_db()
    request_submit(request=world.renewal, actor=centre.alice)
    assert world.renewal.state == State.SUBMITTED


# --- Pages ----------------------------------------------------------------------------------


def _page(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_pi_writes_the_report_on_the_request_page_and_the_committee_reads_it(world):
    centre = world.centre
    url = f"/allocations/requests/{world.renewal.pk}/"
    page = _page(centre.alice).get(url).content.decode()
    assert "requires a progress report with every renewal" in page
    assert "Ocean model" in page  # a choice of the project's outputs
    assert "Genome atlas" not in page
    response = _page(centre.alice).post(
        f"{url}progress-report/",
        {"text": "We ran the ocean model at 4 km.", "outputs": [world.ours[0].pk]},
        follow=True,
    )
    assert "Progress report saved." in response.content.decode()
    # Another project's output is not a choice: the form refuses it and keeps the report.
    response = _page(centre.alice).post(
        f"{url}progress-report/", {"text": "x", "outputs": [world.theirs.pk]}, follow=True
    )
    assert "Select a valid choice" in response.content.decode()
    assert ProgressReport.objects.get(request=world.renewal).text.startswith("We ran")
    _page(centre.alice).post(f"{url}submit/")
    world.renewal.refresh_from_db()
    assert world.renewal.state == State.SUBMITTED
    for reader in (centre.reviewer, centre.carol, centre.staff):  # the chair, a member, staff
        page = _page(reader).get(url).content.decode()
        assert "We ran the ocean model at 4 km." in page
        assert "Ocean model (2026)" in page
        assert (
            'action="/allocations/requests/' + str(world.renewal.pk) + '/progress-report/"'
            not in page
        )
    # After submission the page's form is gone and a write is refused.
    response = _page(centre.alice).post(f"{url}progress-report/", {"text": "changed"}, follow=True)
    assert "cannot be edited" in response.content.decode()
    assert _page(centre.carol).post(f"{url}progress-report/", {"text": "x"}).status_code == 403
    assert _page(centre.bob).post(f"{url}progress-report/", {"text": "x"}).status_code == 404


def test_submitting_on_the_page_without_the_report_says_what_is_missing(world):
    url = f"/allocations/requests/{world.renewal.pk}/"
    response = _page(world.centre.alice).post(f"{url}submit/", follow=True)
    assert "requires a progress report with every renewal" in response.content.decode()
    world.renewal.refresh_from_db()
    assert world.renewal.state == State.DRAFT


def _typed_on_the_page(world: Renewal, button: str) -> tuple[str, dict[str, str]]:
    """alice types SU, a justification and the progress report on her renewal's page, saves
    none of them, and presses ``button``: what her browser posts."""
    reader = FormReader(label=button)
    reader.feed(
        _page(world.centre.alice).get(f"/allocations/requests/{world.renewal.pk}/").content.decode()
    )
    reader.type(f"pool_{world.centre.cpu.pk}", "1500")
    reader.type("justification", "Typed, not saved.")
    reader.type("text", "We ran the ocean model at 4 km.")
    return reader.press()


def test_saving_the_report_keeps_the_su_typed_and_not_saved(world):
    """The report's button sends the draft's form: the SU and justification typed and not
    saved are saved with the report, not lost (issue 31, item 8)."""
    response = _page(world.centre.alice).post(
        *_typed_on_the_page(world, "Add the report"), follow=True
    )

    assert "Progress report saved." in response.content.decode()
    assert ProgressReport.objects.get(request=world.renewal).text.startswith("We ran")
    world.renewal.refresh_from_db()
    assert world.renewal.amounts.get(pool=world.centre.cpu).requested_su == Decimal(1500)
    assert world.renewal.justification == "Typed, not saved."


def test_submit_takes_the_report_typed_and_not_saved(world):
    """The round requires a report; the PI types it and presses Submit without saving it:
    it is saved and the renewal submitted, not refused for a report the page shows."""
    _page(world.centre.alice).post(*_typed_on_the_page(world, "Submit to the committee"))

    world.renewal.refresh_from_db()
    assert world.renewal.state == State.SUBMITTED
    assert ProgressReport.objects.get(request=world.renewal).text.startswith("We ran")
    assert world.renewal.amounts.get(pool=world.centre.cpu).requested_su == Decimal(1500)


def test_save_and_add_to_the_estimate_keep_the_report_typed(world):
    action, fields = _typed_on_the_page(world, "Save")
    _page(world.centre.alice).post(action, fields)
    assert ProgressReport.objects.get(request=world.renewal).text.startswith("We ran")

    action, fields = _typed_on_the_page(world, "Add to the estimate")
    fields["text"] = "Written again, then a line added."
    _page(world.centre.alice).post(action, fields)
    assert world.renewal.estimates.count() == 1
    assert ProgressReport.objects.get(request=world.renewal).text.startswith("Written again")


def test_save_with_the_report_left_blank_saves_the_draft_and_no_report(world):
    action, fields = _typed_on_the_page(world, "Save")
    fields["text"] = ""

    response = _page(world.centre.alice).post(action, fields, follow=True)

    assert "Request saved." in response.content.decode()
    assert not ProgressReport.objects.filter(request=world.renewal).exists()
    world.renewal.refresh_from_db()
    assert world.renewal.justification == "Typed, not saved."


def test_an_invalid_su_keeps_the_report_typed_and_saves_nothing(world):
    action, fields = _typed_on_the_page(world, "Add the report")
    fields[f"pool_{world.centre.cpu.pk}"] = "-1"

    response = _page(world.centre.alice).post(action, fields)

    assert response.status_code == 200
    assert "We ran the ocean model at 4 km." in response.content.decode()
    assert not ProgressReport.objects.filter(request=world.renewal).exists()


def test_request_update_writes_the_report_again_only_when_it_changed(world):
    """Save sends the report with the draft every time: written again unchanged, it would
    name whoever pressed Save as its last writer."""
    centre = world.centre
    progress_report_set(request=world.renewal, actor=centre.alice, text="Ran it.", output_ids=[])
    request_update(
        request=world.renewal, actor=world.manager, justification="j", report_text="Ran it."
    )
    assert ProgressReport.objects.get(request=world.renewal).updated_by == centre.alice
    request_update(
        request=world.renewal, actor=world.manager, report_text="Ran it.",
        report_output_ids=[world.ours[0].pk],
    )  # fmt: skip
    report = ProgressReport.objects.get(request=world.renewal)
    assert (report.updated_by, list(report.outputs.all())) == (world.manager, [world.ours[0]])


def test_a_refused_estimate_line_leaves_the_draft_and_its_report_as_they_were(world):
    work = Partition.objects.get(cluster=world.centre.cluster, name="work")
    with pytest.raises(AllocationError, match="at least one job"):
        request_save_and_estimate(
            request=world.renewal, actor=world.centre.alice, justification="typed",
            amounts={world.centre.cpu: Decimal(1500)}, partition=work, jobs=0,
            quote=QuoteRequest(nodes=1, hours=Decimal(1)), report_text="typed too",
        )  # fmt: skip
    world.renewal.refresh_from_db()
    assert world.renewal.justification == ""
    assert world.renewal.amounts.get(pool=world.centre.cpu).requested_su == Decimal(1000)
    assert not ProgressReport.objects.filter(request=world.renewal).exists()


def test_staff_set_the_requirement_on_the_round_page(world):
    centre = world.centre
    round_ = world.next_round
    form = {
        "name": round_.name, "opens_at": round_.opens_at.strftime("%Y-%m-%dT%H:%M"),
        "closes_at": round_.closes_at.strftime("%Y-%m-%dT%H:%M"),
        "period_start": round_.period_start.isoformat(),
        "period_end": round_.period_end.isoformat(), f"pool_{centre.cpu.pk}": "5000",
    }  # fmt: skip
    url = f"/allocations/staff/rounds/{round_.pk}/"
    assert "Renewals carry a progress report" in _page(centre.staff).get(url).content.decode()
    assert _page(centre.staff).post(url, form).status_code == 302
    round_.refresh_from_db()
    assert round_.requires_progress_report is False  # the box left unticked
    assert (
        _page(centre.staff).post(url, {**form, "requires_progress_report": "on"}).status_code == 302
    )
    round_.refresh_from_db()
    assert round_.requires_progress_report is True


# --- API ------------------------------------------------------------------------------------


def _api(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_api_writes_the_report_refuses_another_projects_output_and_shows_it(world):
    centre = world.centre
    url = f"/api/v1/requests/{world.renewal.pk}/"
    refused = _api(centre.alice).post(f"{url}submit/")
    assert refused.status_code == 400
    assert "requires a progress report" in refused.json()["message"]
    bad = _api(centre.alice).put(
        f"{url}progress-report/", {"text": "x", "outputs": [world.theirs.pk]}, format="json"
    )
    assert bad.status_code == 400
    assert "is not an output of pawsey0001" in bad.json()["message"]
    assert not ProgressReport.objects.filter(request=world.renewal).exists()
    empty = _api(centre.alice).put(f"{url}progress-report/", {"text": ""}, format="json")
    assert empty.status_code == 400
    assert "text" in empty.json()["errors"]
    ids = sorted(output.pk for output in world.ours)
    written = _api(centre.alice).put(
        f"{url}progress-report/", {"text": "Results.", "outputs": ids}, format="json"
    )
    assert written.status_code == 200
    assert written.json()["progress_report"]["text"] == "Results."
    assert written.json()["progress_report"]["outputs"] == ids
    assert written.json()["progress_report"]["updated_by"] == "alice"
    assert _api(centre.alice).post(f"{url}submit/").status_code == 200
    # The committee reads it in the request.
    read = _api(centre.reviewer).get(url)
    assert read.status_code == 200
    assert read.json()["progress_report"]["text"] == "Results."
    # A member may read it but not write it; another project's PI does not see the request.
    member = _api(centre.carol).put(f"{url}progress-report/", {"text": "x"}, format="json")
    assert member.status_code == 403
    assert _api(centre.bob).put(f"{url}progress-report/", {}, format="json").status_code == 404


def test_the_api_creates_and_changes_rounds_with_the_requirement(world):
    centre = world.centre
    response = _api(centre.staff).patch(
        f"/api/v1/rounds/{world.next_round.pk}/", {"requires_progress_report": False},
        format="json",
    )  # fmt: skip
    assert response.status_code == 200
    assert response.json()["requires_progress_report"] is False
    world.next_round.refresh_from_db()
    assert world.next_round.requires_progress_report is False

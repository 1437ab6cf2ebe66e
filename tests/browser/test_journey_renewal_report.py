"""Journey in Chromium: a PI downloads the letter of a partial grant, then renews the grant in
a round that requires progress reports: submitting without the report is refused with what is
missing, and with the report (citing one of the project's outputs) it goes to the committee
(docs/allocations.md, "The committee's desk")."""

from __future__ import annotations

import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from pypdf import PdfReader

from allocations.models import Allocation, AllocationRequest, ProgressReport, ResearchOutput
from allocations.rounds.services import request_create, round_create
from kit.calendar import add_months
from tests.browser.test_journey_top_up import granted_project

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_pi_reads_the_letter_then_renews_with_a_progress_report(live_server, sign_in):
    granted = granted_project()
    alice = granted.users["alice"]
    decision_url = f"{live_server.url}/allocations/requests/{granted.application.pk}/"

    pi = sign_in("alice")
    pi.goto(decision_url)
    with pi.expect_download() as download:
        pi.get_by_role("link", name="Decision letter (PDF)").click()
    letter = download.value
    assert letter.suggested_filename == f"decision-pawsey0001-{granted.application.pk}.pdf"
    text = PdfReader(io.BytesIO(letter.path().read_bytes())).pages[0].extract_text()
    assert "the GPU pool is oversubscribed" in text
    assert "You may appeal this decision once" in text

    # The next round requires a progress report with every renewal.
    end = Allocation.objects.get(project=granted.project, pool=granted.cpu).period_end
    now = timezone.now()
    round_create(
        name="next round", opens_at=now - timedelta(hours=1), closes_at=now + timedelta(days=20),
        period_start=end, period_end=add_months(end, 12),
        available={granted.cpu: Decimal(10_000), granted.gpu: Decimal(1000)},
        chair=granted.users["dana"], actor=User.objects.get(username="ops"),
        requires_progress_report=True,
    )  # fmt: skip
    paper = ResearchOutput.objects.create(
        project=granted.project, kind=ResearchOutput.Kind.PUBLICATION, title="Ocean eddies",
        year=2026, added_by=alice,
    )  # fmt: skip
    renewal = request_create(project=granted.project, actor=alice, kind="renewal")
    pi.goto(f"{live_server.url}/allocations/requests/{renewal.pk}/")
    pi.get_by_role("button", name="Submit to the committee").click()
    refused = pi.get_by_text(re.compile("requires a progress report with every renewal: write it"))
    refused.wait_for()
    assert pi.locator("#request-state").inner_text() == "draft"

    pi.fill("#id_text", "The campaign ran 40 ensembles; the eddy paper came out of it.")
    pi.get_by_label("Ocean eddies").check()
    pi.get_by_role("button", name="Add the report").click()
    pi.get_by_text("Progress report saved.").wait_for()
    pi.get_by_role("button", name="Submit to the committee").click()
    pi.locator("#request-state", has_text="submitted").wait_for()
    assert "40 ensembles" in pi.locator("#progress-report-text").inner_text()
    assert "Ocean eddies" in pi.locator("#progress-report-outputs").inner_text()
    report = ProgressReport.objects.get(request=renewal)
    assert list(report.outputs.all()) == [paper]
    assert AllocationRequest.objects.get(pk=renewal.pk).state == "submitted"

    chair = sign_in("dana")  # the committee reads the report on the request's page
    chair.goto(f"{live_server.url}/allocations/requests/{renewal.pk}/")
    assert "40 ensembles" in chair.locator("#progress-report-text").inner_text()
    assert pi.errors == []
    assert chair.errors == []

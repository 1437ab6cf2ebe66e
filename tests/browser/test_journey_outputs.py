"""The journey "a PI records what the project gave back", in Chromium: petra adds a paper
(a malformed DOI is refused on its field first), uploads a .bib file whose bad entry is listed
with its reason, and max, a member, reads the list and downloads the BibTeX but has no link to
change anything (docs/allocations.md, "Research outputs")."""

from __future__ import annotations

import pytest

from allocations.models import ResearchOutput
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

BIB = b"""@article{good, title={Tides on {GPUs}}, author={Petra, P.}, year={2025},
  journal={Ocean Modelling}, doi={10.5555/tides}}
@article{bad, title={No DOI here}, doi={tides}}
"""


@pytest.fixture
def coastal(transactional_db):
    petra = UserFactory.create(username="petra")
    project = ProjectFactory.create(code="pawsey0009", title="Coastal models", pi=petra)
    MembershipFactory.create(project=project, user=UserFactory.create(username="max"))
    return project


def test_a_pi_adds_and_uploads_outputs_and_a_member_reads_them(
    coastal, live_server, sign_in, tmp_path
):
    project_page = f"{live_server.url}/allocations/projects/pawsey0009/"
    page = sign_in("petra")
    page.goto(project_page)
    page.locator("#outputs-card").get_by_role("link", name="Add →").click()
    page.wait_for_url("**/outputs/new/")
    page.fill("input[name=title]", "Coastal flooding at 10 m")
    page.fill("input[name=doi]", "10.12/short")
    page.get_by_role("button", name="Add the output").click()
    assert "is not a DOI" in page.locator(".errorlist").first.inner_text()
    page.fill("input[name=doi]", "https://doi.org/10.5555/FLOOD")
    page.get_by_role("button", name="Add the output").click()
    page.wait_for_url(project_page + "#outputs")
    card = page.locator("#outputs-card")
    assert "Coastal flooding at 10 m" in card.inner_text()
    paper = card.get_by_role("link", name="Coastal flooding at 10 m", exact=True)
    assert paper.get_attribute("href") == "https://doi.org/10.5555/flood"

    bib = tmp_path / "refs.bib"
    bib.write_bytes(BIB)
    card.get_by_role("link", name="Upload BibTeX →").click()
    page.wait_for_url("**/outputs/upload/")
    page.set_input_files("input[name=file]", str(bib))
    page.get_by_role("button", name="Upload").click()
    page.locator("#upload-result").wait_for()
    assert page.locator("#upload-result").inner_text() == "Added 1, left out 1"
    assert "is not a DOI" in page.locator("#left-out").inner_text()
    assert page.errors == []
    assert ResearchOutput.objects.filter(project=coastal).count() == 2

    member = sign_in("max")
    member.goto(project_page)
    outputs = member.locator("#outputs-card")
    assert "Tides on GPUs" in outputs.inner_text()
    assert outputs.get_by_role("link", name="Add →").count() == 0
    assert outputs.get_by_role("link", name="Change", exact=False).count() == 0
    with member.expect_download() as download:
        outputs.get_by_role("link", name="BibTeX").click()
    text = download.value.path().read_text()
    assert "10.5555/tides" in text
    assert "10.5555/flood" in text

"""Research outputs on the pages: who sees them and who changes them, a DOI refused with its
rule, a BibTeX upload with good and bad entries, a file that is not BibTeX, the exports."""

from __future__ import annotations

import csv
import io

import bibtexparser
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from allocations.models import ResearchOutput
from allocations.outputs.services import OutputDetails, output_add
from projects.models import Membership, Project
from tests.allocations.test_outputs import GOOD_AND_BAD
from tests.factories import MembershipFactory, UserFactory

PAGE = "/allocations/projects/pawsey0003/"
NEW = PAGE + "outputs/new/"
UPLOAD = PAGE + "outputs/upload/"


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def paper(centre) -> ResearchOutput:
    return output_add(
        project=centre.p3, actor=centre.alice,
        details=OutputDetails(kind="publication", title="Reefs at night", authors="Chen, L.",
                              year=2024, venue="J. Coral", doi="10.1234/reef"),
    )  # fmt: skip


def test_a_member_reads_the_outputs_and_the_export_links_but_no_edit_link(centre, paper):
    page = _as(centre.carol).get(PAGE).content.decode()
    assert 'id="outputs"' in page
    assert "Reefs at night" in page
    assert "https://doi.org/10.1234/reef" in page
    assert PAGE + "outputs/export.csv" in page
    assert PAGE + "outputs/export.bib" in page
    assert NEW not in page
    assert UPLOAD not in page
    assert f"outputs/{paper.pk}/edit/" not in page


def test_the_pi_sees_the_add_upload_and_change_links(centre, paper):
    page = _as(centre.alice).get(PAGE).content.decode()
    assert NEW in page
    assert UPLOAD in page
    assert f"outputs/{paper.pk}/edit/" in page


def test_someone_outside_the_project_gets_404_everywhere(centre, paper):
    bob = _as(centre.bob)
    for url in (NEW, UPLOAD, PAGE + "outputs/export.csv", PAGE + "outputs/export.bib",
                f"{PAGE}outputs/{paper.pk}/edit/"):  # fmt: skip
        assert bob.get(url).status_code == 404, url
    assert bob.post(f"{PAGE}outputs/{paper.pk}/delete/").status_code == 404
    assert ResearchOutput.objects.count() == 1


def test_a_member_may_not_add_change_or_delete_and_is_told_why(centre, paper):
    carol = _as(centre.carol)
    refused = carol.post(NEW, {"kind": "other", "title": "A talk"})
    assert refused.status_code == 403
    assert "only the PI or a manager of pawsey0003" in refused.content.decode()
    assert carol.post(f"{PAGE}outputs/{paper.pk}/delete/").status_code == 403
    assert (
        carol.post(UPLOAD, {"file": SimpleUploadedFile("a.bib", GOOD_AND_BAD)}).status_code == 403
    )
    assert list(ResearchOutput.objects.values_list("title", flat=True)) == ["Reefs at night"]


def test_the_pi_adds_a_publication_and_a_malformed_doi_is_refused_with_its_rule(centre):
    alice = _as(centre.alice)
    refused = alice.post(NEW, {"kind": "publication", "title": "P", "doi": "10.12/x"})
    assert refused.status_code == 200
    assert "is not a DOI: a DOI looks like 10.1234/abc" in refused.content.decode()
    assert not ResearchOutput.objects.exists()
    added = alice.post(
        NEW, {"kind": "publication", "title": "P", "doi": "https://doi.org/10.1234/P"}
    )
    assert added.status_code == 302
    assert ResearchOutput.objects.get().doi == "10.1234/p"


def test_a_duplicate_doi_is_refused_on_the_form(centre, paper):
    refused = _as(centre.alice).post(
        NEW, {"kind": "publication", "title": "Again", "doi": "doi:10.1234/REEF"}
    )
    assert (
        "DOI 10.1234/reef is already an output of pawsey0003: Reefs at night"
        in refused.content.decode()
    )
    assert ResearchOutput.objects.count() == 1


def test_a_manager_changes_and_deletes_an_output(centre, paper):
    manager = UserFactory(username="mara")
    MembershipFactory(project=centre.p3, user=manager, role=Membership.Role.MANAGER)
    mara = _as(manager)
    form = mara.get(f"{PAGE}outputs/{paper.pk}/edit/")
    assert "Reefs at night" in form.content.decode()
    changed = mara.post(
        f"{PAGE}outputs/{paper.pk}/edit/",
        {"kind": "publication", "title": "Reefs by day", "doi": "10.1234/reef", "year": "2025"},
    )
    assert changed.status_code == 302
    paper.refresh_from_db()
    assert (paper.title, paper.year, paper.added_by) == ("Reefs by day", 2025, centre.alice)
    assert mara.post(f"{PAGE}outputs/{paper.pk}/delete/").status_code == 302
    assert not ResearchOutput.objects.exists()


def test_an_upload_lists_the_entries_left_out_with_their_reasons_and_keeps_the_rest(centre):
    response = _as(centre.alice).post(
        UPLOAD, {"file": SimpleUploadedFile("refs.bib", GOOD_AND_BAD)}
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "Added 4, left out 3" in page
    for reason in ("it has no title", "is not a DOI", "does not parse"):
        assert reason in page
    assert ResearchOutput.objects.filter(project=centre.p3).count() == 4


def test_a_file_that_is_not_bibtex_is_refused_with_a_message_and_adds_nothing(centre):
    png = SimpleUploadedFile("photo.bib", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    response = _as(centre.alice).post(UPLOAD, {"file": png})
    assert "the file is binary, not BibTeX" in response.content.decode()
    notes = SimpleUploadedFile("notes.bib", b"some notes")
    response = _as(centre.alice).post(UPLOAD, {"file": notes})
    assert "holds no BibTeX entry" in response.content.decode()
    assert not ResearchOutput.objects.exists()


def test_an_archived_project_refuses_a_new_output_with_the_rule(centre):
    Project.objects.filter(pk=centre.p3.pk).update(status=Project.Status.ARCHIVED)
    response = _as(centre.alice).post(NEW, {"kind": "other", "title": "A talk"}, follow=True)
    assert "pawsey0003 is archived: it is read-only" in response.content.decode()
    assert not ResearchOutput.objects.exists()
    page = _as(centre.alice).get(PAGE).content.decode()
    assert NEW not in page  # no write action on an archived project


def test_a_member_downloads_the_csv_and_the_bibtex(centre, paper):
    carol = _as(centre.carol)
    csv_response = carol.get(PAGE + "outputs/export.csv")
    assert csv_response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(csv_response.content.decode())))
    assert [(row["title"], row["doi"], row["added_by"]) for row in rows] == [
        ("Reefs at night", "10.1234/reef", "alice")
    ]
    bib = carol.get(PAGE + "outputs/export.bib")
    assert "attachment" in bib["Content-Disposition"]
    entry = bibtexparser.parse_string(bib.content.decode()).entries[0]
    assert (entry.entry_type, entry.fields_dict["doi"].value) == ("article", "10.1234/reef")

"""Research outputs in the API: who reads and writes, each field's error under its name, a
change that keeps what it does not send, the BibTeX upload and the exports."""

from __future__ import annotations

import csv
import io

import bibtexparser
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from allocations.models import ResearchOutput
from allocations.outputs.services import OutputDetails, output_add
from projects.models import Project
from tests.allocations.test_outputs import GOOD_AND_BAD

URL = "/api/v1/projects/pawsey0003/outputs/"


def _as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def paper(centre) -> ResearchOutput:
    details = OutputDetails(kind="publication", title="Reefs", year=2024, doi="10.1234/reef")
    return output_add(project=centre.p3, actor=centre.alice, details=details)


def test_the_pi_adds_a_publication_and_a_member_lists_it(centre):
    added = _as(centre.alice).post(
        URL, {"kind": "publication", "title": "P", "doi": "doi:10.1234/ABC", "year": 2024},
        format="json",
    )  # fmt: skip
    assert added.status_code == 201, added.json()
    assert added.json()["doi"] == "10.1234/abc"
    assert added.json()["added_by"] == "alice"
    listed = _as(centre.carol).get(URL).json()
    assert [(o["title"], o["project"]) for o in listed["results"]] == [("P", "pawsey0003")]


def test_a_member_is_refused_before_the_body_is_read_and_an_outsider_finds_nothing(centre):
    refused = _as(centre.carol).post(URL, {"kind": "nonsense"}, format="json")
    assert refused.status_code == 403
    assert (
        refused.json()["message"]
        == "only the PI or a manager of pawsey0003 changes its research outputs"
    )
    assert _as(centre.bob).get(URL).status_code == 404
    assert _as(centre.bob).post(URL, {}, format="json").status_code == 404
    assert not ResearchOutput.objects.exists()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"title": "P"}, "kind", "required"),
        ({"kind": "poem", "title": "P"}, "kind", "not a valid choice"),
        ({"kind": "publication"}, "title", "required"),
        ({"kind": "publication", "title": "P", "doi": "10.12/x"}, "doi", "is not a DOI"),
        ({"kind": "publication", "title": "P", "year": 99}, "year", "greater than or equal"),
        ({"kind": "dataset", "title": "D"}, "url", "a data set needs its URL"),
        ({"kind": "software", "title": "S", "url": "not a url"}, "url", "valid URL"),
        ({"kind": "grant", "title": "G"}, "funder", "needs its funder"),
        ({"kind": "grant", "title": "G", "funder": "ARC", "amount": "5"}, "currency", "currency"),
        ({"kind": "grant", "title": "G", "funder": "ARC", "amount": "-5", "currency": "AUD"},
         "amount", "greater than or equal"),
        ({"kind": "grant", "title": "G", "funder": "ARC", "period_start": "2025-01-01",
          "period_end": "2024-01-01"}, "period_end", "cannot end before it starts"),
    ],
)  # fmt: skip
def test_each_field_s_error_is_named_and_nothing_is_saved(centre, body, field, words):
    response = _as(centre.alice).post(URL, body, format="json")
    assert response.status_code == 400
    assert words in " ".join(response.json()["errors"][field])
    assert not ResearchOutput.objects.exists()


def test_a_duplicate_doi_is_a_400_under_doi(centre, paper):
    response = _as(centre.alice).post(
        URL, {"kind": "publication", "title": "Again", "doi": "https://doi.org/10.1234/REEF"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json()["errors"]["doi"] == [
        "DOI 10.1234/reef is already an output of pawsey0003: Reefs"
    ]


def test_a_change_keeps_the_fields_it_does_not_send_and_follows_the_kind_s_rules(centre, paper):
    alice = _as(centre.alice)
    changed = alice.patch(f"{URL}{paper.pk}/", {"title": "Reefs by day"}, format="json")
    assert changed.status_code == 200
    assert (changed.json()["title"], changed.json()["doi"], changed.json()["year"]) == (
        "Reefs by day", "10.1234/reef", 2024,
    )  # fmt: skip
    refused = alice.patch(f"{URL}{paper.pk}/", {"kind": "software"}, format="json")
    assert refused.json()["errors"]["url"] == ["a software needs its URL"]
    assert alice.delete(f"{URL}{paper.pk}/").status_code == 204
    assert not ResearchOutput.objects.exists()


def test_an_upload_answers_what_it_added_and_each_entry_left_out(centre):
    response = _as(centre.alice).post(
        URL + "bibtex/", {"file": SimpleUploadedFile("refs.bib", GOOD_AND_BAD)}, format="multipart"
    )
    assert response.status_code == 201
    body = response.json()
    assert len(body["added"]) == 4
    assert {problem["key"] for problem in body["problems"]} == {
        "notitle", "baddoi", "broken",
    }  # fmt: skip


def test_an_upload_that_is_not_bibtex_is_a_400_under_file_and_adds_nothing(centre):
    response = _as(centre.alice).post(
        URL + "bibtex/", {"file": SimpleUploadedFile("x.bib", b"\x00\x01\x02")}, format="multipart"
    )
    assert response.status_code == 400
    assert response.json()["errors"]["file"] == [
        "the file is binary, not BibTeX (which is plain text)"
    ]
    assert not ResearchOutput.objects.exists()


def test_an_archived_project_answers_400_with_the_rule(centre):
    Project.objects.filter(pk=centre.p3.pk).update(status=Project.Status.ARCHIVED)
    response = _as(centre.alice).post(URL, {"kind": "other", "title": "T"}, format="json")
    assert (response.status_code, response.json()["message"]) == (
        400, "pawsey0003 is archived: it is read-only",
    )  # fmt: skip


def test_a_member_exports_csv_and_bibtex_that_parse_back(centre, paper):
    carol = _as(centre.carol)
    rows = list(csv.DictReader(io.StringIO(carol.get(URL + "csv/").content.decode())))
    assert [(row["title"], row["doi"]) for row in rows] == [("Reefs", "10.1234/reef")]
    bib = carol.get(URL + "bibtex/")
    assert bib["Content-Type"].startswith("application/x-bibtex")
    entry = bibtexparser.parse_string(bib.content.decode()).entries[0]
    assert entry.fields_dict["doi"].value == "10.1234/reef"

"""Research outputs: the DOI rule, each kind's rules, who may write, the BibTeX upload (good and
bad entries mixed, a file that is not BibTeX) and the exports, which read back."""

from __future__ import annotations

import csv
import io
from datetime import date
from decimal import Decimal

import bibtexparser
import pytest
from django.core.exceptions import PermissionDenied

from allocations.models import ResearchOutput
from allocations.outputs import bibtex
from allocations.outputs.bibtex import BibtexError, bibtex_read
from allocations.outputs.doi import DoiError, doi_normalise
from allocations.outputs.exports import CSV_COLUMNS, outputs_bibtex, outputs_csv
from allocations.outputs.forms import OutputForm
from allocations.outputs.services import (
    OutputDetails,
    OutputError,
    output_add,
    output_delete,
    output_update,
    outputs_import_bibtex,
)
from projects.access import ProjectReadOnly
from projects.models import Membership, Project
from tests.factories import MembershipFactory, UserFactory

GOOD_AND_BAD = rb"""
@article{good1, title={On {M}{\"u}ller's {\'E}cole}, author={M{\"u}ller, J{\"o}rg and Smith, A.},
  year={2024}, journal={Journal of HPC}, doi={https://doi.org/10.1234/ABC.def}}
@inproceedings{good2, title={Scaling out}, author={Chen, L.}, year=2023,
  booktitle={Proceedings of SC23}}
@misc{notitle, author={Nobody}, year={2020}}
@article{baddoi, title={A bad DOI}, doi={not-a-doi}}
@article{taken, title={Already there}, doi={10.5555/taken}}
@article{broken, title={Never closed, year={2020}
@article{good3, title={After the broken one}, year={2021}}
"""


def _publication(**values) -> OutputDetails:
    return OutputDetails(kind="publication", **{"title": "A paper", **values})


# --- DOIs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("10.1234/ABC", "10.1234/abc"),
        ("doi:10.1234/abc", "10.1234/abc"),
        ("DOI: 10.1234/abc", "10.1234/abc"),
        ("https://doi.org/10.1000.5/Ab-(c)", "10.1000.5/ab-(c)"),
        ("http://dx.doi.org/10.48550/arXiv.2401.00001", "10.48550/arxiv.2401.00001"),
        ("  10.1234/abc  ", "10.1234/abc"),
    ],
)
def test_a_doi_in_any_usual_form_is_stored_as_lower_case_10_prefix_slash_suffix(text, stored):
    assert doi_normalise(text) == stored


@pytest.mark.parametrize(
    "text",
    ["nope", "10.12/x", "10.1234/", "10.1234/a b", "https://example.org/10.1234/x", "11.1234/x",
     "10.1234/x\x00", "doi:", "10.1234/" + "x" * 200],
)  # fmt: skip
def test_anything_else_is_refused_with_what_a_doi_looks_like(text):
    with pytest.raises(DoiError, match="DOI") as refused:
        doi_normalise(text)
    assert refused.value.field == "doi"


# --- Services --------------------------------------------------------------------------------


def test_the_pi_adds_a_publication_and_its_doi_is_normalised(centre):
    output = output_add(
        project=centre.p3, actor=centre.alice,
        details=_publication(authors="Smith, A.", year=2024, venue="J. HPC", doi="doi:10.1234/X"),
    )  # fmt: skip
    output.refresh_from_db()
    assert (output.kind, output.doi, output.added_by) == ("publication", "10.1234/x", centre.alice)


def test_a_manager_adds_a_grant_and_a_member_may_not(centre):
    manager = UserFactory(username="mara")
    MembershipFactory(project=centre.p3, user=manager, role=Membership.Role.MANAGER)
    grant = OutputDetails(
        kind="grant", title="ARC Discovery", funder="ARC", grant_number="DP240001",
        amount=Decimal("450000"), currency="aud", period_start=date(2024, 1, 1),
        period_end=date(2026, 12, 31),
    )  # fmt: skip
    output = output_add(project=centre.p3, actor=manager, details=grant)
    assert output.currency == "AUD"
    with pytest.raises(PermissionDenied, match="only the PI or a manager"):
        output_add(project=centre.p3, actor=centre.carol, details=grant)
    assert ResearchOutput.objects.filter(project=centre.p3).count() == 1


@pytest.mark.parametrize(
    ("details", "field"),
    [
        (OutputDetails(kind="publication", title="  "), "title"),
        (OutputDetails(kind="grant", title="G"), "funder"),
        (OutputDetails(kind="grant", title="G", funder="ARC", amount=Decimal(5)), "currency"),
        (OutputDetails(kind="grant", title="G", funder="ARC", amount=Decimal(-1), currency="AUD"),
         "amount"),
        (OutputDetails(kind="grant", title="G", funder="ARC", currency="dollars"), "currency"),
        (OutputDetails(kind="grant", title="G", funder="ARC", period_start=date(2025, 1, 1),
                       period_end=date(2024, 1, 1)), "period_end"),
        (OutputDetails(kind="dataset", title="D"), "url"),
        (OutputDetails(kind="software", title="S"), "url"),
        (OutputDetails(kind="publication", title="P", doi="10.1/x"), "doi"),
        (OutputDetails(kind="poem", title="P"), "kind"),
    ],
)  # fmt: skip
def test_each_kind_s_rule_names_the_field_at_fault_and_saves_nothing(centre, details, field):
    with pytest.raises((OutputError, DoiError)) as refused:
        output_add(project=centre.p3, actor=centre.alice, details=details)
    assert refused.value.field == field
    assert not ResearchOutput.objects.exists()


def test_software_with_a_url_and_another_output_with_nothing_else_are_kept(centre):
    output_add(
        project=centre.p3, actor=centre.alice,
        details=OutputDetails(kind="software", title="reefsim", url="https://github.com/x/reefsim"),
    )  # fmt: skip
    output_add(project=centre.p3, actor=centre.alice, details=OutputDetails("other", "A talk"))
    assert ResearchOutput.objects.filter(project=centre.p3).count() == 2


def test_a_doi_the_project_has_is_refused_with_the_title_that_has_it(centre):
    output_add(project=centre.p3, actor=centre.alice, details=_publication(doi="10.1234/x"))
    with pytest.raises(OutputError, match="already an output of pawsey0003: A paper") as refused:
        output_add(
            project=centre.p3,
            actor=centre.alice,
            details=_publication(doi="https://doi.org/10.1234/X"),
        )
    assert refused.value.field == "doi"
    # Another project may list the same paper.
    output_add(project=centre.p1, actor=centre.alice, details=_publication(doi="10.1234/x"))


def test_an_update_keeps_its_own_doi_and_a_delete_removes_the_output(centre):
    output = output_add(
        project=centre.p3, actor=centre.alice, details=_publication(doi="10.1234/x")
    )
    output_update(
        output=output, actor=centre.alice, details=_publication(title="Renamed", doi="10.1234/x")
    )
    output.refresh_from_db()
    assert output.title == "Renamed"
    with pytest.raises(PermissionDenied):
        output_delete(output=output, actor=centre.carol)
    output_delete(output=output, actor=centre.alice)
    assert not ResearchOutput.objects.exists()


def test_an_archived_project_s_outputs_are_read_only(centre):
    output = output_add(project=centre.p3, actor=centre.alice, details=_publication())
    Project.objects.filter(pk=centre.p3.pk).update(status=Project.Status.ARCHIVED)
    with pytest.raises(ProjectReadOnly):
        output_add(project=centre.p3, actor=centre.alice, details=_publication(title="More"))
    with pytest.raises(ProjectReadOnly):
        output_delete(output=output, actor=centre.alice)
    with pytest.raises(ProjectReadOnly):
        outputs_import_bibtex(project=centre.p3, actor=centre.alice, content=GOOD_AND_BAD)
    assert ResearchOutput.objects.count() == 1


# --- The form --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doi", "error"),
    [
        ("https://doi.org/10.1234/ABC", None),
        ("doi:10.1234/abc", None),
        ("", None),
        ("10.1234", "is not a DOI"),
        ("www.example.org", "is not a DOI"),
    ],
)
def test_the_form_normalises_a_doi_or_says_what_one_looks_like(db, doi, error):
    form = OutputForm({"kind": "publication", "title": "P", "doi": doi})
    if error is None:
        assert form.is_valid(), form.errors
        assert form.details().doi == ("10.1234/abc" if doi else "")
    else:
        assert not form.is_valid()
        assert error in form.errors["doi"][0]


def test_the_form_puts_a_kind_s_rule_beside_its_field(db):
    form = OutputForm({"kind": "dataset", "title": "Reef images"})
    assert not form.is_valid()
    assert form.errors["url"] == ["a data set needs its URL"]


# --- BibTeX upload ---------------------------------------------------------------------------


def test_an_upload_keeps_the_good_entries_and_lists_each_bad_one_with_its_reason(centre):
    output_add(project=centre.p3, actor=centre.alice, details=_publication(doi="10.5555/taken"))
    result = outputs_import_bibtex(project=centre.p3, actor=centre.alice, content=GOOD_AND_BAD)
    added = {output.title: output for output in result.added}
    assert set(added) == {"On Müller's École", "Scaling out", "After the broken one"}
    first = ResearchOutput.objects.get(title="On Müller's École")
    assert (first.authors, first.year, first.venue, first.doi) == (
        "Müller, Jörg and Smith, A.",
        2024,
        "Journal of HPC",
        "10.1234/abc.def",
    )
    reasons = {problem.key: problem.reason for problem in result.problems}
    assert reasons["notitle"] == "it has no title"
    assert "is not a DOI" in reasons["baddoi"]
    assert reasons["taken"] == "DOI 10.5555/taken is already an output of pawsey0003"
    assert any("does not parse" in reason for reason in reasons.values())
    assert len(result.problems) == 4
    assert ResearchOutput.objects.filter(project=centre.p3).count() == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"just some notes, no entries", "holds no BibTeX entry"),
        (b"@comment{only a comment}", "holds no BibTeX entry"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        ("@article{k, title={Caf\xe9}}".encode("latin-1"), "not UTF-8"),
        (b"@article{k, title={x}}\n" + b"%" * bibtex.MAX_BIBTEX_BYTES, "larger than 1024 KiB"),
        (b"".join(b"@misc{k%d, title={t}}\n" % n for n in range(1001)), "more than 1000 entries"),
    ],
)
def test_a_file_that_is_not_bibtex_is_refused_whole_and_adds_nothing(centre, content, message):
    with pytest.raises(BibtexError, match=message) as refused:
        outputs_import_bibtex(project=centre.p3, actor=centre.alice, content=content)
    assert refused.value.field == "file"
    assert not ResearchOutput.objects.exists()


def test_a_doi_twice_in_one_file_is_added_once(db):
    read = bibtex_read(
        b"@article{a, title={A}, doi={10.1234/x}}\n@article{b, title={B}, doi={10.1234/X}}"
    )
    assert [entry.key for entry in read.entries] == ["a"]
    assert read.problems[0].reason == "DOI 10.1234/x is twice in the file"


def test_the_readers_limits_are_the_models_columns():
    lengths = {
        f.name: f.max_length for f in ResearchOutput._meta.get_fields() if hasattr(f, "max_length")
    }
    assert lengths["title"] == bibtex.TITLE_MAX_LENGTH
    assert lengths["venue"] == bibtex.VENUE_MAX_LENGTH
    assert lengths["url"] == bibtex.URL_MAX_LENGTH


# --- Exports ---------------------------------------------------------------------------------


@pytest.fixture
def three_outputs(centre):
    alice = centre.alice
    add = output_add
    add(project=centre.p3, actor=alice, details=_publication(
        title="Reefs {at} night", authors="Müller, J. and Chen, L.", year=2024,
        venue="Journal of Coral", doi="10.1234/reef"))  # fmt: skip
    add(project=centre.p3, actor=alice, details=_publication(
        title="=HYPERLINK(1)", year=2023, venue="Proceedings of SC23"))  # fmt: skip
    add(project=centre.p3, actor=alice, details=OutputDetails(
        kind="grant", title="ARC Discovery", funder="ARC", grant_number="DP1",
        amount=Decimal("1000.50"), currency="AUD", period_start=date(2024, 1, 1),
        period_end=date(2025, 1, 1)))  # fmt: skip
    add(project=centre.p3, actor=alice, details=OutputDetails(
        kind="software", title="reefsim", url="https://github.com/x/reefsim"))  # fmt: skip
    return ResearchOutput.objects.filter(project=centre.p3)


def test_the_csv_export_parses_back_to_every_output(three_outputs):
    rows = [(o, o.added_by.username, o.added_at.isoformat()) for o in three_outputs]
    parsed = list(csv.DictReader(io.StringIO(outputs_csv(rows))))
    assert list(parsed[0]) == list(CSV_COLUMNS)
    by_title = {row["title"]: row for row in parsed}
    assert by_title["Reefs {at} night"]["doi"] == "10.1234/reef"
    assert by_title["ARC Discovery"]["amount"] == "1000.50"
    assert by_title["ARC Discovery"]["period_end"] == "2025-01-01"
    assert "'=HYPERLINK(1)" in by_title  # a formula is written as text
    assert len(parsed) == 4


def test_the_bibtex_export_reads_back_with_the_same_library(three_outputs):
    text = outputs_bibtex(three_outputs, key_prefix="pawsey0003")
    library = bibtexparser.parse_string(text)
    assert library.failed_blocks == []
    entries = {entry.key: entry for entry in library.entries}
    by_title = {entry.fields_dict["title"].value: entry for entry in library.entries}
    article = by_title["Reefs at night"]
    assert (article.entry_type, article.fields_dict["doi"].value) == ("article", "10.1234/reef")
    assert article.fields_dict["journal"].value == "Journal of Coral"
    assert by_title["=HYPERLINK(1)"].entry_type == "inproceedings"
    grant = by_title["ARC Discovery"]
    assert grant.entry_type == "misc"
    assert (
        grant.fields_dict["note"].value
        == "Funding grant, ARC, no. DP1, 1000.50 AUD, 2024-01-01 to 2025-01-01"
    )
    assert by_title["reefsim"].fields_dict["url"].value == "https://github.com/x/reefsim"
    assert all(key.startswith("pawsey0003-") for key in entries)
    # What the portal writes, its upload reads: the publications come back.
    read = bibtex_read(text.encode())
    assert {entry.doi for entry in read.entries} >= {"10.1234/reef"}

"""Research outputs written: added, changed, deleted one at a time, or added from a BibTeX file.

Every service asks who acts (``can_edit_outputs``: the PI, a manager, staff) and whether the
project may change (an archived one is read-only) before it reads what was asked, then checks
the output with ``output_details_check``, the one home of the rules each kind follows; the form
and the API serializer ask the same function, so a page, the API and an upload refuse the same
things with the same words."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import date
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction

from allocations.access import can_edit_outputs
from allocations.models import ResearchOutput
from allocations.outputs.bibtex import BibProblem, bibtex_read
from allocations.outputs.doi import doi_normalise
from kit.access import require
from kit.errors import ApplicationError
from projects.access import project_writable_check
from projects.models import Project

CURRENCY_LENGTH = 3  # ISO 4217: AUD, EUR, USD
KINDS_WITH_URL = {ResearchOutput.Kind.DATASET, ResearchOutput.Kind.SOFTWARE}


class OutputError(ApplicationError):
    """An output the rules refuse; ``field`` names the input at fault."""


@dataclass(frozen=True)
class OutputDetails:
    """What a person says of an output: every field but the project and who added it."""

    kind: str
    title: str
    authors: str = ""
    year: int | None = None
    venue: str = ""
    doi: str = ""
    funder: str = ""
    grant_number: str = ""
    amount: Decimal | None = None
    currency: str = ""
    period_start: date | None = None
    period_end: date | None = None
    url: str = ""


DETAIL_FIELDS = tuple(item.name for item in fields(OutputDetails))


@dataclass
class BibtexImport:
    """What an upload did: the publications added, and each entry left out with its reason."""

    added: list[ResearchOutput] = field(default_factory=list)
    problems: list[BibProblem] = field(default_factory=list)


def output_details_check(details: OutputDetails) -> OutputDetails:
    """``details`` as they are stored (the DOI normalised, texts trimmed, the currency in
    capitals), or ``OutputError`` naming the first field at fault:

    - every output has a title;
    - a funding grant has a funder; an amount needs its currency and is not negative;
      the period does not end before it starts;
    - a data set and software have a URL;
    - a DOI is ``10.NNNN/suffix`` (``allocations.outputs.doi``)."""
    if details.kind not in ResearchOutput.Kind.values:
        raise OutputError(f"{details.kind!r} is not a kind of output", field="kind")
    details = replace(
        details,
        **{
            name: getattr(details, name).strip()
            for name in DETAIL_FIELDS
            if isinstance(getattr(details, name), str)
        },
    )
    if not details.title:
        raise OutputError("every output needs a title", field="title")
    if details.kind == ResearchOutput.Kind.GRANT:
        if not details.funder:
            raise OutputError("a funding grant needs its funder", field="funder")
        if details.amount is not None and details.amount < 0:
            raise OutputError("the amount cannot be negative", field="amount")
        if details.amount is not None and not details.currency:
            raise OutputError("an amount needs its currency (such as AUD)", field="currency")
    if details.currency and not (
        len(details.currency) == CURRENCY_LENGTH and details.currency.isascii()
        and details.currency.isalpha()
    ):  # fmt: skip
        raise OutputError("a currency is three letters (ISO 4217, such as AUD)", field="currency")
    if details.period_start and details.period_end and details.period_end < details.period_start:
        raise OutputError("the period cannot end before it starts", field="period_end")
    if details.kind in KINDS_WITH_URL and not details.url:
        kind = ResearchOutput.Kind(details.kind).label
        raise OutputError(f"a {kind} needs its URL", field="url")
    doi = doi_normalise(details.doi) if details.doi else ""
    return replace(details, doi=doi, currency=details.currency.upper())


def _doi_free_check(*, project: Project, doi: str, output: ResearchOutput | None) -> None:
    if not doi:
        return
    taken = ResearchOutput.objects.filter(project=project, doi=doi)
    if output is not None:
        taken = taken.exclude(pk=output.pk)
    other = taken.first()
    if other is not None:
        raise OutputError(
            f"DOI {doi} is already an output of {project}: {other.title}", field="doi"
        )


def _editable_check(*, actor: User, project: Project) -> None:
    require(
        can_edit_outputs(actor, project),
        f"only the PI or a manager of {project} changes its research outputs",
    )
    project_writable_check(project)


@transaction.atomic
def output_add(*, project: Project, actor: User, details: OutputDetails) -> ResearchOutput:
    """Add an output to ``project``; ``OutputError`` if the rules refuse it (nothing saved)."""
    _editable_check(actor=actor, project=project)
    details = output_details_check(details)
    _doi_free_check(project=project, doi=details.doi, output=None)
    values = {name: getattr(details, name) for name in DETAIL_FIELDS}
    return ResearchOutput.objects.create(project=project, added_by=actor, **values)


@transaction.atomic
def output_update(*, output: ResearchOutput, actor: User, details: OutputDetails) -> ResearchOutput:
    """Change every field of ``output`` to ``details`` (its project and who added it stay)."""
    _editable_check(actor=actor, project=output.project)
    details = output_details_check(details)
    _doi_free_check(project=output.project, doi=details.doi, output=output)
    for name in DETAIL_FIELDS:
        setattr(output, name, getattr(details, name))
    output.save(update_fields=list(DETAIL_FIELDS))
    return output


@transaction.atomic
def output_delete(*, output: ResearchOutput, actor: User) -> None:
    """Delete ``output`` (a progress report that pointed to it no longer does)."""
    _editable_check(actor=actor, project=output.project)
    output.delete()


@transaction.atomic
def outputs_import_bibtex(*, project: Project, actor: User, content: bytes) -> BibtexImport:
    """Add each entry of a BibTeX file (its bytes) as a publication, in one transaction. An
    entry with no title, a malformed DOI, a DOI the project (or the file) already has, or that
    does not parse is left out and listed with its reason; the rest are added. A file that is
    not BibTeX at all is refused whole (``BibtexError``): nothing is added."""
    _editable_check(actor=actor, project=project)
    read = bibtex_read(content)
    taken = set(
        ResearchOutput.objects.filter(project=project).exclude(doi="").values_list("doi", flat=True)
    )
    result = BibtexImport(problems=list(read.problems))
    new: list[ResearchOutput] = []
    for entry in read.entries:
        if entry.doi and entry.doi in taken:
            result.problems.append(
                BibProblem(entry.key, f"DOI {entry.doi} is already an output of {project}")
            )
            continue
        details = OutputDetails(
            kind=ResearchOutput.Kind.PUBLICATION, title=entry.title, authors=entry.authors,
            year=entry.year, venue=entry.venue, doi=entry.doi, url=entry.url,
        )  # fmt: skip
        try:
            details = output_details_check(details)
        except ApplicationError as error:
            result.problems.append(BibProblem(entry.key, str(error)))
            continue
        values = {name: getattr(details, name) for name in DETAIL_FIELDS}
        new.append(ResearchOutput(project=project, added_by=actor, **values))
    result.added = ResearchOutput.objects.bulk_create(new)
    return result

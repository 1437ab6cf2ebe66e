"""Filling a publication from its DOI: one GET of ``<resolver><doi>`` asking for CSL JSON
(``Accept: application/vnd.citationstyles.csl+json``, which doi.org answers for Crossref,
DataCite and mEDRA DOIs), read into title, authors, year and venue.

Off unless ``PORTAL_DOI_LOOKUP_URL`` names a resolver: the portal must work without internet.
Any failure (no answer within the timeout, an HTTP error, an answer that is not CSL JSON) is a
``DoiLookupError`` with a sentence; the form stays as it was and can be saved by hand. Pure: the
caller passes the resolver and the timeout; no Django.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from kit.errors import ApplicationError

CSL_JSON = "application/vnd.citationstyles.csl+json"
MAX_ANSWER_BYTES = 1024 * 1024


class DoiLookupError(ApplicationError):
    """The lookup gave nothing to fill the form with."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="doi")


@dataclass(frozen=True)
class Citation:
    title: str
    authors: str  # "Surname, Given and Other, Given", as the form takes them
    year: int | None
    venue: str


def doi_lookup(*, doi: str, resolver: str, timeout_seconds: float) -> Citation:
    """The citation of ``doi`` (normalised) from ``resolver`` (such as "https://doi.org/")."""
    if not resolver.startswith(("http://", "https://")):
        raise DoiLookupError("the DOI lookup is set up with a resolver that is not http(s)")
    url = resolver + urllib.parse.quote(doi, safe="/:;()._-")
    request = urllib.request.Request(url, headers={"Accept": CSL_JSON})  # noqa: S310 (http(s))
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as answer:  # noqa: S310
            body = answer.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as error:
        reason = "is not known there" if error.code == 404 else f"answered {error.code}"
        raise DoiLookupError(f"the DOI lookup failed: {doi} {reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as error:
        cause = error.reason if isinstance(error, urllib.error.URLError) else error
        raise DoiLookupError(f"the DOI lookup failed ({cause}); fill the fields by hand") from None
    if len(body) > MAX_ANSWER_BYTES:
        raise DoiLookupError("the DOI lookup answered too much; fill the fields by hand")
    try:
        csl = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        csl = None
    if not isinstance(csl, dict) or not _first_text(csl.get("title")):
        raise DoiLookupError("the DOI lookup did not answer a citation; fill the fields by hand")
    return Citation(
        title=_first_text(csl.get("title"))[:500],
        authors=" and ".join(_name(person) for person in _list(csl.get("author")) if _name(person)),
        year=_year(csl),
        venue=_first_text(csl.get("container-title"))[:300],
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _first_text(value: Any) -> str:
    """CSL gives titles as text or as a list of texts."""
    if isinstance(value, list):
        value = next((item for item in value if isinstance(item, str)), "")
    return " ".join(value.split()) if isinstance(value, str) else ""


def _name(person: Any) -> str:
    if not isinstance(person, dict):
        return ""
    family, given = _first_text(person.get("family")), _first_text(person.get("given"))
    if family:
        return f"{family}, {given}" if given else family
    return _first_text(person.get("literal"))


def _year(csl: dict[str, Any]) -> int | None:
    for name in ("issued", "published-print", "published-online", "created"):
        parts = csl.get(name)
        if isinstance(parts, dict):
            first = _list(parts.get("date-parts"))
            if first and isinstance(first[0], list) and first[0]:
                year = first[0][0]
                if isinstance(year, int) and 1000 <= year <= 2999:
                    return year
                if isinstance(year, str) and year.isdigit() and 1000 <= int(year) <= 2999:
                    return int(year)
    return None

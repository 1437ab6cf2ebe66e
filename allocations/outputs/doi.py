"""A DOI as a person types it, read into the one form the portal stores: ``10.NNNN/suffix`` in
lower case (DOIs are case-insensitive, ISO 26324), with no resolver prefix.

Accepted: ``10.1234/abc``, ``doi:10.1234/abc``, ``https://doi.org/10.1234/abc`` (also
``http://``, ``dx.doi.org``). Anything else is refused with a sentence that says what a DOI
looks like. Pure: no Django.
"""

from __future__ import annotations

import re

from kit.errors import ApplicationError

# The registrant code is 10 followed by digits (sub-divisions with dots allowed); the suffix is
# any printable text without spaces. ``ResearchOutput.doi`` holds at most 200 characters.
DOI_MAX_LENGTH = 200
_DOI = re.compile(r"10\.[0-9]{4,9}(?:\.[0-9]+)*/[!-~]+")
_PREFIXES = (
    "https://doi.org/",
    "http://doi.org/",
    "https://dx.doi.org/",
    "http://dx.doi.org/",
    "doi:",
)
DOI_FORMAT = "a DOI looks like 10.1234/abc, doi:10.1234/abc or https://doi.org/10.1234/abc"


class DoiError(ApplicationError):
    """Text that is not a DOI."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="doi")


def doi_normalise(text: str) -> str:
    """``text`` as a stored DOI (``10.nnnn/suffix``, lower case); ``DoiError`` if it is not
    one. Surrounding spaces are ignored; an empty text is not a DOI (callers leave an empty
    DOI out before asking)."""
    doi = text.strip()
    lowered = doi.lower()
    for prefix in _PREFIXES:
        if lowered.startswith(prefix):
            doi = doi[len(prefix) :].strip()
            break
    doi = doi.lower()
    if not _DOI.fullmatch(doi):
        raise DoiError(f"{_shown(text)} is not a DOI: {DOI_FORMAT}")
    if len(doi) > DOI_MAX_LENGTH:
        raise DoiError(f"a DOI has at most {DOI_MAX_LENGTH} characters")
    return doi


def _shown(text: str) -> str:
    """The refused text, short and printable, for the message."""
    shown = "".join(c if c.isprintable() else "?" for c in text.strip())
    return repr(shown if len(shown) <= 60 else shown[:57] + "...")

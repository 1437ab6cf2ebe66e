"""Reading a BibTeX file into publications: each entry becomes one, or a problem with its
reason (no title, a malformed or repeated DOI, a year that is not one, an entry that does not
parse). A file that is not BibTeX at all (too large, binary, not UTF-8, no entry) is refused
whole with ``BibtexError``.

Parsing is bibtexparser 2 (pure Python, the most used BibTeX library for Python): its splitter
reads a 1 MiB file in a third of a second (1.4's pyparsing grammar took 18 s), resolves
``@string`` macros, and names each block it could not read (``ParsingFailedBlock``, a key or a
field given twice) instead of dropping it. LaTeX escapes (``M{\\"u}ller``) are turned into text
with pylatexenc, bibtexparser's own choice, only in the values that hold a backslash: it is the
slow part. Pure: no Django.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass, field

import bibtexparser
from bibtexparser.model import (
    DuplicateBlockKeyBlock,
    DuplicateFieldKeyBlock,
    Entry,
    ParsingFailedBlock,
)
from pylatexenc.latex2text import LatexNodes2Text  # type: ignore[import-untyped]

from allocations.outputs.doi import DoiError, doi_normalise
from kit.errors import ApplicationError

MAX_BIBTEX_BYTES = 1024 * 1024  # 1 MiB
MAX_BIBTEX_ENTRIES = 1000  # bounds one upload's LaTeX decoding to about 3 s (docs/allocations.md)
# The columns of ``ResearchOutput`` a publication fills (tests compare them with the model).
TITLE_MAX_LENGTH = 500
VENUE_MAX_LENGTH = 300
URL_MAX_LENGTH = 500
AUTHORS_MAX_LENGTH = 10_000
_YEAR = re.compile(r"[0-9]{4}")
_SPACES = re.compile(r"\s+")
_LATEX = LatexNodes2Text()
_HEAD = re.compile(r"@\s*\w+\s*[{(]\s*([^,\s{}()]+)\s*,")  # an entry's citation key


class BibtexError(ApplicationError):
    """The file is not BibTeX: nothing of it is added."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="file")


@dataclass(frozen=True)
class BibEntry:
    """One publication read from an entry, every text without LaTeX escapes."""

    key: str
    title: str
    authors: str = ""
    year: int | None = None
    venue: str = ""
    doi: str = ""  # normalised (``allocations.outputs.doi``), or empty
    url: str = ""


@dataclass(frozen=True)
class BibProblem:
    """An entry left out, and why."""

    key: str  # its citation key, or "entry on line N" when it has none
    reason: str


@dataclass
class BibFile:
    entries: list[BibEntry] = field(default_factory=list)
    problems: list[BibProblem] = field(default_factory=list)


def bibtex_read(content: bytes) -> BibFile:
    """Read ``content`` (the bytes of an uploaded .bib file). ``BibtexError`` when it is not
    BibTeX at all; otherwise every entry is either in ``entries`` or in ``problems``, in the
    file's order. DOIs are checked here and within the file (the second of two equal DOIs is a
    problem); whether the project already has one is the service's to ask."""
    if len(content) > MAX_BIBTEX_BYTES:
        raise BibtexError(f"the file is larger than {MAX_BIBTEX_BYTES // 1024} KiB; split it")
    if b"\x00" in content:
        raise BibtexError("the file is binary, not BibTeX (which is plain text)")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BibtexError("the file is not UTF-8 text, so not BibTeX") from None
    library = bibtexparser.parse_string(text)
    blocks = [block for block in library.blocks if isinstance(block, Entry | ParsingFailedBlock)]
    if not blocks:
        raise BibtexError("the file holds no BibTeX entry (such as @article{key, title={...}})")
    if len(blocks) > MAX_BIBTEX_ENTRIES:
        raise BibtexError(f"the file has more than {MAX_BIBTEX_ENTRIES} entries; split it")
    read = BibFile()
    seen_dois: set[str] = set()
    for block in blocks:
        entry = _entry(block) if isinstance(block, Entry) else _failed(block)
        if isinstance(entry, BibProblem):
            read.problems.append(entry)
        elif entry.doi and entry.doi in seen_dois:
            read.problems.append(BibProblem(entry.key, f"DOI {entry.doi} is twice in the file"))
        else:
            seen_dois.add(entry.doi)
            read.entries.append(entry)
    return read


def _failed(block: ParsingFailedBlock) -> BibProblem:
    where = f"entry on line {block.start_line + 1}" if block.start_line is not None else "entry"
    if isinstance(block, DuplicateBlockKeyBlock):
        return BibProblem(_text(block.key)[:80] or where, "its key is used by an earlier entry")
    if isinstance(block, DuplicateFieldKeyBlock):
        key = _text(getattr(block.ignore_error_block, "key", ""))[:80]
        return BibProblem(key or where, "a field is given twice in it")
    head = _HEAD.match(block.raw.lstrip()) if isinstance(block.raw, str) else None
    key = _text(head.group(1))[:80] if head else ""
    line = f" (line {block.start_line + 1})" if block.start_line is not None else ""
    return BibProblem(key or where, f"it does not parse as BibTeX{line}")


def _text(value: object) -> str:
    """A field's value as plain text on one line: LaTeX escapes decoded, no braces."""
    text = value if isinstance(value, str) else ""
    if "\\" in text:
        text = _decoded(text)
    return _SPACES.sub(" ", text.replace("{", "").replace("}", "")).strip()


@functools.lru_cache(maxsize=4096)
def _decoded(text: str) -> str:
    """LaTeX to text; remembered, since a file names the same authors and venues again."""
    # pylatexenc parses leniently; when even that fails, the raw text is kept.
    with contextlib.suppress(ValueError, IndexError, KeyError, TypeError, RecursionError):
        return str(_LATEX.latex_to_text(text))
    return text


def _field(entry: Entry, name: str) -> str:
    found = entry.fields_dict.get(name)
    return _text(found.value) if found is not None else ""


def _entry(entry: Entry) -> BibEntry | BibProblem:
    key = _text(entry.key)[:80] or f"entry on line {(entry.start_line or 0) + 1}"
    title = _field(entry, "title")
    if not title:
        return BibProblem(key, "it has no title")
    if len(title) > TITLE_MAX_LENGTH:
        return BibProblem(key, f"its title is longer than {TITLE_MAX_LENGTH} characters")
    authors = _field(entry, "author") or _field(entry, "editor")
    if len(authors) > AUTHORS_MAX_LENGTH:
        return BibProblem(key, f"its author list is longer than {AUTHORS_MAX_LENGTH} characters")
    venues = ("journal", "booktitle", "publisher", "howpublished", "school")
    venue = next((text for name in venues if (text := _field(entry, name))), "")
    if len(venue) > VENUE_MAX_LENGTH:
        return BibProblem(key, f"its venue is longer than {VENUE_MAX_LENGTH} characters")
    year_text = _field(entry, "year")
    year = None
    if year_text:
        if not _YEAR.fullmatch(year_text) or not 1000 <= int(year_text) <= 2999:
            return BibProblem(key, f"its year {year_text[:20]!r} is not a year")
        year = int(year_text)
    doi = ""
    if doi_text := _field(entry, "doi"):
        try:
            doi = doi_normalise(doi_text)
        except DoiError as error:
            return BibProblem(key, str(error))
    url = _field(entry, "url")
    if not url.lower().startswith(("http://", "https://")) or len(url) > URL_MAX_LENGTH:
        url = ""  # a URL field that is not a short web address is left out, not refused
    return BibEntry(key=key, title=title, authors=authors, year=year, venue=venue, doi=doi, url=url)

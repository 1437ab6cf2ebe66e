"""The BibTeX upload's entry point (``outputs_import_bibtex``, what the page and the API call)
fuzzed with Hypothesis: whatever the bytes, it either refuses the whole file with a
``BibtexError`` and adds nothing, or accounts for every entry the parser found, added or left
out with a reason. Never another exception (a 500)."""

from __future__ import annotations

import bibtexparser
import pytest
from bibtexparser.model import Entry, ParsingFailedBlock
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocations.models import ResearchOutput
from allocations.outputs.bibtex import BibtexError
from allocations.outputs.services import outputs_import_bibtex

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Pieces BibTeX is made of, and pieces that break it.
PIECES = st.sampled_from([
    "@article", "@inproceedings", "@misc", "@string", "@comment", "@preamble", "@", "{", "}",
    "(", ")", ",", "=", '"', "#", "%", "\\", "\\'e", '{\\"u}', "\n", " ", "title", "author",
    "year", "doi", "journal", "url", "10.1234/", "doi:10.5555/x", "https://doi.org/10.1/x",
    "2024", "20x4", "key", " and ", "é", "\u202e", "\x7f", "\t",
])  # fmt: skip
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=80).map("".join)
VALUE = st.one_of(st.text(max_size=30), PIECES, st.just("10.1234/same"))


def _entry(kind: str, key: str, fields: list[tuple[str, str]]) -> str:
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{kind}{{{key},\n{body}}}\n"


ENTRY = st.builds(
    _entry,
    st.sampled_from(["article", "inproceedings", "misc", "book", "Weird"]),
    st.text(alphabet="abcxyz019:-_", max_size=6),
    st.lists(st.tuples(st.sampled_from(["title", "author", "year", "doi", "journal", "url",
                                        "booktitle", "note"]), VALUE), max_size=6),
)  # fmt: skip
FILES = st.one_of(
    st.binary(max_size=600),
    TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.lists(ENTRY, max_size=12).map(lambda entries: "".join(entries).encode("utf-8", "surrogatepass")),  # noqa: E501
)  # fmt: skip


def _blocks(content: bytes) -> int:
    """How many entries bibtexparser finds, read or failed: the oracle for the count."""
    library = bibtexparser.parse_string(content.decode("utf-8-sig"))
    return sum(isinstance(block, Entry | ParsingFailedBlock) for block in library.blocks)


@pytest.mark.django_db
@FUZZ
@given(content=FILES)
def test_every_entry_is_added_or_left_out_with_a_reason_and_nothing_else_happens(centre, content):
    with transaction.atomic():
        before = ResearchOutput.objects.count()
        try:
            result = outputs_import_bibtex(project=centre.p3, actor=centre.alice, content=content)
        except BibtexError:
            assert ResearchOutput.objects.count() == before  # refused whole, with its message
        else:
            assert len(result.added) + len(result.problems) == _blocks(content)
            assert all(problem.reason and problem.key for problem in result.problems)
            assert ResearchOutput.objects.count() == before + len(result.added)
            dois = [output.doi for output in result.added if output.doi]
            assert len(dois) == len(set(dois))
        transaction.set_rollback(True)

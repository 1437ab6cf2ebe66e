"""What every page's HTML must hold for people who use a keyboard or a screen reader, read
from the pages themselves (the Django test client, every page of the permission matrix as
every role that may read it): a skip link to ``<main id="content">``, every radio group in a
fieldset with a legend, a label on every control, and every chart named and described by its
text alternative. axe-core checks the drawn pages in Chromium (tests/browser/
test_accessibility.py); this is the fast check of the structure, and it says where to look.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test.html import Element, parse_html

from tests.pages.conftest import Site, client_for
from tests.pages.test_permission_matrix import MATRIX, ROLES, rare_objects_make

pytestmark = pytest.mark.django_db

# JSON, a decision letter's PDF, and the research outputs' CSV and BibTeX files
NOT_PAGES = {
    "healthz", "readyz", "accounting:cost-ratio-live", "allocations:request-letter",
    "allocations:output-export-csv", "allocations:output-export-bibtex",
}  # fmt: skip
UNLABELLED_TYPES = {"hidden", "submit", "button", "reset", "image"}  # their value is the label


def _walk(node: Element, ancestors: tuple[Element, ...] = ()) -> Iterator[tuple[Element, tuple]]:
    yield node, ancestors
    for child in node.children:
        if isinstance(child, Element):
            yield from _walk(child, (*ancestors, node))


def _text(node: Element | str) -> str:
    if isinstance(node, str):
        return node.strip()
    return " ".join(filter(None, (_text(child) for child in node.children)))


def _attrs(node: Element) -> dict[str, str]:
    return {name: value or "" for name, value in node.attributes}


def problems_of(html: str) -> list[str]:
    """What the page lacks, one line per element."""
    elements = list(_walk(parse_html(html)))
    ids = {_attrs(node).get("id") for node, _ in elements} - {None}
    labelled = {
        _attrs(node)["for"]
        for node, _ in elements
        if node.name == "label" and _attrs(node).get("for") and _text(node)
    }
    problems = []

    focusable = [
        node
        for node, _ in elements
        if (node.name == "a" and "href" in _attrs(node))
        or node.name in {"button", "input", "select", "textarea"}
    ]
    skip = focusable[0] if focusable else None
    if skip is None or _attrs(skip).get("href") != "#content" or _text(skip) != "Skip to content":
        problems.append("the first link is not 'Skip to content' (href=#content)")
    mains = [node for node, _ in elements if _attrs(node).get("id") == "content"]
    if [node.name for node in mains] != ["main"]:
        problems.append(f"#content should be the one <main>, not {[n.name for n in mains]}")

    for node, ancestors in elements:
        attrs = _attrs(node)
        shown = f"<{node.name} {' '.join(f'{k}={v!r}' for k, v in attrs.items())}>"
        if node.name == "input" and attrs.get("type") == "radio":
            fieldsets = [a for a in ancestors if a.name == "fieldset"]
            legends = [
                child
                for child in (fieldsets[-1].children if fieldsets else [])
                if isinstance(child, Element) and child.name == "legend" and _text(child)
            ]
            if not legends:
                problems.append(f"radio outside a fieldset with a legend: {shown}")
        if node.name in {"input", "select", "textarea"} and (
            attrs.get("type") not in UNLABELLED_TYPES
        ):
            named = (
                attrs.get("id") in labelled
                or any(a.name == "label" and _text(a) for a in ancestors)
                or attrs.get("aria-label", "").strip()
                or attrs.get("aria-labelledby") in ids
            )
            if not named:
                problems.append(f"control without a label: {shown}")
        if "data-figure" in attrs:
            if not attrs.get("aria-label", "").strip():
                problems.append(f"chart without a name (aria-label): {shown}")
            if attrs.get("aria-describedby") not in ids:
                problems.append(
                    f"chart not described by its data table or the figures beside it: {shown}"
                )
    return problems


def test_the_checks_find_what_is_missing() -> None:
    page = (
        '<a href="/">Home</a><main><input type="radio" name="score" value="1">'
        '<select name="cluster"></select><label for="x"></label><input id="x" name="x">'
        '<div data-figure="d" aria-label="Usage" aria-describedby="nowhere"></div></main>'
    )
    assert problems_of(page) == [
        "the first link is not 'Skip to content' (href=#content)",
        "#content should be the one <main>, not []",
        "radio outside a fieldset with a legend: <input name='score' type='radio' value='1'>",
        "control without a label: <input name='score' type='radio' value='1'>",
        "control without a label: <select name='cluster'>",
        "control without a label: <input id='x' name='x'>",
        "chart not described by its data table or the figures beside it: "
        "<div aria-describedby='nowhere' aria-label='Usage' data-figure='d'>",
    ]


def test_every_page_has_a_skip_link_labelled_controls_radio_fieldsets_and_described_charts(
    site: Site,
) -> None:
    rare_objects_make(site)
    readers = {
        name: entry.read
        for name, entry in sorted(MATRIX.items())
        if entry.read is not None and not name.startswith("api:") and name not in NOT_PAGES
    }
    urls = {name: MATRIX[name].url(site) for name in readers}
    pages = [("login", "/accounts/login/", "anonymous")] + [
        (name, urls[name], role)
        for name, roles in readers.items()
        for role in ROLES
        if role in roles
    ]
    found = []
    for name, url, role in pages:
        response = client_for(site.users.get(role)).get(url)
        assert response.status_code == 200, f"{name} {url} as {role}: {response.status_code}"
        found += [f"{name} {url} as {role}: {p}" for p in problems_of(response.content.decode())]
    assert len(pages) > 80
    assert not found, "\n".join(found)

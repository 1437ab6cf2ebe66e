"""The optional DOI lookup against a real HTTP server on 127.0.0.1 (started by the test, no
mock): a citation fills the form, every failure says why and never blocks saving, and the
form offers no lookup while ``PORTAL_DOI_LOOKUP_URL`` is empty (the default)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client

from allocations.models import ResearchOutput
from allocations.outputs.lookup import CSL_JSON, DoiLookupError, doi_lookup

CSL = {
    "type": "article-journal",
    "title": "Coral reefs at   night",
    "author": [{"family": "Müller", "given": "Jörg"}, {"literal": "The Reef Consortium"}],
    "container-title": ["Journal of Coral Science"],
    "issued": {"date-parts": [[2024, 3, 1]]},
}


class Resolver(BaseHTTPRequestHandler):
    accepts: list[str] = []

    def do_GET(self) -> None:
        Resolver.accepts.append(self.headers.get("Accept", ""))
        if self.path == "/10.1234/found":
            self._answer(200, json.dumps(CSL).encode(), CSL_JSON)
        elif self.path == "/10.1234/slow":
            time.sleep(2)
            self._answer(200, json.dumps(CSL).encode(), CSL_JSON)
        elif self.path == "/10.1234/html":
            self._answer(200, b"<html>a landing page</html>", "text/html")
        elif self.path == "/10.1234/broken":
            self._answer(500, b"oops", "text/plain")
        else:
            self._answer(404, b"DOI not found", "text/plain")

    def _answer(self, code: int, body: bytes, kind: str) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def resolver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Resolver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_citation_is_read_into_title_authors_year_and_venue(resolver):
    Resolver.accepts.clear()
    citation = doi_lookup(doi="10.1234/found", resolver=resolver, timeout_seconds=2)
    assert citation.title == "Coral reefs at night"
    assert citation.authors == "Müller, Jörg and The Reef Consortium"
    assert (citation.year, citation.venue) == (2024, "Journal of Coral Science")
    assert Resolver.accepts == [CSL_JSON]


@pytest.mark.parametrize(
    ("doi", "words"),
    [
        ("10.1234/missing", "10.1234/missing is not known there"),
        ("10.1234/broken", "answered 500"),
        ("10.1234/html", "did not answer a citation"),
        ("10.1234/slow", "timed out"),
    ],
)
def test_each_failure_says_why(resolver, doi, words):
    with pytest.raises(DoiLookupError, match=words):
        doi_lookup(doi=doi, resolver=resolver, timeout_seconds=1)


def test_no_server_at_all_is_a_failure_in_words():
    with pytest.raises(DoiLookupError, match="the DOI lookup failed"):
        doi_lookup(doi="10.1234/x", resolver="http://127.0.0.1:9/", timeout_seconds=1)


def _pi(centre) -> Client:
    client = Client()
    client.force_login(centre.alice)
    return client


NEW = "/allocations/projects/pawsey0003/outputs/new/"


def test_the_form_offers_no_lookup_by_default(centre, settings):
    assert settings.PORTAL_DOI_LOOKUP_URL == ""
    page = _pi(centre).get(NEW).content.decode()
    assert "Fill from DOI" not in page
    # A lookup asked anyway (an old form) saves as usual.
    response = _pi(centre).post(NEW, {"kind": "other", "title": "A talk", "lookup": "1"})
    assert response.status_code == 302
    assert ResearchOutput.objects.get().title == "A talk"


def test_fill_from_doi_fills_the_form_and_saves_nothing(centre, settings, resolver):
    settings.PORTAL_DOI_LOOKUP_URL = resolver
    pi = _pi(centre)
    assert "Fill from DOI" in pi.get(NEW).content.decode()
    page = pi.post(NEW, {"kind": "publication", "title": "", "doi": "https://doi.org/10.1234/FOUND",
                         "lookup": "1"}).content.decode()  # fmt: skip
    assert 'value="Coral reefs at night"' in page
    assert "Müller, Jörg and The Reef Consortium" in page
    assert 'value="2024"' in page
    assert 'value="Journal of Coral Science"' in page
    assert not ResearchOutput.objects.exists()


def test_a_failed_lookup_says_why_and_the_output_is_still_saved_by_hand(centre, settings, resolver):
    settings.PORTAL_DOI_LOOKUP_URL = resolver
    pi = _pi(centre)
    body = {"kind": "publication", "title": "By hand", "doi": "10.1234/missing"}
    page = pi.post(NEW, {**body, "lookup": "1"}).content.decode()
    assert "10.1234/missing is not known there" in page
    assert 'value="By hand"' in page
    saved = pi.post(NEW, body)
    assert saved.status_code == 302
    assert ResearchOutput.objects.get().doi == "10.1234/missing"

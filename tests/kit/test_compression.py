"""Data answers are gzipped for clients that accept it; pages and small answers never."""

from __future__ import annotations

import gzip
import json

from django.http import HttpResponse, JsonResponse
from django.test import RequestFactory

from kit.compression import KEPT_BYTES, DataGZipMiddleware, gzip_kept, gzip_with_random_header

BIG = {"starts": [f"2026-01-01T{hour % 24:02d}:00:00Z" for hour in range(2000)]}


def _through(response, accept="gzip, deflate"):
    request = RequestFactory().get("/api/v1/utilisation/", HTTP_ACCEPT_ENCODING=accept)
    return DataGZipMiddleware(lambda _request: response)(request)


def test_a_large_json_answer_is_gzipped_and_reads_back_the_same():
    answer = _through(JsonResponse(BIG))
    assert answer["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in answer["Vary"]
    assert int(answer["Content-Length"]) == len(answer.content) < len(json.dumps(BIG)) / 5
    assert json.loads(gzip.decompress(answer.content)) == BIG


def test_a_page_is_never_compressed():
    page = HttpResponse("<p>" + "csrf " * 2000 + "</p>", content_type="text/html")
    answer = _through(page)
    assert not answer.has_header("Content-Encoding")
    assert answer.content.startswith(b"<p>csrf")


def test_a_client_that_does_not_accept_gzip_gets_plain_json():
    answer = _through(JsonResponse(BIG), accept="identity")
    assert not answer.has_header("Content-Encoding")
    assert json.loads(answer.content) == BIG
    assert "Accept-Encoding" in answer["Vary"]


def test_a_small_answer_is_left_as_it_is():
    answer = _through(JsonResponse({"database": "ok"}))
    assert not answer.has_header("Content-Encoding")


def test_the_same_content_compresses_to_different_lengths():
    content = json.dumps(BIG).encode()
    lengths = {len(gzip_with_random_header(content)) for _ in range(20)}
    assert len(lengths) > 1  # the random header: a length tells an eavesdropper nothing
    assert all(gzip.decompress(gzip_with_random_header(content)) == content for _ in range(3))


def test_a_large_answer_is_compressed_once_and_a_different_one_on_its_own():
    hours = KEPT_BYTES // 20 + 1
    year = {"starts": [f"2026-01-01T{hour % 24:02d}:00:00Z" for hour in range(hours)]}
    first, again = _through(JsonResponse(year)), _through(JsonResponse(year))
    assert len(json.dumps(year)) >= KEPT_BYTES
    assert first.content == again.content  # kept: the same bytes, random header included
    assert json.loads(gzip.decompress(again.content)) == year
    other = {"starts": [*year["starts"], "2027-01-01T00:00:00Z"]}
    assert json.loads(gzip.decompress(_through(JsonResponse(other)).content)) == other


def test_only_the_most_recent_large_answers_are_kept():
    answers = [bytes([number]) * KEPT_BYTES for number in range(20)]
    first = gzip_kept(answers[0])
    assert gzip_kept(answers[0]) is first  # kept
    for answer in answers[1:]:
        gzip_kept(answer)
    assert gzip_kept(answers[-1]) is gzip_kept(answers[-1])
    again = gzip_kept(answers[0])  # dropped meanwhile: compressed anew
    assert again is not first
    assert gzip.decompress(again) == answers[0]


def test_an_answer_named_by_its_identity_is_kept_under_it_without_a_digest():
    content = json.dumps({"starts": ["x" * 64] * (KEPT_BYTES // 64)}).encode()
    named = gzip_kept(content, identity="report 1")
    assert gzip_kept(content, identity="report 1") is named  # kept under the name
    assert gzip.decompress(named) == content
    # Another name is another entry, even for the same bytes; the digest's entry is its own.
    assert gzip_kept(content, identity="report 2") is not named
    assert gzip_kept(content) is not named


def test_the_middleware_takes_the_identity_a_view_gives():
    content = json.dumps({"starts": ["y" * 64] * (KEPT_BYTES // 64)})
    answers = []
    for _ in range(2):
        response = HttpResponse(content, content_type="application/json")
        response.content_identity = "the same columns"
        answers.append(_through(response))
    assert answers[0].content == answers[1].content
    assert gzip.decompress(answers[1].content).decode() == content

"""Data answers (JSON, CSV) compressed for clients that accept gzip; pages never.

A year of Q(T) by the hour is about 3 MB of JSON and under 100 kB compressed. Pages (HTML) are
left alone: they carry the CSRF token beside text a visitor can choose, which compression would
let an eavesdropper guess (BREACH). Data answers carry no such token; like Django's own
``GZipMiddleware`` each one still gets a random number of bytes in its gzip header, so its
length tells nothing. Level 1: a worker spends a few milliseconds, not tens, on 3 MB.
nginx (deploy/nginx.conf.template) passes the compressed answer on as it is.

A large answer (:data:`KEPT_BYTES` or more: a year of Q(T) by the hour, a long CSV) is
compressed once per content and process: its gzip is kept under the content's digest (2.1 ms
for a year of Q(T) by the hour, where compressing it takes 5.8 ms), and the next request for the
same content gets the same bytes, random header included. A different content gets a header
of its own, so a length still tells nothing of a content it was not computed from. A view that
knows what its content was built from says so (``response.content_identity``, text that names
the content: the same identity, the same bytes); the gzip is then kept under that name and the
content is not digested at all (2 ms for a year of Q(T) by the hour).
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.middleware.gzip import GZipMiddleware
from django.utils.cache import patch_vary_headers
from django.utils.regex_helper import _lazy_re_compile
from django.utils.text import _get_random_filename  # type: ignore[attr-defined]

from kit.kept import Kept

COMPRESSED_TYPES = ("application/json", "text/csv")
MIN_BYTES = 1024  # below this, the gzip header and a CPU's time outweigh what is saved
_ACCEPTS_GZIP = _lazy_re_compile(r"\bgzip\b")
KEPT_BYTES = 256 * 1024  # answers at least this large are compressed once per content
_KEPT_ANSWERS = 16  # per process: at most a few MB of compressed answers
_kept: Kept[bytes, bytes] = Kept(_KEPT_ANSWERS)


def gzip_with_random_header(content: bytes, *, max_random_bytes: int = 100) -> bytes:
    """``content`` gzipped at level 1 with a random file name of up to ``max_random_bytes``
    in the header (what Django's ``compress_string`` does, at its level 6)."""
    compressed = memoryview(gzip.compress(content, compresslevel=1, mtime=0))
    header = bytearray(compressed[:10])
    header[3] = gzip.FNAME
    return bytes(header) + _get_random_filename(max_random_bytes) + b"\x00" + compressed[10:]


def gzip_kept(content: bytes, *, max_random_bytes: int = 100, identity: str | None = None) -> bytes:
    """:func:`gzip_with_random_header` of ``content``, computed once per content for large
    ones: the last :data:`_KEPT_ANSWERS` are kept, the least recently asked for dropped. With
    ``identity`` (what the caller built ``content`` from, named so that the same identity is
    always the same content) it is kept under that name instead of the content's digest."""
    if len(content) < KEPT_BYTES:
        return gzip_with_random_header(content, max_random_bytes=max_random_bytes)
    if identity is not None:
        digest = b"identity:" + identity.encode()
    else:
        digest = hashlib.blake2b(content, digest_size=32).digest()
    compressed = _kept.get(digest)
    if compressed is None:
        compressed = gzip_with_random_header(content, max_random_bytes=max_random_bytes)
        _kept.put(digest, compressed)
    return compressed


class DataGZipMiddleware:
    """Compress a JSON or CSV answer of at least :data:`MIN_BYTES` when the client accepts
    gzip; leave everything else (pages, streams, files) as it is."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        content_type = response.get("Content-Type", "").split(";")[0].strip()
        if (
            response.streaming
            or content_type not in COMPRESSED_TYPES
            or response.has_header("Content-Encoding")
            or len(response.content) < MIN_BYTES
        ):
            return response
        patch_vary_headers(response, ("Accept-Encoding",))
        if not _ACCEPTS_GZIP.search(request.META.get("HTTP_ACCEPT_ENCODING", "")):
            return response
        response.content = gzip_kept(
            response.content, max_random_bytes=GZipMiddleware.max_random_bytes,
            identity=getattr(response, "content_identity", None),
        )  # fmt: skip
        response.headers["Content-Length"] = str(len(response.content))
        etag = response.get("ETag")
        if etag and etag.startswith('"'):
            response.headers["ETag"] = "W/" + etag
        response.headers["Content-Encoding"] = "gzip"
        return response

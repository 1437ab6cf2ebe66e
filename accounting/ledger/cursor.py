"""The jobs API's keyset cursor (docs/api.md, "Jobs"): where a page of jobs, newest end first,
stopped, as the last job's ``end`` (None while it runs) and ``id``. Written into the ``next``
link as an opaque URL-safe text; read back strictly, so a cursor the API did not write is a
clear refusal, never a wrong page."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime

from kit.errors import ApplicationError


class CursorError(ApplicationError):
    """A cursor the jobs API did not write (a 400 on the ``cursor`` parameter)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="cursor")


@dataclass(frozen=True)
class JobCursor:
    end: datetime | None  # None: a running job (running jobs come first)
    pk: int


def cursor_encode(cursor: JobCursor) -> str:
    end = "" if cursor.end is None else cursor.end.isoformat()
    return base64.urlsafe_b64encode(f"{end},{cursor.pk}".encode()).decode().rstrip("=")


def cursor_decode(text: str) -> JobCursor:
    """The cursor ``text`` holds; :class:`CursorError` for anything :func:`cursor_encode` did
    not write (a time without its zone, an id that is not a whole number, other text)."""
    try:
        plain = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
        end_text, pk_text = plain.split(",")
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise CursorError(_REFUSAL) from error
    if not (pk_text.isascii() and pk_text.isdigit() and len(pk_text) <= 18):
        raise CursorError(_REFUSAL)
    end = None
    if end_text:
        try:
            end = datetime.fromisoformat(end_text)
        except ValueError as error:
            raise CursorError(_REFUSAL) from error
        if end.tzinfo is None:
            raise CursorError(_REFUSAL)
    return JobCursor(end=end, pk=int(pk_text))


_REFUSAL = "not a cursor of this list: start again without it and follow the next links"

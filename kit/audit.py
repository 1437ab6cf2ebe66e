"""Audit entries written in bulk, as django-auditlog's signals would have written them one save
at a time. Which models are audited, and who reads what, is the site's business
(``portal/audit.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Model


def audit_rows(
    rows: Sequence[Model],
    *,
    action: int,
    changes_of: Callable[[Any], dict],
    actor: User | None = None,
) -> None:
    """One audit entry per row, all in one INSERT, as auditlog's signals would have written
    them one save at a time (a read, a diff and an insert each: seconds for the 11,000 actions
    of a large Slurm plan). ``changes_of(row)`` gives ``{field: [before, after]}`` as strings.
    The actor is given, not read from auditlog's context variable: auditlog leaves a request's
    actor in it after the request, so a later task would be credited to that person."""
    from auditlog.cid import get_cid
    from auditlog.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    if not rows:
        return
    content_type = ContentType.objects.get_for_model(rows[0])
    cid = get_cid()
    LogEntry.objects.bulk_create(
        [
            LogEntry(
                content_type=content_type, object_pk=str(row.pk), object_id=row.pk,
                object_repr=str(row), action=action, changes=changes_of(row),
                actor=actor, actor_email=getattr(actor, "email", None), cid=cid,
                additional_data=getattr(row, "get_additional_data", dict)(),
            )
            for row in rows
        ],
        batch_size=2000,
    )  # fmt: skip

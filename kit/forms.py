"""What every page does with a form that a service refused, and with an uploaded text file."""

from __future__ import annotations

from typing import Any

from django import forms

from kit.errors import ApplicationError


def error_on_field(form: forms.Form, error: ApplicationError) -> None:
    """Show a domain rule's sentence on the field it is about (``error.field``), or above the
    form when the form has no such field; the form keeps what was typed."""
    field = error.field if error.field in form.fields else None
    form.add_error(field, str(error))


def uploaded_text(upload: Any, *, max_bytes: int, what: str) -> str | None:
    """An uploaded file's text (None without a file), refused in a sentence when it is larger
    than ``max_bytes`` or not UTF-8."""
    if not upload:
        return None
    if upload.size > max_bytes:
        raise forms.ValidationError(f"{what} is at most {max_bytes // (1024 * 1024)} MiB")
    try:
        return str(upload.read().decode("utf-8"))
    except UnicodeDecodeError:
        raise forms.ValidationError("the file is not UTF-8 text") from None

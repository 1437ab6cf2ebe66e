"""What every page does with a form that a service refused."""

from __future__ import annotations

from django import forms

from kit.errors import ApplicationError


def error_on_field(form: forms.Form, error: ApplicationError) -> None:
    """Show a domain rule's sentence on the field it is about (``error.field``), or above the
    form when the form has no such field; the form keeps what was typed."""
    field = error.field if error.field in form.fields else None
    form.add_error(field, str(error))

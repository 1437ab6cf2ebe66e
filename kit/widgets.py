"""Form widgets shared by the pages of every app."""

from __future__ import annotations

from typing import Any

from django import forms


class IsoDateInput(forms.DateInput):
    """``<input type="date">`` with its value as ``YYYY-MM-DD``, the only form a browser's date
    input accepts. Django's DateInput writes the locale's format (``17/11/2026`` in en-gb),
    which the browser rejects: the field then shows blank and the page's window seems empty."""

    input_type = "date"

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs=attrs, format="%Y-%m-%d")


class IsoDateTimeInput(forms.DateTimeInput):
    """``<input type="datetime-local">`` with its value as ``YYYY-MM-DDTHH:MM``, the form a
    browser's date-and-time input accepts (for the reason ``IsoDateInput`` gives)."""

    input_type = "datetime-local"

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs=attrs, format="%Y-%m-%dT%H:%M")


class UsernameField(forms.ModelChoiceField):
    """A person named by their username, typed in a text box (a list of every account would be
    long and would show everyone's name to whoever reads the page's source)."""

    def __init__(self, **kwargs: Any) -> None:
        from django.contrib.auth.models import User

        kwargs.setdefault("widget", forms.TextInput(attrs={"autocomplete": "off"}))
        kwargs.setdefault(
            "error_messages", {"invalid_choice": "no one with this username can sign in"}
        )
        super().__init__(
            queryset=User.objects.filter(is_active=True), to_field_name="username", **kwargs
        )

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

"""Forms of research outputs: one output (every kind in one form, the fields of other kinds
left empty), and a BibTeX upload. The rules are ``output_details_check``'s; a form only puts
its sentence beside the field it names."""

from __future__ import annotations

from typing import Any

from django import forms

from allocations.models import ResearchOutput
from allocations.outputs.bibtex import MAX_BIBTEX_BYTES
from allocations.outputs.doi import DOI_FORMAT, DoiError
from allocations.outputs.services import (
    DETAIL_FIELDS,
    OutputDetails,
    OutputError,
    output_details_check,
)


class OutputForm(forms.ModelForm):
    """An output; ``details()`` gives what the services take once the form is valid."""

    url = forms.URLField(
        max_length=500, required=False, assume_scheme="https", label="URL",
        help_text="required for a data set and software",
    )  # fmt: skip

    class Meta:
        model = ResearchOutput
        fields = list(DETAIL_FIELDS)
        widgets = {
            "authors": forms.Textarea(attrs={"rows": 2}),
            "period_start": forms.DateInput(attrs={"type": "date"}),
            "period_end": forms.DateInput(attrs={"type": "date"}),
        }
        help_texts = {
            "doi": DOI_FORMAT,
            "funder": "funding grants: who funds it",
            "currency": "three letters, such as AUD",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["year"].widget.attrs.update(min=1000, max=2999)
        self.fields["year"].validators.append(_year_check)

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        try:
            checked = output_details_check(self._details(cleaned))
        except (OutputError, DoiError) as error:
            self.add_error(error.field if error.field in self.fields else None, str(error))
            return cleaned
        cleaned.update({name: getattr(checked, name) for name in DETAIL_FIELDS})
        return cleaned

    def _details(self, cleaned: dict[str, Any]) -> OutputDetails:
        return OutputDetails(**{name: cleaned.get(name) or _empty(name) for name in DETAIL_FIELDS})

    def details(self) -> OutputDetails:
        """The valid form's output, for ``output_add`` and ``output_update``."""
        return self._details(self.cleaned_data)


def _empty(name: str) -> Any:
    """The empty value of a field of ``OutputDetails``: None for numbers and dates."""
    return None if name in {"year", "amount", "period_start", "period_end"} else ""


def _year_check(year: int) -> None:
    if not 1000 <= year <= 2999:
        raise forms.ValidationError("a year has four digits, such as 2024")


class BibtexUploadForm(forms.Form):
    file = forms.FileField(
        label="BibTeX file", help_text=f"a .bib file of at most {MAX_BIBTEX_BYTES // 1024} KiB"
    )

    def clean_file(self) -> bytes:
        """The file's bytes, read up to one byte past the limit (``bibtex_read`` refuses a
        larger file with the message)."""
        return bytes(self.cleaned_data["file"].read(MAX_BIBTEX_BYTES + 1))

"""Forms of the energy and carbon pages."""

from __future__ import annotations

from django import forms

MAX_SERIES_BYTES = 20 * 1024 * 1024  # ten years of a 5-minute series is about 30 MB: split it


class GridIntensityUploadForm(forms.Form):
    file = forms.FileField(
        help_text="CSV with the columns start (ISO 8601; without an offset, the cluster's local"
        " time) and g_per_kwh"
    )
    replace = forms.BooleanField(
        required=False, help_text="also remove the steps of the series this file does not have"
    )

    def clean_file(self) -> object:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_SERIES_BYTES:
            raise forms.ValidationError(
                f"The file is larger than {MAX_SERIES_BYTES // (1024 * 1024)} MiB: load it with"
                " the grid_intensity_load command."
            )
        return upload

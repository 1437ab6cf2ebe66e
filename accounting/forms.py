from __future__ import annotations

from django import forms

from accounting.models import Cluster

MAX_UPLOAD_BYTES = 2 * 1024**3


class SacctUploadForm(forms.Form):
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), empty_label=None)
    file = forms.FileField(help_text="sacct --parsable2 output with its header line")
    create_projects = forms.BooleanField(
        required=False, help_text="create missing projects from accounts instead of quarantining"
    )

    def clean_file(self) -> object:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                "the file is larger than 2 GiB; import it with import_sacct"
            )
        head = upload.read(4096)
        upload.seek(0)
        if b"|" not in head or b"JobID" not in head:
            raise forms.ValidationError(
                "this does not look like sacct --parsable2 output (no header with JobID)"
            )
        return upload

from __future__ import annotations

from typing import Any

from django import forms

from accounting.ledger.sacct import ACTIVE_STATES, FINISHED_STATES
from accounting.models import Cluster, Partition
from kit.widgets import IsoDateInput

MAX_UPLOAD_BYTES = 2 * 1024**3


class SacctUploadForm(forms.Form):
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), empty_label=None)
    file = forms.FileField(
        help_text="sacct --parsable2 output with its header line, or sacct --json output"
    )
    columns = forms.CharField(
        required=False,
        max_length=2000,
        help_text="only for a --noheader dump: the columns it was made with, e.g."
        " JobID,JobIDRaw,User,Account,...",
    )
    delimiter = forms.CharField(
        required=False,
        max_length=8,
        strip=False,
        help_text="only for a --noheader dump made with sacct --delimiter (default |)",
    )
    create_projects = forms.BooleanField(
        required=False, help_text="create missing projects from accounts instead of quarantining"
    )
    import_again = forms.BooleanField(
        required=False,
        help_text="import a file whose content was imported before, on purpose",
    )

    def clean_file(self) -> object:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                "the file is larger than 2 GiB; import it with import_sacct"
            )
        head = upload.read(4096)
        upload.seek(0)
        if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
            return upload  # sacct --json: checked as it is read
        if b"jobid" not in head.lower() and not self.data.get("columns"):
            raise forms.ValidationError(
                "this does not look like sacct output: no header with JobID (for a --noheader"
                " dump, give its columns)"
            )
        return upload


# The states a researcher looks for, in their words. The rarer ones (BOOT_FAIL, DEADLINE,
# REQUEUED, ...) still filter from the query string and are listed only once chosen.
COMMON_STATES = {
    "COMPLETED": "completed", "FAILED": "failed", "TIMEOUT": "ran out of time",
    "CANCELLED": "cancelled", "OUT_OF_MEMORY": "out of memory", "NODE_FAIL": "node failure",
    "PREEMPTED": "preempted", "RUNNING": "running", "PENDING": "pending",
}  # fmt: skip


class JobFilterForm(forms.Form):
    """The jobs table's filters: all optional, all in the query string."""

    search = forms.CharField(
        required=False, max_length=200, label="Job ID or name",
        help_text="12345, an array task 12345_7, or words of the job's name",
    )  # fmt: skip
    user = forms.ChoiceField(required=False)
    partition = forms.ModelChoiceField(
        queryset=Partition.objects.none(), required=False, empty_label="any partition"
    )
    state = forms.ChoiceField(required=False)
    ended_from = forms.DateField(required=False, label="Ended from", widget=IsoDateInput())
    ended_to = forms.DateField(
        required=False,
        label="Ended to (inclusive)",
        widget=IsoDateInput(),
    )

    def __init__(
        self, *args: Any, usernames: list[str], partitions: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        user_field = self.fields["user"]
        assert isinstance(user_field, forms.ChoiceField)
        user_field.choices = [("", "any user"), *((name, name) for name in usernames)]
        partition_field = self.fields["partition"]
        assert isinstance(partition_field, forms.ModelChoiceField)
        partition_field.queryset = (
            partitions
            if partitions is not None
            else Partition.objects.select_related("cluster").order_by("cluster__name", "name")
        )
        state_field = self.fields["state"]
        assert isinstance(state_field, forms.ChoiceField)
        choices = [("", "any state"), *COMMON_STATES.items()]
        chosen = self.data.get("state", "")
        if chosen in (ACTIVE_STATES | FINISHED_STATES) - COMMON_STATES.keys():
            choices.append((chosen, chosen))
        state_field.choices = choices

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("ended_from"), data.get("ended_to")
        if start and end and start > end:
            raise forms.ValidationError("“Ended from” must not be after “ended to”.")
        return data


class EfficiencyPeriodForm(forms.Form):
    """The efficiency pages' period: days the jobs ended, both ends included."""

    start = forms.DateField(required=False, label="From", widget=IsoDateInput())
    end = forms.DateField(required=False, label="To (inclusive)", widget=IsoDateInput())

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start and end and start > end:
            raise forms.ValidationError("“From” must not be after “to”.")
        return data

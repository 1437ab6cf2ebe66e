"""Forms of staff's project pages. They read the input's types; the rules (a code that is a
Slurm account and not taken, the PI stays) are the services' in ``projects/services.py``."""

from __future__ import annotations

from django import forms

from kit.widgets import UsernameField
from projects.models import INVITABLE_ROLES


class ProjectForm(forms.Form):
    code = forms.CharField(
        max_length=64, label="Code", help_text="the project's Slurm account; it never changes"
    )
    title = forms.CharField(max_length=300, required=False)
    field_of_science = forms.CharField(max_length=120, required=False, label="Field of science")
    finance_code = forms.CharField(
        max_length=64,
        required=False,
        label="Finance code",
        help_text="the finance office's code the project is billed to (monthly statements)",
    )
    pi = UsernameField(required=False, label="PI (username)")


class ProjectEditForm(ProjectForm):
    """The code is the Slurm account of every job booked to the project: not editable."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        del self.fields["code"]


class MemberAddForm(forms.Form):
    user = UsernameField(label="Username")
    role = forms.ChoiceField(choices=INVITABLE_ROLES, initial=INVITABLE_ROLES[0][0])

"""Forms of the project page: the usage chart's step, invitations and member roles."""

from __future__ import annotations

from datetime import date

from django import forms

from kit.forms import uploaded_text
from projects.models import INVITABLE_ROLES, Membership

STEP_CHOICES = [("day", "day"), ("week", "week"), ("month", "month")]


class UsageStepForm(forms.Form):
    step = forms.ChoiceField(choices=STEP_CHOICES, required=False, label="Usage per")


def parse_day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


class InvitationForm(forms.Form):
    email = forms.EmailField(max_length=254, label="E-mail")
    role = forms.ChoiceField(
        choices=INVITABLE_ROLES,
        initial=Membership.Role.MEMBER,
    )


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=INVITABLE_ROLES)


MAX_DRAFT_BYTES = 1024 * 1024


class RateDraftForm(forms.Form):
    """A draft of a cluster's rates: a spec file (uploaded or pasted) and a cost model."""

    file = forms.FileField(
        required=False, label="Spec file", help_text="a cluster spec file (examples/clusters/)"
    )
    spec = forms.CharField(
        required=False,
        label="Or the spec, pasted",
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false", "class": "mono"}),
        help_text="JSON: the cluster's name, time zone and partitions (docs/costs.md)",
    )
    cost_model = forms.CharField(
        required=False,
        label="Draft cost model",
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "mono"}),
        help_text="optional: a cost model (docs/costs.md); empty keeps the current one",
    )
    note = forms.CharField(required=False, max_length=500, label="Note")

    def clean_file(self) -> str | None:
        upload = self.cleaned_data.get("file")
        return uploaded_text(upload, max_bytes=MAX_DRAFT_BYTES, what="a spec file")

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        text = data.get("file") or data.get("spec") or ""
        if not str(text).strip() and not self.errors:
            raise forms.ValidationError("upload a spec file or paste its text")
        data["spec_text"] = text
        return data


class ImpactMonthsForm(forms.Form):
    months = forms.IntegerField(
        min_value=1, max_value=120, required=False, label="Months re-priced", initial=12
    )

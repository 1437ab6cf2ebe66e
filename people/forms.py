"""Forms of a person's own pages: a new API token."""

from __future__ import annotations

from django import forms

from people.models import ApiToken, MailSettings

LIFETIMES = [(7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year")]


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="where it is used, e.g. “su-balance on setonix login nodes”"
    )
    scope = forms.ChoiceField(
        choices=ApiToken.Scope.choices,
        initial=ApiToken.Scope.READ,
        help_text="read-only is enough for su-balance and usage scripts",
    )
    expires_in_days = forms.TypedChoiceField(
        choices=LIFETIMES, coerce=int, initial=90, label="Expires after"
    )


class MailSettingsForm(forms.ModelForm):
    class Meta:
        model = MailSettings
        fields = ["allocation_events", "budget_alerts", "efficiency_summary"]
        labels = {
            "allocation_events": "Allocation requests and decisions",
            "budget_alerts": "Budget alerts",
            "efficiency_summary": "Monthly efficiency summary (PIs)",
        }

"""Forms of a person's own pages: a new API token."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only the lifetimes the centre allows (PORTAL_TOKEN_MAX_DAYS).
        longest = settings.PORTAL_TOKEN_MAX_DAYS
        field = self.fields["expires_in_days"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = [(days, label) for days, label in LIFETIMES if days <= longest] or [
            (longest, f"{longest} days")
        ]


class MailSettingsForm(forms.ModelForm):
    class Meta:
        model = MailSettings
        fields = ["allocation_events", "budget_alerts", "efficiency_summary", "grant_endings"]
        labels = {
            "allocation_events": "Allocation requests and decisions",
            "budget_alerts": "Budget alerts",
            "efficiency_summary": "Monthly efficiency summary (PIs)",
            "grant_endings": "Grants ending and final usage summaries (PIs and managers)",
        }

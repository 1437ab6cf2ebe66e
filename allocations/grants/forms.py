"""Forms of the project page: the usage chart's step, invitations and member roles."""

from __future__ import annotations

from datetime import date

from django import forms

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

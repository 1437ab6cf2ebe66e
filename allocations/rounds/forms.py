"""Forms of the request pages: requests, estimates, reviews and grants. They check input; the
rules of the allocation process stay in the services."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.auth.models import User

from accounting.clusters.forms import QuoteForm, positive
from accounting.models import Partition
from allocations.models import (
    AllocationRequest,
    AllocationRound,
    ResearchOutput,
    Review,
    RoundPool,
    WhatIfDraft,
)
from projects.models import ResourcePool


class RequestCreateForm(forms.Form):
    """A new request of one kind (``kind`` is chosen on the page before the form shows). Which
    fields a kind needs is checked here, so that each missing one gets its message on the
    field; the rules (the grant in force, the next round, once per decision) are the
    services'."""

    NEEDS = {
        "new": ("round",),
        "top_up": ("pool", "su"),
        "extension": ("pool", "new_end", "su"),
        "renewal": (),
        "appeal": (),
    }

    kind = forms.ChoiceField(
        choices=AllocationRequest.Kind.choices, widget=forms.HiddenInput, required=False
    )
    round = forms.ModelChoiceField(
        queryset=AllocationRound.objects.none(), required=False, label="Allocation round"
    )
    pool = forms.ModelChoiceField(
        queryset=ResourcePool.objects.none(), required=False, label="Pool",
        help_text="the pool of the grant in force",
    )  # fmt: skip
    new_end = forms.DateField(
        required=False, label="New end", help_text="the day after the new last day (YYYY-MM-DD)",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    su = forms.DecimalField(
        required=False, label="SU", max_digits=24, decimal_places=6, min_value=Decimal(0),
        widget=forms.TextInput(attrs={"inputmode": "decimal"}),
        error_messages={"invalid": "Enter the SU as a number, e.g. 5000."},
    )  # fmt: skip
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="what the SU are for; whoever decides reads this",
    )

    def __init__(self, *args: Any, kind: str, rounds: Any, pools: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.chosen_kind = kind
        round_field = self.fields["round"]
        assert isinstance(round_field, forms.ModelChoiceField)
        round_field.queryset = rounds
        pool_field = self.fields["pool"]
        assert isinstance(pool_field, forms.ModelChoiceField)
        pool_field.queryset = pools

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in self.NEEDS.get(self.chosen_kind, ()):
            if data.get(name) in (None, "") and name not in self.errors:
                self.add_error(name, "This field is required for this kind of request.")
        return data


def _su_field(label: str, *, required: bool = True) -> forms.DecimalField:
    return forms.DecimalField(
        label=label, required=required, max_digits=24, decimal_places=6,
        min_value=Decimal(0), widget=forms.NumberInput(attrs={"step": "any", "min": 0}),
    )  # fmt: skip


def _belong_to(form: forms.Form, form_id: str) -> None:
    """The form's fields belong to the page's form ``form_id`` (``form=``), wherever they are."""
    if form_id:
        for field in form.fields.values():
            field.widget.attrs["form"] = form_id


def _plain(value: Decimal) -> str:
    """260000.000000 -> "260000" (and never "2.6E+5")."""
    return format(value.normalize(), "f")


class RequestAmountsForm(forms.Form):
    """SU asked for on each pool the round offers, and the justification (a draft's edit)."""

    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)

    def __init__(self, *args: Any, pools: list[RoundPool] | list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pools = pools
        for item in pools:
            # A pool left blank asks for nothing on it (0 SU), not for a second try.
            self.fields[f"pool_{item.pool_id}"] = _su_field(
                f"SU on {item.pool.name}", required=False
            )

    def amounts(self) -> dict[Any, Decimal]:
        return {
            item.pool: self.cleaned_data[f"pool_{item.pool_id}"] or Decimal(0)
            for item in self.pools
        }


class ProgressReportForm(forms.Form):
    """A draft renewal's progress report: its text, and which of the project's research
    outputs it points to (the choices are the project's own; the service checks again)."""

    text = forms.CharField(
        label="Progress report", max_length=50_000, widget=forms.Textarea(attrs={"rows": 8}),
        help_text="what the project did with the grant it renews: results, and how the SU went",
    )  # fmt: skip
    outputs = forms.ModelMultipleChoiceField(
        queryset=ResearchOutput.objects.none(), required=False, label="Research outputs",
        widget=forms.CheckboxSelectMultiple, help_text="the project's outputs this report cites",
    )  # fmt: skip

    def __init__(self, *args: Any, outputs: Any, form_id: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["outputs"]
        assert isinstance(field, forms.ModelMultipleChoiceField)
        field.queryset = outputs
        _belong_to(self, form_id)
        if form_id:  # then every button of the draft sends it: left blank, it blocks none
            self.use_required_attribute = False

    def output_ids(self) -> list[int]:
        return [output.pk for output in self.cleaned_data["outputs"]]


class EstimateForm(forms.Form):
    """One estimate line: jobs x a planned job, priced by the quote engine."""

    partition = forms.TypedChoiceField(coerce=int, label="Partition")
    description = forms.CharField(max_length=200, required=False)
    jobs = forms.IntegerField(min_value=1, max_value=10_000_000, initial=100)
    nodes = forms.IntegerField(min_value=1, max_value=100_000, initial=1)
    hours = forms.DecimalField(
        max_digits=12, decimal_places=4, validators=[positive], initial=Decimal(1)
    )
    cores_per_node = forms.DecimalField(
        required=False, max_digits=10, decimal_places=3, validators=[positive]
    )
    gpus_per_node = forms.IntegerField(required=False, min_value=0, max_value=64)
    memory_per_node = QuoteForm.base_fields["memory_per_node"]
    clean_memory_per_node = QuoteForm.clean_memory_per_node

    def __init__(
        self, *args: Any, partitions: list[Partition], form_id: str = "", **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["partition"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = [(partition.pk, str(partition)) for partition in partitions]
        _belong_to(self, form_id)


class ReviewForm(forms.Form):
    score = forms.TypedChoiceField(
        coerce=int, choices=[(n, f"{n}") for n in range(5, 0, -1)],
        help_text="5 = outstanding, 1 = not fundable",
        widget=forms.RadioSelect,
    )  # fmt: skip
    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)

    @classmethod
    def for_review(cls, review: Review | None, data: Any = None) -> ReviewForm:
        initial = {"score": review.score, "comment": review.comment} if review else {}
        return cls(data, initial=initial)


class GrantForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False,
        help_text="required when the grant differs from the request",
    )  # fmt: skip

    def __init__(self, *args: Any, amounts: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request_amounts = amounts
        reason = self.fields.pop("reason")
        for amount in amounts:
            field = _su_field(f"SU granted on {amount.pool.name}")
            field.initial = _plain(amount.requested_su)
            self.fields[f"pool_{amount.pool_id}"] = field
        self.fields["reason"] = reason

    def granted(self) -> dict[Any, Decimal]:
        return {
            amount.pool: self.cleaned_data[f"pool_{amount.pool_id}"]
            for amount in self.request_amounts
        }


class _MemberField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return str(obj.get_full_name() or obj.username)


class ReviewAssignForm(forms.Form):
    """The chair picks a member of the round's committee to review a request (who may be
    picked, a conflict of interest for one, is the service's rule: ``review_assign``)."""

    reviewer = _MemberField(
        queryset=User.objects.none(), label="Committee member",
        error_messages={"invalid_choice": "Pick a member of the round's committee."},
    )  # fmt: skip

    def __init__(self, *args: Any, members: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        reviewer = self.fields["reviewer"]
        assert isinstance(reviewer, forms.ModelChoiceField)
        reviewer.queryset = members


class WhatIfForm(forms.Form):
    """The chair's what-if: a method and its parameters. Numbers below zero reach the service,
    whose sentence is shown on the field (``what_if.parameters_check``)."""

    method = forms.ChoiceField(choices=WhatIfDraft.Method.choices, initial="pro_rata")
    threshold_su = forms.DecimalField(
        label="Small below (SU)", required=False, max_digits=24, decimal_places=6,
        help_text="small requests protected: requests below it on a pool are granted in full",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )  # fmt: skip
    exponent = forms.DecimalField(
        label="Score exponent k", required=False, max_digits=6, decimal_places=3, initial=1,
        help_text="weighted by score: g(score) = (score / 5) ** k; 0 is pro rata",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )  # fmt: skip
    floor_su = forms.DecimalField(
        label="Floor (SU)", required=False, max_digits=24, decimal_places=6,
        help_text="every request gets at least min(floor, request) on each pool",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )  # fmt: skip

    def parameters(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "method": data["method"],
            "threshold_su": data["threshold_su"] if data["threshold_su"] is not None else 0,
            "exponent": data["exponent"] if data["exponent"] is not None else 1,
            "floor_su": data["floor_su"] if data["floor_su"] is not None else 0,
        }


class WhatIfProposalForm(forms.Form):
    """One proposal of a draft, as the chair changes it."""

    proposed_su = forms.DecimalField(
        label="Proposed SU", max_digits=24, decimal_places=6,
        widget=forms.NumberInput(attrs={"step": "any"}),
    )  # fmt: skip
    reason = forms.CharField(
        required=False, max_length=5000, help_text="required when it differs from the request"
    )

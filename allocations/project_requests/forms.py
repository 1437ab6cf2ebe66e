"""Forms of the project request pages. They check input and keep what was typed; the rules
(who acts, states, pools, amounts) stay in ``allocations.project_requests.services``."""

from __future__ import annotations

from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms

from accounting.clusters.forms import positive
from accounting.clusters.quotes import QuoteRequest
from accounting.models import Partition
from allocations.grants.services import AllocationError
from allocations.models import ProjectRequest, ProjectRequestAmount
from allocations.project_requests.services import EstimateLine, person_named
from projects.models import ResourcePool


def _plain(value: Decimal) -> str:
    """260000.000000 -> "260000" (and never "2.6E+5")."""
    return format(value.normalize(), "f")


def _su_field(label: str, *, required: bool) -> forms.CharField:
    """SU typed as text: anything not a number gets the message on the field (a number input
    would let a browser drop what was typed)."""
    return forms.CharField(
        label=label, required=required, max_length=40,
        widget=forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off"}),
    )  # fmt: skip


def _su_clean(form: forms.Form, name: str) -> Decimal | None:
    text = (form.cleaned_data.get(name) or "").strip().replace(",", "")
    if not text:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        form.add_error(name, "Enter the SU as a number, e.g. 50000.")
        return None
    if not value.is_finite() or value < 0:
        form.add_error(name, "Enter the SU as a number of 0 or more.")
        return None
    return value


class ProjectRequestForm(forms.Form):
    """A new project: what it is, who leads it, SU per pool, one estimate line (optional)."""

    title = forms.CharField(max_length=300)
    abstract = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}), max_length=50_000,
        help_text="what the project will compute and why; the approvers read this",
    )  # fmt: skip
    field_of_science = forms.CharField(max_length=120, label="Field of science")
    pi = forms.CharField(
        required=False, max_length=254, label="PI",
        help_text="blank: you lead it. Or the PI's username or e-mail address: they confirm "
        "before the centre sees the request, and you become the project's manager.",
    )  # fmt: skip
    estimate_partition = forms.TypedChoiceField(
        coerce=int, required=False, empty_value=None, label="Estimate: partition"
    )
    estimate_jobs = forms.IntegerField(
        required=False, min_value=1, max_value=10_000_000, label="Estimate: jobs"
    )
    estimate_nodes = forms.IntegerField(
        required=False, min_value=1, max_value=100_000, label="Estimate: nodes per job"
    )
    estimate_hours = forms.DecimalField(
        required=False, max_digits=12, decimal_places=4, validators=[positive],
        label="Estimate: hours per job",
    )  # fmt: skip

    def __init__(
        self,
        *args: Any,
        pools: list[ResourcePool],
        partitions: list[Partition],
        with_estimate: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.pools = pools
        self.partitions = {partition.pk: partition for partition in partitions}
        for pool in pools:
            self.fields[f"pool_{pool.pk}"] = _su_field(f"SU on {pool.name}", required=False)
        if with_estimate:
            field = self.fields["estimate_partition"]
            assert isinstance(field, forms.TypedChoiceField)
            field.choices = [("", "no estimate line"), *((p.pk, str(p)) for p in partitions)]
        else:
            for name in [name for name in self.fields if name.startswith("estimate_")]:
                del self.fields[name]

    @classmethod
    def editing(
        cls, request: ProjectRequest, *, pools: list[ResourcePool], data: Any = None
    ) -> ProjectRequestForm:
        """The form of a request sent back for changes, holding what it says now."""
        amounts: dict[int, ProjectRequestAmount] = {a.pool_id: a for a in request.amounts.all()}
        initial = {
            "title": request.title, "abstract": request.abstract,
            "field_of_science": request.field_of_science, "pi": request.pi.username,
            **{f"pool_{pk}": _plain(amount.requested_su) for pk, amount in amounts.items()},
        }  # fmt: skip
        form = cls(data, initial=initial, pools=pools, partitions=[], with_estimate=False)
        form.fields["pi"].disabled = True
        return form

    def clean_pi(self) -> str:
        name = (self.cleaned_data.get("pi") or "").strip()
        if name and not self.fields["pi"].disabled:
            try:
                person_named(name)
            except AllocationError as error:
                raise forms.ValidationError(str(error)) from None
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        amounts = {}
        for pool in self.pools:
            value = _su_clean(self, f"pool_{pool.pk}")
            if value is not None:
                amounts[pool.name] = value
        if not self.errors and not any(amounts.values()):
            self.add_error(f"pool_{self.pools[0].pk}" if self.pools else None, "Ask for some SU.")
        data["amounts"] = amounts
        if data.get("estimate_partition"):
            for name in ("estimate_jobs", "estimate_nodes", "estimate_hours"):
                if data.get(name) in (None, "") and name not in self.errors:
                    self.add_error(name, "Needed for the estimate line.")
        return data

    def estimate_lines(self) -> list[EstimateLine]:
        data = self.cleaned_data
        partition = self.partitions.get(data.get("estimate_partition") or 0)
        if partition is None:
            return []
        quote = QuoteRequest(nodes=data["estimate_nodes"], hours=data["estimate_hours"])
        return [EstimateLine(partition=partition, jobs=data["estimate_jobs"], quote=quote)]


class DecisionForm(forms.Form):
    """An approver's decision: approve (code, period, SU per pool), ask for changes or reject
    (both with a reason). The button pressed says which."""

    DECISIONS = (("approve", "approve"), ("changes", "ask for changes"), ("reject", "reject"))

    decision = forms.ChoiceField(choices=DECISIONS, required=False)  # the button's value
    code = forms.CharField(
        max_length=64, required=False, label="Project code",
        help_text="the Slurm account; blank: the centre's next code",
    )  # fmt: skip
    period_start = forms.DateField(
        label="Allocation starts", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    period_end = forms.DateField(
        label="Allocation ends (the day after its last day)", required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=5000,
        help_text="required to ask for changes, to reject, or to grant other than asked",
    )  # fmt: skip

    def __init__(
        self, *args: Any, request: ProjectRequest, code: str, today: date, end: date, **kwargs: Any
    ) -> None:
        kwargs.setdefault("initial", {"code": code, "period_start": today, "period_end": end})
        super().__init__(*args, **kwargs)
        self.asked = list(request.amounts.all())
        reason = self.fields.pop("reason")
        for amount in self.asked:
            field = _su_field(f"SU granted on {amount.pool.name}", required=True)
            field.initial = _plain(amount.requested_su)
            self.fields[f"pool_{amount.pool_id}"] = field
        self.fields["reason"] = reason

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        decision = data.get("decision") or "approve"
        data["decision"] = decision
        if decision != "approve":
            # Only the reason counts: the grant's fields are left as they were.
            for name in list(self.errors):
                if name != "reason":
                    del self.errors[name]
            if not (data.get("reason") or "").strip():
                self.add_error(
                    "reason",
                    "Say what to change." if decision == "changes" else "Say why you reject it.",
                )
            return data
        granted = {}
        for amount in self.asked:
            value = _su_clean(self, f"pool_{amount.pool_id}")
            if value is not None:
                granted[amount.pool.name] = value
        data["granted"] = granted
        return data

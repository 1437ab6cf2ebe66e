"""Forms of the browser pages. They check input and say what is wrong in words; the pricing
itself (and any rule of the allocation process) stays in the engine and the services."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

from accounting.explorer import DEFAULT_GRID_G_PER_KWH
from accounting.models import Partition, PartitionVersion
from accounting.sacct import ACTIVE_STATES, FINISHED_STATES, parse_memory_mb
from allocations.models import AllocationRound, Review, RoundPool

COMMON_STATES = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL",
                 "PREEMPTED", "RUNNING", "PENDING")  # fmt: skip
STEP_CHOICES = [("day", "day"), ("week", "week"), ("month", "month")]


# --- Jobs -------------------------------------------------------------------------------------


class JobFilterForm(forms.Form):
    """The jobs table's filters: all optional, all in the query string."""

    user = forms.ChoiceField(required=False)
    partition = forms.ModelChoiceField(
        queryset=Partition.objects.none(), required=False, empty_label="any partition"
    )
    state = forms.ChoiceField(required=False)
    ended_from = forms.DateField(
        required=False, label="Ended from", widget=forms.DateInput(attrs={"type": "date"})
    )
    ended_to = forms.DateField(
        required=False,
        label="Ended to (inclusive)",
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def __init__(self, *args: Any, usernames: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        user_field = self.fields["user"]
        assert isinstance(user_field, forms.ChoiceField)
        user_field.choices = [("", "any user"), *((name, name) for name in usernames)]
        partition_field = self.fields["partition"]
        assert isinstance(partition_field, forms.ModelChoiceField)
        partition_field.queryset = Partition.objects.select_related("cluster").order_by(
            "cluster__name", "name"
        )
        others = sorted((ACTIVE_STATES | FINISHED_STATES) - set(COMMON_STATES))
        state_field = self.fields["state"]
        assert isinstance(state_field, forms.ChoiceField)
        state_field.choices = [("", "any state"), *((s, s) for s in (*COMMON_STATES, *others))]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("ended_from"), data.get("ended_to")
        if start and end and start > end:
            raise forms.ValidationError("“Ended from” must not be after “ended to”.")
        return data


# --- Quotes -----------------------------------------------------------------------------------


def _positive(value: Decimal) -> None:
    if value <= 0:
        raise forms.ValidationError("Must be more than zero.")


class QuoteForm(forms.Form):
    """A planned job: where, how many nodes, what on each node, how long."""

    partition = forms.TypedChoiceField(coerce=int, label="Cluster / partition")
    nodes = forms.IntegerField(
        min_value=1, max_value=100_000, initial=1, widget=forms.NumberInput(attrs={"min": 1})
    )
    cores_per_node = forms.DecimalField(
        required=False, max_digits=10, decimal_places=3, validators=[_positive],
        label="Cores per node", help_text="empty: a whole node, or the GPUs' share",
    )  # fmt: skip
    memory_per_node = forms.CharField(
        required=False, max_length=20, label="Memory per node",
        help_text="e.g. 60G or 1914M; empty: the cores' share",
    )  # fmt: skip
    gpus_per_node = forms.IntegerField(
        required=False, min_value=0, max_value=64, label="GPUs per node"
    )
    hours = forms.DecimalField(
        max_digits=10, decimal_places=4, validators=[_positive], initial=Decimal(1),
        label="Hours (wall time)",
    )  # fmt: skip

    def __init__(self, *args: Any, versions: list[PartitionVersion], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        groups: dict[str, list[tuple[int, str]]] = {}
        for version in versions:
            label = f"{version.partition} ({version.cores_per_node} cores"
            label += f", {version.gpus} GPUs)" if version.gpus else ")"
            groups.setdefault(version.partition.cluster.name, []).append(
                (version.partition_id, label)
            )
        field = self.fields["partition"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = list(groups.items())

    def clean_memory_per_node(self) -> Decimal | None:
        text = self.cleaned_data["memory_per_node"].strip()
        if not text:
            return None
        try:
            memory = parse_memory_mb(text)
        except ValueError as error:
            raise forms.ValidationError(f"Not a memory amount ({error}); write e.g. 60G.") from None
        if memory <= 0:
            raise forms.ValidationError("Must be more than zero.")
        return memory


# --- Cost ratio explorer ----------------------------------------------------------------------


class CostRatioForm(forms.Form):
    """Which system to compare, extra applications, and "my application"."""

    system = forms.ChoiceField(label="System")
    applications = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "MyCode, 20\nOtherCode, 7.5"}),
        label="Your applications",
        help_text="one per line: name, CPU nodes that match one GPU node",
    )
    cpu_node_hours = forms.DecimalField(
        max_digits=12, decimal_places=3, validators=[_positive], initial=Decimal(1),
        label="CPU-node hours",
    )  # fmt: skip
    gpu_node_hours = forms.DecimalField(
        required=False, max_digits=12, decimal_places=4, validators=[_positive],
        label="GPU-node hours", help_text="or leave empty and give a speedup",
    )  # fmt: skip
    speedup = forms.DecimalField(
        required=False, max_digits=8, decimal_places=3, validators=[_positive],
        initial=Decimal(8), label="Speedup (\u00d7)",
        help_text="how many times faster one GPU node is than one CPU node",
    )  # fmt: skip
    grid_intensity = forms.DecimalField(
        max_digits=6, decimal_places=1, initial=DEFAULT_GRID_G_PER_KWH,
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(Decimal(2000))],
        label="Grid intensity (g CO₂/kWh)",
    )  # fmt: skip

    def __init__(self, *args: Any, systems: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["system"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = systems

    def clean_applications(self) -> list[tuple[str, Decimal]]:
        entries = []
        for number, line in enumerate(self.cleaned_data["applications"].splitlines(), start=1):
            if not line.strip():
                continue
            name, _, ratio_text = line.rpartition(",")
            name = name.strip()
            try:
                ratio = Decimal(ratio_text.strip())
            except ArithmeticError:
                ratio = Decimal(0)
            if not name or not ratio.is_finite() or ratio <= 0 or ratio > 100_000:
                raise forms.ValidationError(
                    f"Line {number} ({line.strip()!r}): write a name, a comma and a positive "
                    "number of CPU nodes, e.g. “MyCode, 20”."
                )
            entries.append((name[:60], ratio))
        if len(entries) > 20:
            raise forms.ValidationError("At most 20 applications at a time.")
        return entries

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "cpu_node_hours" in data and not data.get("gpu_node_hours") and not data.get("speedup"):
            raise forms.ValidationError("Give the GPU-node hours or a speedup.")
        return data


# --- Project page -----------------------------------------------------------------------------


class UsageStepForm(forms.Form):
    step = forms.ChoiceField(choices=STEP_CHOICES, required=False, label="Usage per")


# --- Requests, reviews, grants ----------------------------------------------------------------


class RequestCreateForm(forms.Form):
    round = forms.ModelChoiceField(
        queryset=AllocationRound.objects.none(), empty_label=None, label="Allocation round"
    )
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="what the SU are for; the committee reads this",
    )

    def __init__(self, *args: Any, rounds: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["round"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = rounds


def _su_field(label: str, *, required: bool = True) -> forms.DecimalField:
    return forms.DecimalField(
        label=label, required=required, max_digits=24, decimal_places=6,
        min_value=Decimal(0), widget=forms.NumberInput(attrs={"step": "any", "min": 0}),
    )  # fmt: skip


def _plain(value: Decimal) -> str:
    """260000.000000 -> "260000" (and never "2.6E+5")."""
    return format(value.normalize(), "f")


class RequestAmountsForm(forms.Form):
    """SU asked for on each pool the round offers, and the justification (a draft's edit)."""

    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)

    def __init__(self, *args: Any, pools: list[RoundPool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pools = pools
        for item in pools:
            self.fields[f"pool_{item.pool_id}"] = _su_field(f"SU on {item.pool.name}")

    def amounts(self) -> dict[Any, Decimal]:
        return {item.pool: self.cleaned_data[f"pool_{item.pool_id}"] for item in self.pools}


class EstimateForm(forms.Form):
    """One estimate line: jobs x a planned job, priced by the quote engine."""

    partition = forms.TypedChoiceField(coerce=int, label="Partition")
    description = forms.CharField(max_length=200, required=False)
    jobs = forms.IntegerField(min_value=1, max_value=10_000_000, initial=100)
    nodes = forms.IntegerField(min_value=1, max_value=100_000, initial=1)
    hours = forms.DecimalField(
        max_digits=12, decimal_places=4, validators=[_positive], initial=Decimal(1)
    )
    cores_per_node = forms.DecimalField(
        required=False, max_digits=10, decimal_places=3, validators=[_positive]
    )
    gpus_per_node = forms.IntegerField(required=False, min_value=0, max_value=64)
    memory_per_node = QuoteForm.base_fields["memory_per_node"]
    clean_memory_per_node = QuoteForm.clean_memory_per_node

    def __init__(self, *args: Any, partitions: list[Partition], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["partition"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = [(partition.pk, str(partition)) for partition in partitions]


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


def parse_day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None

"""Forms of the quote page and the cost ratio explorer. They check input and say what is wrong
in words; the pricing itself stays in the engine.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

from accounting.clusters.explorer import DEFAULT_GRID_G_PER_KWH
from accounting.clusters.units import parse_memory_mb
from accounting.models import PartitionVersion


def positive(value: Decimal) -> None:
    if value <= 0:
        raise forms.ValidationError("Must be more than zero.")


class QuoteForm(forms.Form):
    """A planned job: where, how many nodes, what on each node, how long."""

    partition = forms.TypedChoiceField(coerce=int, label="Cluster / partition")
    nodes = forms.IntegerField(
        min_value=1, max_value=100_000, initial=1, widget=forms.NumberInput(attrs={"min": 1})
    )
    cores_per_node = forms.DecimalField(
        required=False, max_digits=10, decimal_places=3, validators=[positive],
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
        max_digits=10, decimal_places=4, validators=[positive], initial=Decimal(1),
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
        max_digits=12, decimal_places=3, validators=[positive], initial=Decimal(1),
        label="CPU-node hours",
    )  # fmt: skip
    gpu_node_hours = forms.DecimalField(
        required=False, max_digits=12, decimal_places=4, validators=[positive],
        label="GPU-node hours", help_text="or leave empty and give a speedup",
    )  # fmt: skip
    speedup = forms.DecimalField(
        required=False, max_digits=8, decimal_places=3, validators=[positive],
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

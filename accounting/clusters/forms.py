"""Forms of the quote page and the cost ratio explorer. They check input and say what is wrong
in words; the pricing itself stays in the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django import forms

from accounting.clusters.cost_ratio import Benchmark
from accounting.clusters.explorer import (
    DEFAULT_GRID_G_PER_KWH,
    EXAMPLE_SPEEDUP,
    FIELDS,
    NumberField,
)
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


def explorer_number(
    field: NumberField,
    *,
    required: bool = True,
    initial: Decimal | None = None,
    help_text: str = "",
) -> forms.DecimalField:
    """A number field of the explorer whose every error is ``field``'s sentence: its label and
    its allowed range, never Django's "Ensure this value..."."""

    def in_range(value: Decimal) -> None:
        problem = field.problem(value)
        if problem:
            raise forms.ValidationError(problem, code="range")

    whole_digits = len(str(int(field.high)))
    return forms.DecimalField(
        required=required, initial=initial, label=field.label, help_text=help_text,
        max_digits=whole_digits + field.decimal_places, decimal_places=field.decimal_places,
        validators=[in_range],
        error_messages={
            "required": f"Give a number for {field.label}, e.g. {field.example}.",
            "invalid": field.number_message,
            "max_digits": field.range_message, "max_whole_digits": field.range_message,
            "max_decimal_places": field.decimals_message,
        },
    )  # fmt: skip


class CostRatioForm(forms.Form):
    """Which system to compare, extra applications, and "my application"."""

    system = forms.ChoiceField(
        label="System", error_messages={"invalid_choice": "Choose a system from the list."}
    )
    applications = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "MyCode, 20\nOtherCode, 7.5"}),
        label="Your applications",
        help_text="one per line: name, CPU nodes that match one GPU node",
    )
    cpu_node_hours = explorer_number(FIELDS["cpu_node_hours"], initial=Decimal(1))
    gpu_node_hours = explorer_number(
        FIELDS["gpu_node_hours"], required=False, help_text="or leave empty and give a speedup"
    )
    speedup = explorer_number(
        FIELDS["speedup"], required=False, initial=Decimal(8),
        help_text="how many times faster one GPU node is than one CPU node (\u00d7)",
    )  # fmt: skip
    grid_intensity = explorer_number(
        FIELDS["grid_intensity"], initial=DEFAULT_GRID_G_PER_KWH, help_text="g CO\u2082 per kWh"
    )

    def __init__(
        self,
        data: Mapping[str, Any],
        *,
        systems: list[tuple[str, str]],
        examples: Sequence[Benchmark] = (),
    ) -> None:
        # An example's speedup left out of the address (an older link) is its measured one.
        measured = {self.example_key(index): str(b.perf_ratio) for index, b in enumerate(examples)}
        super().__init__({**measured, **{key: data.get(key) for key in data}})
        field = self.fields["system"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = systems
        self.examples = tuple(examples)
        for index, example in enumerate(examples):
            label = f"Speedup of {example.application}"
            self.fields[self.example_key(index)] = explorer_number(
                replace(EXAMPLE_SPEEDUP, label=label), initial=example.perf_ratio
            )

    @staticmethod
    def example_key(index: int) -> str:
        return f"example_{index}"

    def example_fields(self) -> list[tuple[Benchmark, forms.BoundField]]:
        """Each example application beside the field of its speedup, for the page."""
        return [(b, self[self.example_key(i)]) for i, b in enumerate(self.examples)]

    def example_benchmarks(self) -> list[Benchmark]:
        """The examples with the speedups the user gave (a valid form only)."""
        return [
            replace(example, perf_ratio=self.cleaned_data[self.example_key(index)])
            for index, example in enumerate(self.examples)
        ]

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
            if not name or not ratio.is_finite() or EXAMPLE_SPEEDUP.problem(ratio):
                raise forms.ValidationError(
                    f"Your applications, line {number} ({line.strip()!r}): write a name, a comma "
                    f"and the CPU nodes that match one GPU node (more than 0, at most "
                    f"{EXAMPLE_SPEEDUP.high:,}), e.g. “MyCode, 20”."
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

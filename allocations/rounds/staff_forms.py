"""Forms of staff's round pages. They read the input's types (a date, a number); the rules
(the window and the period not empty, the name free, SU not negative nor below what was
granted, one chair) are the services' in ``allocations/rounds/services.py``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from allocations.models import AllocationRound
from kit.widgets import IsoDateInput, IsoDateTimeInput, UsernameField
from projects.models import ResourcePool


class RoundForm(forms.Form):
    name = forms.CharField(max_length=200)
    opens_at = forms.DateTimeField(label="Opens for applications", widget=IsoDateTimeInput())
    closes_at = forms.DateTimeField(label="Closes", widget=IsoDateTimeInput())
    period_start = forms.DateField(
        label="Grants cover from", widget=IsoDateInput(), help_text="the period's first day"
    )
    period_end = forms.DateField(
        label="Grants cover until", widget=IsoDateInput(),
        help_text="the day after the period's last day (1 January for a calendar year)",
    )  # fmt: skip
    requires_progress_report = forms.BooleanField(
        required=False, label="Renewals carry a progress report",
        help_text="a renewal in this round cannot be submitted without one",
    )  # fmt: skip

    def __init__(self, *args: Any, pools: list[ResourcePool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pools = pools
        for pool in pools:
            # No minimum here: "cannot be negative" is the service's rule, shown on the field.
            self.fields[f"pool_{pool.pk}"] = forms.DecimalField(
                label=f"SU available on {pool.name}", required=False, max_digits=24,
                decimal_places=6, widget=forms.NumberInput(attrs={"step": "any"}),
                help_text="blank: the round offers nothing on this pool",
            )  # fmt: skip

    @classmethod
    def for_round(cls, round_: AllocationRound, pools: list[ResourcePool]) -> RoundForm:
        offered = {item.pool_id: item.available_su for item in round_.pools.all()}
        initial: dict[str, Any] = {
            "name": round_.name, "opens_at": round_.opens_at, "closes_at": round_.closes_at,
            "period_start": round_.period_start, "period_end": round_.period_end,
            "requires_progress_report": round_.requires_progress_report,
        }  # fmt: skip
        for pool_id, amount in offered.items():
            initial[f"pool_{pool_id}"] = format(amount.normalize(), "f")
        return cls(initial=initial, pools=pools)

    def available(self) -> dict[ResourcePool, Decimal]:
        return {
            pool: self.cleaned_data[f"pool_{pool.pk}"]
            for pool in self.pools
            if self.cleaned_data.get(f"pool_{pool.pk}") is not None
        }


class RoundCreateForm(RoundForm):
    chair = UsernameField(label="Chair (username)")


class CommitteeAddForm(forms.Form):
    user = UsernameField(label="Username")
    chair = forms.BooleanField(
        required=False, label="Chair", help_text="the chair before stays on the committee"
    )

"""A draft of a cluster's rates, seen before it ships: each project's last months re-priced
(``accounting.ledger.rates_impact``), and the current budget periods that would run out
earlier at the burn rate the draft gives them (docs/allocations.md, "A rate change seen
before it ships"). One payload for the ``rates_impact`` command, the staff page and the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from accounting.ledger.rate_drafts import DraftRates
from accounting.ledger.rates_impact import ClusterRatesImpact, cluster_rates_impact
from allocations.grants.budget import ExhaustionShift, exhaustion_shift
from allocations.grants.selectors import project_balances_get
from projects.models import Project


@dataclass(frozen=True)
class EarlierExhaustion:
    project_code: str
    pool_name: str
    shift: ExhaustionShift


@dataclass(frozen=True)
class RatesImpact:
    usage: ClusterRatesImpact
    earlier: tuple[EarlierExhaustion, ...]


def rates_impact_get(*, rates: DraftRates, months: int = 12, on: date | None = None) -> RatesImpact:
    """The draft's impact on ``rates.cluster``: the re-priced months, and each project whose
    current budget period on a pool would run out earlier (by how many days) if its jobs
    cost what the draft makes them cost, relative to what they were charged."""
    usage = cluster_rates_impact(rates=rates, months=months, today=on)
    dearer = [
        (row, row.pool_id, row.ratio)
        for row in usage.rows
        if row.pool_id is not None and row.ratio is not None and row.ratio > 1
    ]
    # One balance read per project (every pool at once), not per project and pool.
    balances = {
        (project.pk, pool.pool_id): pool.current
        for project in Project.objects.filter(pk__in={row.project_id for row, _, _ in dearer})
        for pool in project_balances_get(project=project, on=on).pools
    }
    earlier = []
    for row, pool_id, ratio in dearer:
        balance = balances.get((row.project_id, pool_id))
        if balance is None:
            continue
        shift = exhaustion_shift(balance, ratio=ratio)
        if shift.days_earlier > 0:
            earlier.append(EarlierExhaustion(row.project_code, row.pool_name, shift))
    earlier.sort(key=lambda item: (-item.shift.days_earlier, item.project_code, item.pool_name))
    return RatesImpact(usage=usage, earlier=tuple(earlier))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def rates_impact_payload(result: RatesImpact) -> dict[str, Any]:
    """The impact as JSON (amounts as strings, dates ISO): the command's ``--json`` and the
    API's answer, so the two never disagree."""
    usage = result.usage
    return {
        "cluster": usage.cluster,
        "start": usage.start.isoformat(),
        "end": usage.end.isoformat(),
        "months": usage.months,
        "currency": usage.currency,
        "money_note": usage.money_note,
        "projects": [
            {
                "project": row.project_code,
                "pool": row.pool_name,
                "jobs": row.jobs,
                "charged_su": str(row.charged_su),
                "draft_su": str(row.draft_su),
                "change_su": str(row.change_su),
                "change_percent": _text(row.change_percent),
                "unpriced_jobs": row.unpriced_jobs,
                "problems": list(row.problems),
                "current_money": _text(row.current_money),
                "draft_money": _text(row.draft_money),
            }
            for row in usage.rows
        ],
        "earlier_exhaustion": [
            {
                "project": item.project_code,
                "pool": item.pool_name,
                "remaining_su": str(item.shift.remaining_su),
                "burn_rate_su_per_day": str(item.shift.burn_rate),
                "draft_burn_rate_su_per_day": str(item.shift.draft_burn_rate),
                "exhaustion": _text(item.shift.current and item.shift.current.isoformat()),
                "draft_exhaustion": _text(item.shift.draft and item.shift.draft.isoformat()),
                "period_end": item.shift.end.isoformat(),
                "days_earlier": item.shift.days_earlier,
            }
            for item in result.earlier
        ],
        "tres_billing_weights": [
            {"partition": line.partition, "before": line.before, "after": line.after}
            for line in usage.weights
        ],
    }

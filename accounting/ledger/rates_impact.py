"""What a draft of a cluster's rates would have done to each project's last months: SU per
pool and money, charged beside re-priced, and the slurm.conf lines it changes
(docs/costs.md, "A rate change seen before it ships").

Reads the shape roll-ups (one grouped read, ``cluster_shapes_read``), never the jobs; the maths
are in the pure ``accounting.ledger.impact``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction

from django.utils import timezone

from accounting.clusters.selectors import partition_versions_current
from accounting.costs.costmodels import CostModel
from accounting.costs.services import cost_model_at
from accounting.ledger import impact
from accounting.ledger.rate_drafts import DraftRates
from accounting.ledger.repricing import cluster_shapes_read
from kit.calendar import add_months
from kit.errors import ApplicationError
from projects.models import PoolPartition, Project

MAX_MONTHS = 120


class ImpactRangeError(ApplicationError):
    """A period of months the impact cannot cover."""


@dataclass(frozen=True)
class PoolImpact:
    """One project's jobs on one pool of the cluster over the period."""

    project_id: int
    project_code: str
    pool_id: int | None  # None: partitions in no pool
    pool_name: str
    jobs: int
    charged_su: Decimal
    draft_su: Decimal
    unpriced_jobs: int
    problems: tuple[str, ...]
    current_money: Decimal | None  # None: the cluster has no cost model
    draft_money: Decimal | None

    @property
    def change_su(self) -> Decimal:
        return self.draft_su - self.charged_su

    @property
    def change_percent(self) -> Decimal | None:
        if self.charged_su <= 0:
            return None
        percent = (self.change_su * 100 / self.charged_su).quantize(Decimal("0.01"))
        return percent if percent else Decimal("0.00")  # never "-0.00" from rounding

    @property
    def ratio(self) -> Decimal | None:
        """Draft SU per SU charged: how the pool's burn rate would change."""
        if self.charged_su <= 0:
            return None
        return self.draft_su / self.charged_su


@dataclass(frozen=True)
class ClusterRatesImpact:
    cluster: str
    start: date
    end: date  # exclusive
    months: int
    rows: tuple[PoolImpact, ...]
    weights: tuple[impact.WeightsLine, ...]
    currency: str | None
    money_note: str


def impact_period(*, today: date, months: int) -> tuple[date, date]:
    """The local days ``[start, end)`` of the last ``months`` months up to and with ``today``."""
    if not 1 <= months <= MAX_MONTHS:
        raise ImpactRangeError(f"months must be from 1 to {MAX_MONTHS}, got {months}")
    end = today + timedelta(days=1)
    return add_months(end, -months), end


def cluster_rates_impact(
    *, rates: DraftRates, months: int = 12, today: date | None = None
) -> ClusterRatesImpact:
    """Every project's charged jobs on the draft's cluster over the last ``months`` months,
    per pool: SU charged and SU under the draft (partitions the draft leaves out keep their
    newest version), money under the cluster's cost model and under the draft's (time rates
    per node-second), and the ``TRESBillingWeights`` lines the draft changes."""
    cluster = rates.cluster
    day = today or timezone.localtime(timezone.now(), cluster.zoneinfo).date()
    start, end = impact_period(today=day, months=months)
    current_versions = {v.partition.name: v for v in partition_versions_current(cluster=cluster)}
    current_specs = {name: version.spec for name, version in current_versions.items()}
    drafted = {item.name: item for item in rates.definition.partitions}
    draft_specs = {**current_specs, **{name: item.charging for name, item in drafted.items()}}

    shapes = cluster_shapes_read(cluster=cluster, start=start, end=end)
    repriced = impact.shapes_repriced(shapes, draft_specs, held_on=current_specs)

    in_force = cost_model_at(cluster=cluster, at=timezone.now())
    current_model = in_force[1] if in_force else None
    draft_model = rates.cost_model or current_model
    current_nodes = {name: version.nodelist for name, version in current_versions.items()}
    draft_nodes = {**current_nodes, **{name: item.nodelist for name, item in drafted.items()}}
    current_rates = _node_second_costs(current_model, current_nodes)
    draft_rates = _node_second_costs(draft_model, draft_nodes)

    pools = {
        member.partition.name: (member.pool_id, member.pool.name)
        for member in PoolPartition.objects.filter(partition__cluster=cluster).select_related(
            "pool", "partition"
        )
    }
    codes = dict(
        Project.objects.filter(pk__in={key[0] for key in repriced}).values_list("pk", "code")
    )
    grouped: dict[tuple[int, int | None, str], list[tuple[str, impact.Repriced]]] = defaultdict(
        list
    )
    for (project_id, partition), group in repriced.items():
        pool_id, pool_name = pools.get(partition, (None, "no pool"))
        grouped[(project_id, pool_id, pool_name)].append((partition, group))

    rows = [
        _pool_impact(
            project_id,
            codes.get(project_id, str(project_id)),
            pool_id,
            pool_name,
            groups,
            (current_model, current_rates) if current_model else None,
            (draft_model, draft_rates) if draft_model else None,
        )
        for (project_id, pool_id, pool_name), groups in grouped.items()
    ]
    rows.sort(key=lambda row: (row.project_code, row.pool_name))
    return ClusterRatesImpact(
        cluster=cluster.name,
        start=start,
        end=end,
        months=months,
        rows=tuple(rows),
        weights=tuple(impact.weights_diff(current_specs, draft_specs)),
        currency=draft_model.currency if draft_model else None,
        money_note="time rates per node-second of each partition's nodes; energy rates need "
        "each job's energy and are left out of both sides",
    )


def _node_second_costs(model: CostModel | None, nodelists: dict[str, str]) -> dict[str, Fraction]:
    """Each partition's cost per node-second under ``model`` (none without a model). A node
    list the cost model's reader refuses raises its ``NodelistError``, a sentence."""
    if model is None:
        return {}
    return {name: impact.node_second_cost(model, nodelist) for name, nodelist in nodelists.items()}


def _pool_impact(
    project_id: int,
    code: str,
    pool_id: int | None,
    pool_name: str,
    groups: list[tuple[str, impact.Repriced]],
    current: tuple[CostModel, dict[str, Fraction]] | None,
    draft: tuple[CostModel, dict[str, Fraction]] | None,
) -> PoolImpact:
    draft_exact = sum((group.draft_su_exact for _, group in groups), Fraction(0))

    def money(priced: tuple[CostModel, dict[str, Fraction]] | None) -> Decimal | None:
        if priced is None:
            return None
        model, rates = priced
        exact = sum(
            (
                rates.get(name, Fraction(0)) * group.paid_node_seconds(model)
                for name, group in groups
            ),
            Fraction(0),
        )
        return impact.rounded(exact)

    return PoolImpact(
        project_id=project_id,
        project_code=code,
        pool_id=pool_id,
        pool_name=pool_name,
        jobs=sum(group.jobs for _, group in groups),
        charged_su=sum((group.charged_su for _, group in groups), Decimal(0)),
        draft_su=impact.rounded(draft_exact),
        unpriced_jobs=sum(group.unpriced_jobs for _, group in groups),
        problems=tuple(sorted({p for _, group in groups for p in group.problems})),
        current_money=money(current),
        draft_money=money(draft),
    )

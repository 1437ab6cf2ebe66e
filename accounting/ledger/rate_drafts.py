"""Drafts of a cluster's next rates: stored, never in force, published through the services
that put a spec file or a cost model in force (docs/costs.md, "A rate change seen before it
ships").

A draft is the same document as a cluster spec file (``examples/clusters/``), checked by the
same validation (``cluster_definition_parse``), and optionally a cost model, checked by
``cost_model_check``. Nothing reads a draft to charge: the import, the balances and every page
select ``PartitionVersion`` and ``CostModelVersion`` rows only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounting.clusters.services import ClusterApplyResult, cluster_apply, next_hour
from accounting.clusters.specs import ClusterDefinition, cluster_definition_parse
from accounting.costs.costmodels import CostModel
from accounting.costs.services import (
    CostModelRejected,
    cost_model_check,
    cost_model_version_create,
)
from accounting.models import Cluster, RateDraft
from kit.errors import ApplicationError


class RateDraftError(ApplicationError):
    """A draft that does not fit the cluster it is drafted for."""


@dataclass(frozen=True)
class DraftRates:
    """A checked draft: the cluster, its spec as the spec file validation reads it, and the
    draft cost model (None: the cluster's current one stays)."""

    cluster: Cluster
    definition: ClusterDefinition
    cost_model: CostModel | None = None


def rate_draft_check(
    *, cluster: Cluster, spec: Any, cost_model_text: str = "", source: str = "draft"
) -> DraftRates:
    """Validate a draft for ``cluster`` without saving it: ``spec`` (a decoded spec document)
    by the spec file's own validation, the cost model by the cost model upload's. Raises
    ``SpecFileError``, ``CostModelRejected`` or :class:`RateDraftError` with the reason."""
    definition = cluster_definition_parse(spec, source=source)
    if definition.name != cluster.name:
        raise RateDraftError(
            f"{source}: the draft is for the cluster {definition.name!r}, not {cluster.name!r} "
            '(a draft keeps the cluster\'s name in its "name" field)'
        )
    model = None
    if cost_model_text.strip():
        try:
            model = cost_model_check(cluster=cluster, text=cost_model_text)
        except CostModelRejected as error:
            error.field = "cost_model"  # shown on that field of the page, under its key by the API
            raise
    return DraftRates(cluster=cluster, definition=definition, cost_model=model)


def rate_draft_rates(draft: RateDraft) -> DraftRates:
    """A saved draft, checked again (a cost model version may have been added since)."""
    return rate_draft_check(
        cluster=draft.cluster,
        spec=draft.spec,
        cost_model_text=draft.cost_model_text,
        source=f"draft {draft.pk}",
    )


@transaction.atomic
def rate_draft_create(
    *,
    cluster: Cluster,
    spec: Any,
    cost_model_text: str = "",
    note: str = "",
    created_by: User | None = None,
) -> RateDraft:
    """Save a draft of ``cluster``'s next rates, after the checks of :func:`rate_draft_check`
    (a draft that fails them is not saved). The draft is in force nowhere."""
    rate_draft_check(cluster=cluster, spec=spec, cost_model_text=cost_model_text)
    return RateDraft.objects.create(
        cluster=cluster,
        spec=spec,
        cost_model_text=cost_model_text,
        note=note,
        created_by=created_by if created_by is not None and created_by.pk else None,
    )


def rate_draft_discard(*, draft: RateDraft) -> None:
    """Throw a draft away; nothing else changes."""
    draft.delete()


@transaction.atomic
def rate_draft_publish(
    *, draft: RateDraft, effective_from: datetime | None = None, published_by: User | None = None
) -> ClusterApplyResult:
    """Put a draft in force from ``effective_from`` (default: the next hour of the cluster's
    clock), through ``cluster_apply`` (a new version of each partition the draft changes) and
    ``cost_model_version_create`` (the draft cost model, from the same moment), then drop the
    draft. All or nothing."""
    rates = rate_draft_rates(draft)
    when = effective_from or next_hour(cluster=draft.cluster, after=timezone.now())
    note = draft.note or f"rate draft {draft.pk}"
    result = cluster_apply(
        definition=rates.definition, effective_from=when, applied_by=published_by, note=note
    )
    if rates.cost_model is not None:
        cost_model_version_create(
            cluster=draft.cluster,
            name=f"draft {draft.pk}",
            text=draft.cost_model_text,
            effective_from=when,
            created_by=published_by,
            change_note=note,
        )
    draft.delete()
    return result

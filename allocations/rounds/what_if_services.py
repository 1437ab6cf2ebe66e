"""The chair's what-if, written: a draft of proposed grants for a round's requests under review
(``allocations/rounds/what_if.py`` computes them), one proposal edited, and the draft applied in
one step through ``request_decide`` (docs/allocations.md, "Fitting a round to capacity").

Each operation checks who acts first (``access.can_decide_round``), and does all of its work or
none of it (one transaction)."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from allocations.access import can_decide, can_decide_round
from allocations.grants.services import check_rule, su_amount
from allocations.models import AllocationRound, RequestAmount, WhatIfDraft, WhatIfProposal
from allocations.rounds.selectors import round_capacity, what_if_inputs
from allocations.rounds.services import request_decide
from allocations.rounds.what_if import (
    METHOD_LABELS,
    SCORE_WEIGHTED,
    Ask,
    Parameters,
    PoolFit,
    parameters_check,
    what_if,
)
from kit.access import require
from kit.sql import table_names

ZERO = Decimal(0)
RUN_ROUND = "only the round's chair and centre staff fit the round to its capacity"


def _plain(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _default_reason(parameters: Parameters, fit: PoolFit[int], pool: str) -> str:
    """The reason a cut proposal carries until the chair writes another: the method, its
    parameters and the factor it used on the pool."""
    label = METHOD_LABELS[parameters.method]
    if parameters.method == SCORE_WEIGHTED:
        label += f", exponent {_plain(parameters.exponent)}"
    if parameters.threshold_su and parameters.method != SCORE_WEIGHTED:
        label += f", requests below {_plain(parameters.threshold_su)} SU in full"
    if parameters.floor_su:
        label += f", floor {_plain(parameters.floor_su)} SU"
    return f"fitted to the SU the round has left on {pool} ({label}; factor {_plain(fit.factor)})"


# One proposal as saved: request_amount_id, request_state, requested_su, score, proposed_su,
# reason.
ProposalRow = tuple[int, str, Decimal, Decimal | None, Decimal, str]
_COLUMNS = ("request_amount_id", "request_state", "requested_su", "score", "proposed_su", "reason")


def _proposals_insert(draft: WhatIfDraft, rows: list[ProposalRow]) -> None:
    """Save a draft's proposals. On PostgreSQL in one statement over arrays (``unnest``): a
    round of 500 requests has 1,500 of them, and building and preparing as many model objects
    for ``bulk_create`` took most of the what-if's time; elsewhere (SQLite) ``bulk_create``."""
    if connection.vendor != "postgresql":
        WhatIfProposal.objects.bulk_create(
            WhatIfProposal(draft=draft, **dict(zip(_COLUMNS, row, strict=True))) for row in rows
        )
        return
    (table,) = table_names(WhatIfProposal)  # the model's own table, quoted: no input
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * 6
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (draft_id, {', '.join(_COLUMNS)}, edited)"  # noqa: S608
            " SELECT %s, amount, state, requested, score, proposed, reason, false FROM unnest("
            "%s::bigint[], %s::text[], %s::numeric[], %s::numeric[], %s::numeric[], %s::text[])"
            " AS item(amount, state, requested, score, proposed, reason)",
            [draft.pk, *columns],
        )


@transaction.atomic
def what_if_draft_create(
    *,
    round_: AllocationRound,
    actor: User,
    method: str,
    threshold_su: object = ZERO,
    exponent: object = Decimal(1),
    floor_su: object = ZERO,
) -> WhatIfDraft:
    """The chair (or staff) proposes grants for the round's requests under review by
    ``method``, saved as a draft to edit and apply. Requests of the chair's own projects are
    left out (staff decide them); bad parameters are refused with the field named."""
    require(can_decide_round(actor, round_), RUN_ROUND)
    parameters = parameters_check(
        method=method, threshold_su=threshold_su, exponent=exponent, floor_su=floor_su
    )
    inputs = what_if_inputs(round_=round_, actor=actor)
    asks = [
        Ask(
            amount.request_id,
            amount.pool_id,
            amount.requested_su,
            score=inputs.scores.get(amount.request_id),
        )
        for amount in inputs.amounts
    ]
    result = what_if(capacity=inputs.capacity, asks=asks, parameters=parameters)
    fits = {fit.pool: fit for fit in result.pools}
    draft = WhatIfDraft.objects.create(
        round=round_,
        method=parameters.method,
        parameters={
            "threshold_su": _plain(parameters.threshold_su),
            "exponent": _plain(parameters.exponent),
            "floor_su": _plain(parameters.floor_su),
        },
        fits={
            str(fit.pool): {"factor": _plain(fit.factor), "notes": list(fit.notes)}
            for fit in result.pools
        },
        created_by=actor,
    )
    amounts = {(amount.request_id, amount.pool_id): amount for amount in inputs.amounts}
    _proposals_insert(
        draft,
        [
            (
                (amount := amounts[(item.request_id, item.pool)]).amount_id,
                amount.request_state,
                item.requested_su,
                item.score,
                item.proposed_su,
                ""
                if item.proposed_su == item.requested_su
                else _default_reason(parameters, fits[item.pool], amount.pool_name),
            )
            for item in result.proposals
        ],
    )
    return draft


@transaction.atomic
def what_if_proposal_set(
    *, proposal: WhatIfProposal, actor: User, proposed_su: object, reason: str = ""
) -> WhatIfProposal:
    """The chair changes one figure of a draft not yet applied, with its reason: from zero to
    what the request asks; a figure other than the request needs a reason. The total against
    capacity is checked when the draft is applied."""
    require(can_decide_round(actor, proposal.draft.round), RUN_ROUND)
    require(
        can_decide(actor, proposal.request_amount.request),
        "only the round's chair decides a request, never of a project of their own",
    )
    # As stored now: the draft may have been applied since the caller read it.
    proposal = (
        WhatIfProposal.objects.select_for_update().select_related("draft").get(pk=proposal.pk)
    )
    draft = proposal.draft
    check_rule(draft.applied_at is None, "this what-if is applied already; make a new one")
    value = su_amount(str(proposed_su), "the proposed SU", field="proposed_su")
    check_rule(value >= 0, "a proposal cannot be below zero", field="proposed_su")
    check_rule(
        value <= proposal.requested_su,
        f"a proposal cannot exceed the request ({_plain(proposal.requested_su)} SU)",
        field="proposed_su",
    )
    reason = reason.strip()
    check_rule(
        bool(reason) or value == proposal.requested_su,
        "say why the grant differs from the request",
        field="reason",
    )
    proposal.proposed_su = value
    proposal.reason = reason
    proposal.edited = True
    proposal.save(update_fields=["proposed_su", "reason", "edited"])
    return proposal


@transaction.atomic
def what_if_apply(*, draft: WhatIfDraft, actor: User) -> WhatIfDraft:
    """Decide every request of the draft as it proposes, in one transaction, through
    ``request_decide`` (each with its proposals' reasons where it differs from the request).
    Refused, with nothing changed, when the draft was applied already, when a request changed
    since the draft (decided, or its amounts changed), or when a pool's proposals exceed what
    the round has left."""
    require(can_decide_round(actor, draft.round), RUN_ROUND)
    draft = WhatIfDraft.objects.select_for_update().select_related("round").get(pk=draft.pk)
    if draft.applied_at is not None:
        check_rule(
            False, f"this what-if was applied on {draft.applied_at:%Y-%m-%d}; a draft applies once"
        )
    proposals = list(
        draft.proposals.select_related(
            "request_amount__request__project", "request_amount__pool"
        ).order_by("request_amount__request__project__code", "request_amount__pool__name")
    )
    by_request: dict[int, list[WhatIfProposal]] = defaultdict(list)
    for proposal in proposals:
        by_request[proposal.request_amount.request_id].append(proposal)
    current = {
        amount.pk: amount
        for amount in RequestAmount.objects.select_for_update()
        .filter(request_id__in=by_request)
        .select_related("request")
    }
    amounts_now: dict[int, set[int]] = defaultdict(set)
    for amount in current.values():
        amounts_now[amount.request_id].add(amount.pk)
    changed = sorted(
        {
            proposal.request_amount.request.project.code
            for proposal in proposals
            if (now := current.get(proposal.request_amount_id)) is None
            or now.request.state != proposal.request_state
            or now.requested_su != proposal.requested_su
        }
        | {
            proposals_of[0].request_amount.request.project.code
            for request_id, proposals_of in by_request.items()
            if amounts_now[request_id] != {item.request_amount_id for item in proposals_of}
        }
    )
    check_rule(
        not changed,
        f"the requests of {', '.join(changed)} changed since this what-if (decided, or their "
        "amounts changed): make a new what-if",
    )
    proposed: dict[int, Decimal] = defaultdict(lambda: ZERO)
    for proposal in proposals:
        proposed[proposal.request_amount.pool_id] += proposal.proposed_su
    for pool in round_capacity(round_=draft.round):
        total = proposed.get(pool.pool.pk, ZERO)
        check_rule(
            total <= pool.remaining_su,
            f"the proposals on {pool.pool} total {_plain(total)} SU; the round has "
            f"{_plain(pool.remaining_su)} SU left there",
            field="proposed_su",
        )
    for proposals_of in by_request.values():
        request = current[proposals_of[0].request_amount_id].request
        reasons = list(
            dict.fromkeys(
                proposal.reason.strip()
                for proposal in proposals_of
                if proposal.proposed_su != proposal.requested_su
            )
        )
        request_decide(
            request=request,
            actor=actor,
            granted={item.request_amount.pool: item.proposed_su for item in proposals_of},
            reason="; ".join(reason for reason in reasons if reason),
        )
    draft.applied_at = timezone.now()
    draft.applied_by = actor
    draft.save(update_fields=["applied_at", "applied_by"])
    return draft

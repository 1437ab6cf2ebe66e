"""Each kind of allocation request's states and the transitions allowed between them: the one
place that says what may follow what (docs/allocations.md, "Changing an allocation").

Pure: kinds and states are the plain strings stored in ``AllocationRequest.kind`` and
``.state``. A request in a round (``new``, ``renewal``) is reviewed by the round's committee
before the chair decides it; a top-up, an extension and an appeal go from the PI straight to
the one who decides (the chair of the round behind the grant, or staff).
"""

from __future__ import annotations

DRAFT = "draft"
SUBMITTED = "submitted"
UNDER_REVIEW = "under_review"
GRANTED = "granted"
PARTIALLY_GRANTED = "partially_granted"
REJECTED = "rejected"
DECIDED = frozenset({GRANTED, PARTIALLY_GRANTED, REJECTED})

IN_ROUND = frozenset({"new", "renewal"})
OUTSIDE_ROUNDS = frozenset({"top_up", "extension", "appeal"})
KINDS = IN_ROUND | OUTSIDE_ROUNDS

_REVIEWED: dict[str, frozenset[str]] = {
    DRAFT: frozenset({SUBMITTED}),
    SUBMITTED: frozenset({UNDER_REVIEW}),
    UNDER_REVIEW: DECIDED,
}
_DECIDED_DIRECTLY: dict[str, frozenset[str]] = {
    DRAFT: frozenset({SUBMITTED}),
    SUBMITTED: DECIDED,
}

TRANSITIONS: dict[str, dict[str, frozenset[str]]] = {
    kind: _REVIEWED if kind in IN_ROUND else _DECIDED_DIRECTLY for kind in KINDS
}

# Which decisions may be appealed: a request that got less than it asked for, once.
APPEALABLE = frozenset({PARTIALLY_GRANTED, REJECTED})


def allowed(kind: str, from_state: str, to_state: str) -> bool:
    """May a request of ``kind`` go from ``from_state`` to ``to_state``?"""
    return to_state in TRANSITIONS[kind].get(from_state, frozenset())


def decidable_from(kind: str) -> str:
    """The state a request of ``kind`` is decided from."""
    return UNDER_REVIEW if kind in IN_ROUND else SUBMITTED


def is_reviewed(kind: str) -> bool:
    """A request of ``kind`` goes to the round's committee before it is decided."""
    return kind in IN_ROUND


def is_appealable(kind: str, state: str) -> bool:
    """A decision that may be appealed: less than asked for, and not itself an appeal's."""
    return kind != "appeal" and state in APPEALABLE


def needs_progress_report(kind: str, round_requires: bool) -> bool:
    """A request of ``kind`` in a round that ``round_requires`` progress reports is submitted
    only with one: a renewal. No other kind ever needs one."""
    return kind == "renewal" and round_requires

"""Merit allocations' models, one module per domain (rounds, grants, slurm, priorities,
project requests, research outputs, what-if drafts). Every model is re-exported here: Django
registers them under the app ``allocations`` from this package, and the code imports them from
``allocations.models``.

SU are Decimal with 6 places everywhere, like the ledger of charges.
"""

# Migration 0005 names ``allocations.models.AuditedInProject`` (the mixin lived here before it
# moved to ``projects.models``); migrations are never edited, so the name must stay importable.
from allocations.models.grants import (
    Adjustment,
    Allocation,
    BudgetPeriod,
    EfficiencySummaryNotice,
    GrantExpiryNotice,
    ThresholdNotice,
)
from allocations.models.outputs import ProgressReport, ResearchOutput
from allocations.models.priorities import PriorityAction, PriorityPolicy, ProfilingCoefficient
from allocations.models.project_requests import (
    ProjectRequest,
    ProjectRequestAmount,
    ProjectRequestEstimate,
    ProjectRequestTransition,
)
from allocations.models.rounds import (
    AllocationRequest,
    AllocationRound,
    CommitteeMember,
    RequestAmount,
    RequestEstimate,
    RequestTransition,
    Review,
    ReviewAssignment,
    RoundPool,
)
from allocations.models.slurm import (
    EnforcementAction,
    SlurmDriftCheck,
    SlurmSyncAction,
    SlurmSyncPlan,
    SlurmSyncRequest,
)
from allocations.models.what_if import WhatIfDraft, WhatIfProposal
from projects.models import AuditedInProject

__all__ = [
    "Adjustment",
    "Allocation",
    "AllocationRequest",
    "AllocationRound",
    "AuditedInProject",
    "BudgetPeriod",
    "CommitteeMember",
    "EfficiencySummaryNotice",
    "EnforcementAction",
    "GrantExpiryNotice",
    "PriorityAction",
    "PriorityPolicy",
    "ProfilingCoefficient",
    "ProgressReport",
    "ProjectRequest",
    "ProjectRequestAmount",
    "ProjectRequestEstimate",
    "ProjectRequestTransition",
    "RequestAmount",
    "RequestEstimate",
    "RequestTransition",
    "ResearchOutput",
    "Review",
    "ReviewAssignment",
    "RoundPool",
    "SlurmDriftCheck",
    "SlurmSyncAction",
    "SlurmSyncPlan",
    "SlurmSyncRequest",
    "ThresholdNotice",
    "WhatIfDraft",
    "WhatIfProposal",
]

"""The models of accounting, a module per domain (one Django app, one migrations folder: the
split changed no table). Everything imports them from here."""

from accounting.models.carbon import GridIntensity
from accounting.models.clusters import (
    DEFAULT_SACCT_ARGUMENTS,
    Cluster,
    Partition,
    PartitionVersion,
    RateDraft,
)
from accounting.models.costs import CostModelVersion
from accounting.models.ledger import (
    EfficiencyBucket,
    EfficiencyDaily,
    EfficiencyMonthly,
    EfficiencySums,
    EnergyHourly,
    ImportRun,
    ImportRunChange,
    Job,
    LedgerStamp,
    ProjectUsageDaily,
    QuarantinedRecord,
    UsageDaily,
    UsageShapeDaily,
    UsageShapeMonthly,
)
from accounting.models.utilisation import (
    JobFairShare,
    OverheadPartitionResult,
    OverheadRun,
    UtilisationHourly,
    UtilisationMonth,
)

__all__ = [
    "DEFAULT_SACCT_ARGUMENTS",
    "Cluster",
    "CostModelVersion",
    "EfficiencyBucket",
    "EfficiencyDaily",
    "EfficiencyMonthly",
    "EfficiencySums",
    "EnergyHourly",
    "GridIntensity",
    "ImportRun",
    "ImportRunChange",
    "Job",
    "JobFairShare",
    "LedgerStamp",
    "OverheadPartitionResult",
    "OverheadRun",
    "Partition",
    "PartitionVersion",
    "ProjectUsageDaily",
    "QuarantinedRecord",
    "RateDraft",
    "UsageDaily",
    "UsageShapeDaily",
    "UsageShapeMonthly",
    "UtilisationHourly",
    "UtilisationMonth",
]

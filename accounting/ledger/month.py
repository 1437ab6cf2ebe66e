"""A job as a project's month lists it (``accounting.ledger.selectors.project_month_get``),
read by the monthly statements (``allocations.statements``). Pure: a plain record, so the
statements' pure assembly can hold the ledger's jobs as they come."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

_HOURS = Decimal(3600)


@dataclass(frozen=True)
class MonthJob:
    """A job booked in a project's month (charged or refunded)."""

    job_id: str
    cluster: str
    partition: str
    username: str
    state: str
    charge_state: str
    start: datetime | None
    end: datetime
    elapsed_seconds: int
    nodes: int
    service_units: Decimal
    energy_wh: Decimal
    """The job's best energy: Slurm's measurement where it has one, else the engine's estimate
    (``accounting.carbon.footprint.job_energy``)."""
    cost: Decimal | None
    """The stored money cost (``Job.cost``); None when no cost model priced the job."""
    cost_model: str  # "cluster vN name", "" when the job was not priced
    currency: str

    @property
    def node_hours(self) -> Decimal:
        return Decimal(self.nodes * self.elapsed_seconds) / _HOURS

"""What the ledger's columns can hold, checked before a row reaches the database.

A sacct line can carry a value no column holds (a 300-character JobName, ElapsedRaw of twenty
digits, a billing TRES beyond any decimal): sent as it is, one such row would make PostgreSQL
refuse the whole batch. Each value is checked here against the limit of its column, read from
the model, so a change of a column's size changes the check:

- a value of a *required* column out of range quarantines the line, naming the sacct column;
- an *optional* one (JobName, QOS, ExitCode, TimelimitRaw, ConsumedEnergyRaw, billing, and
  what the job used) is shortened or left out, with a warning on the job: it never costs the
  job its charge.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from accounting.models import Job
from projects.models import Project

__all__ = ["CHARGE_LIMITS", "COMPUTED_TEXT", "INPUT_LIMITS", "account_check", "limits_check"]


@dataclass(frozen=True)
class ColumnLimit:
    """One ledger column, the sacct column its value comes from, and whether it is optional."""

    attname: str
    source: str
    optional: bool = False


INPUT_LIMITS = (
    ColumnLimit("job_id", "JobID"),
    # The ledger's key: a JobIDRaw of 70 digits is no Slurm job id, and would make the COPY of
    # the whole batch fail.
    ColumnLimit("job_id_raw", "JobIDRaw"),
    ColumnLimit("run", "Start"),
    ColumnLimit("job_name", "JobName", optional=True),
    ColumnLimit("array_job_id", "JobID"),
    ColumnLimit("array_task_id", "JobID"),
    ColumnLimit("het_job_id", "JobID"),
    ColumnLimit("het_offset", "JobID"),
    ColumnLimit("username", "User"),
    ColumnLimit("qos", "QOS", optional=True),
    ColumnLimit("state", "State"),
    ColumnLimit("state_raw", "State"),
    ColumnLimit("exit_code", "ExitCode", optional=True),
    ColumnLimit("elapsed_seconds", "ElapsedRaw"),
    ColumnLimit("timelimit_minutes", "TimelimitRaw", optional=True),
    ColumnLimit("nnodes", "NNodes"),
    ColumnLimit("cpus", "AllocTRES"),
    ColumnLimit("memory_mb", "AllocTRES"),
    ColumnLimit("gpus", "AllocTRES"),
    ColumnLimit("billing", "AllocTRES", optional=True),
    ColumnLimit("consumed_energy_joules", "ConsumedEnergyRaw", optional=True),
    ColumnLimit("cpu_seconds_used", "TotalCPU", optional=True),
    ColumnLimit("memory_peak_mb", "TRESUsageInTot", optional=True),
    ColumnLimit("gpu_utilisation", "TRESUsageInAve", optional=True),
    ColumnLimit("gpu_memory_peak_mb", "TRESUsageInMax", optional=True),
)
# Text columns the import fills itself, never from a sacct value.
COMPUTED_TEXT = ("charge_state", "dominant_resource", "source_hash")
# What the engine computed from ElapsedRaw and AllocTRES: too large means those are absurd.
# What a queued or running job reserves comes from its time limit and size: left out if absurd.
CHARGE_LIMITS = (
    *(
        ColumnLimit(name, "ElapsedRaw/AllocTRES")
        for name in ("service_units", "pending_service_units", "energy_wh", "cost")
    ),
    ColumnLimit("reserved_service_units", "TimelimitRaw/ReqTRES", optional=True),
)


@functools.cache
def _bounds(attname: str) -> tuple[str, Any]:
    """The kind of a column ("text", "int", "decimal") and its largest value or length."""
    column = Job._meta.get_field(attname)
    if isinstance(column, models.CharField):
        return "text", column.max_length
    if isinstance(column, models.DecimalField):
        digits, places = column.max_digits or 0, column.decimal_places or 0
        return "decimal", Decimal(10) ** (digits - places)
    if isinstance(column, models.IntegerField):
        # The portable ranges (PostgreSQL's and MySQL's), not the backend's: SQLite stores any
        # 64-bit value, so the demo would book what a PostgreSQL ledger refuses, and a job of
        # 99,999,999,999 nodes went on to the charging engine.
        low, high = BaseDatabaseOperations.integer_field_ranges[column.get_internal_type()]
        return "int", (low, high)
    raise TypeError(f"no limit is known for {attname}")


@functools.cache
def _checks(limits: tuple[ColumnLimit, ...]) -> tuple[tuple[ColumnLimit, str, Any], ...]:
    # Read once per process: the check runs for every new or changed job of an import.
    return tuple((limit, *_bounds(limit.attname)) for limit in limits)


def limits_check(row: dict[str, Any], limits: tuple[ColumnLimit, ...]) -> tuple[str, str] | None:
    """Return (sacct column, reason) when a required value does not fit its column; shorten or
    drop optional values that do not, noting each in ``row["warnings"]``."""
    for limit, kind, bound in _checks(limits):
        value = row[limit.attname]
        if value is None or value == "":
            continue
        if kind == "text":
            if len(value) <= bound:
                continue
            if limit.optional:
                row[limit.attname] = value[:bound]
                row["warnings"].append(
                    f"{limit.source}: {len(value)} characters, shortened to the {bound} kept"
                )
                continue
            return limit.source, (
                f"{limit.source} is {len(value)} characters long; the ledger keeps at most {bound}"
            )
        if kind == "int":
            low, high = bound
            if (low is None or value >= low) and (high is None or value <= high):
                continue
            shown = f"{value}" if len(str(value)) <= 40 else f"{str(value)[:37]}..."
            reason = f"{limit.source} value {shown} is out of range ({low} to {high})"
        else:
            if -bound < value < bound:
                continue
            reason = (
                f"{limit.source} gives {limit.attname} {value:.6E}, beyond the ledger's {bound:.0E}"
            )
        if limit.optional:
            row[limit.attname] = None
            row["warnings"].append(f"{reason}; left out")
            continue
        return limit.source, reason
    return None


def account_check(account: str) -> tuple[str, str] | None:
    """Return (sacct column, reason) when a Slurm account is longer than any project code can
    be: no project books it, and none may be created for it (``--create-projects``)."""
    bound = Project._meta.get_field("code").max_length or 0
    if len(account) <= bound:
        return None
    return "Account", (
        f"Account is {len(account)} characters long; a project code holds at most {bound}"
    )

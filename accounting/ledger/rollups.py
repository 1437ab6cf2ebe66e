"""The roll-ups an import keeps in step with the ledger (DESIGN section 7): daily usage per
project, partition, user and day, the charged jobs per shape (day and month) that re-pricing
reads, the hourly core- and GPU-seconds that utilisation Q(T) reads, and the energy per hour of
the runs that CO2e reads. A batch gathers its
deltas in memory (a job added, or taken back and added again when its line changed) and
applies them in one sorted upsert per table, inside the batch's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import polars as pl
from django.db import connection

from accounting.carbon import footprint
from accounting.clusters import charging
from accounting.clusters.efficiency import Efficiency, job_efficiency
from accounting.ledger.usage import held_of, usage_of
from accounting.models import (
    EfficiencyBucket,
    EfficiencyDaily,
    EfficiencyMonthly,
    EnergyHourly,
    ImportRunChange,
    Job,
    LedgerStamp,
    ProjectUsageDaily,
    UsageDaily,
    UsageShapeDaily,
    UsageShapeMonthly,
    UtilisationHourly,
    UtilisationMonth,
)
from accounting.utilisation.peak import epoch_seconds, from_epoch_seconds
from accounting.utilisation.quality import AllocatedJob, hourly_contributions

_HOURS = Decimal(3600)
_ZERO = Decimal(0)
_MB_QUANTUM = Decimal("0.001")


def _contribution(values: dict[str, Any], zone: tzinfo) -> tuple[tuple[Any, ...], list[Any]]:
    """What a finished job adds to its day's roll-up: key and the amounts of ``DAILY_SUMS``
    (SU, core-h, GPU-h, Wh, cost, jobs, then measured Wh, the estimate of the measured job and
    whether it was measured)."""
    day = _day_of(values["end"], zone)
    hours = Decimal(values["elapsed_seconds"]) / _HOURS
    key = (values["project_id"], values["partition_id"], values["username"], day)
    measured = footprint.measured_energy_wh(values["consumed_energy_joules"])
    return key, [
        values["service_units"],
        (values["cpus"] * hours).quantize(charging.SU_QUANTUM),
        (values["gpus"] * hours).quantize(charging.SU_QUANTUM),
        values["energy_wh"],
        values["cost"] or _ZERO,
        1,
        measured or _ZERO,
        values["energy_wh"] if measured is not None else _ZERO,
        1 if measured is not None else 0,
    ]


def _day_of(end: datetime, zone: tzinfo) -> date:
    """The day a job's usage counts on: the cluster's local day it ended."""
    return end.astimezone(zone).date()


def is_booked(values: dict[str, Any]) -> bool:
    return values["charge_state"] != Job.ChargeState.PENDING and values["end"] is not None


@dataclass
class Deltas:
    """What a batch adds to the daily usage roll-ups and to the hourly utilisation rows."""

    daily: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    hourly: dict[tuple[int, datetime], list[int]] = field(default_factory=dict)
    efficiency: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    buckets: dict[tuple[Any, ...], int] = field(default_factory=dict)
    # (project, day, partition, nnodes, cpus, gpus, memory_mb): [jobs, seconds, SU]
    shapes: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    # (project, day, partition, UTC hour since 1970): best energy in millionths of a Wh
    energy: dict[tuple[int, date, int, int], int] = field(default_factory=dict)


def _held_until(values: dict[str, Any]) -> datetime | None:
    """Until when a job held its allocation as far as its sacct line tells: its end, or for
    a running job its start plus the Elapsed that sacct reported (so the hours a running job
    has used count in Q(T) now, and follow from the stored row alone: the next line of the
    job takes them back and adds its own, like any change)."""
    start = values["start"]
    if start is None or not (values["cpus"] or values["gpus"]):
        return None
    if values["end"] is not None:
        return values["end"] if is_booked(values) else None
    if values["charge_state"] == Job.ChargeState.PENDING and values["elapsed_seconds"] > 0:
        return start + timedelta(seconds=values["elapsed_seconds"])
    return None


def rollup_add(deltas: Deltas, values: dict[str, Any], zone: tzinfo, sign: int) -> None:
    """Add (``sign`` +1) or take back (-1) a job's share of the roll-ups: a booked job's
    usage of its day, and the hours any job held its allocation (running ones so far)."""
    if is_booked(values):
        key, amounts = _contribution(values, zone)
        current = deltas.daily.setdefault(
            key, [_ZERO if kind == "numeric" else 0 for kind in _DAILY_TYPES]
        )
        for index, amount in enumerate(amounts):
            current[index] += sign * amount
        if values["right_sized_service_units"] is not None:
            _efficiency_add(deltas, values, key, sign)
        if values["charge_state"] == Job.ChargeState.CHARGED:
            _shape_add(deltas, values, key[3], sign)
        _energy_hours_add(deltas, values, key[3], sign)
    _hours_add(deltas, values, zone, sign)


def _energy_hours_add(deltas: Deltas, values: dict[str, Any], day: date, sign: int) -> None:
    """A booked job's best energy over the UTC hours of its run (footprint's rule)."""
    measured = footprint.measured_energy_wh(values["consumed_energy_joules"])
    best = values["energy_wh"] if measured is None else measured
    end = epoch_seconds(values["end"])
    start = end if values["start"] is None else epoch_seconds(values["start"])
    for hour, share in footprint.energy_hour_shares(footprint.to_millionths(best), start, end):
        if share:
            key = (values["project_id"], day, values["partition_id"], hour)
            deltas.energy[key] = deltas.energy.get(key, 0) + sign * share


def _hours_add(deltas: Deltas, values: dict[str, Any], zone: tzinfo, sign: int) -> None:
    """A job's core- and GPU-seconds per clock hour it held its allocation."""
    held_until = _held_until(values)
    if held_until is None:
        return
    job = AllocatedJob(
        partition=str(values["partition_id"]), start=values["start"], end=held_until,
        cores=values["cpus"], gpus=values["gpus"],
    )  # fmt: skip
    for hour in hourly_contributions(job, timezone=zone):
        seconds = deltas.hourly.setdefault((values["partition_id"], hour.hour_start), [0, 0])
        seconds[0] += sign * hour.core_seconds
        seconds[1] += sign * hour.gpu_seconds


def _shape_add(deltas: Deltas, values: dict[str, Any], day: Any, sign: int) -> None:
    """A charged job's share of the shape roll-ups: one job, its seconds and its SU, under the
    size the engine priced (``split_evenly`` of these four)."""
    # Memory as the ledger's column keeps it (3 places, rounded half up as PostgreSQL rounds):
    # sacct's "1500K" is 1.46484375 MB, and the row read back for a changed line holds 1.465;
    # unrounded, the two would be two keys of one row, which one upsert may not touch twice.
    key = (
        values["project_id"], day, values["partition_id"], values["nnodes"], values["cpus"],
        values["gpus"], _shape_memory(values["memory_mb"]),
    )  # fmt: skip
    sums = deltas.shapes.get(key)
    if sums is None:
        sums = deltas.shapes[key] = [0, 0, _ZERO]
    sums[0] += sign
    sums[1] += sign * values["elapsed_seconds"]
    sums[2] += sign * values["service_units"]


def _shape_memory(memory_mb: Any) -> Decimal:
    """A shape's memory as the ledger's column keeps it (3 places, rounded half up as
    PostgreSQL rounds)."""
    return Decimal(memory_mb).quantize(_MB_QUANTUM, ROUND_HALF_UP)


def _efficiency_add(
    deltas: Deltas, values: dict[str, Any], key: tuple[Any, ...], sign: int
) -> None:
    """A measured job's share of the efficiency roll-ups (:data:`_EFFICIENCY_SUMS`, in order):
    sums of held and used, and one job in each metric's tenth. Each share that is not exact at
    the columns' 6 places is rounded once, so the sums are the same however the jobs fall into
    batches, and a share taken back cancels exactly. (One call per measured job of an import:
    written for speed, straight into the batch's sums.)"""
    held, usage = held_of(values), usage_of(values)
    ratios = job_efficiency(held, usage)
    quantum = charging.SU_QUANTUM
    hours = Decimal(held.elapsed_seconds) / _HOURS
    sums = deltas.efficiency.get(key)
    if sums is None:
        sums = deltas.efficiency[key] = _EFFICIENCY_ZEROS.copy()
    sums[0] += sign
    sums[1] += sign * values["service_units"]
    sums[2] += sign * values["right_sized_service_units"]
    sums[3] += sign * (held.cpus * hours).quantize(quantum)
    if usage.cpu_seconds:
        sums[4] += sign * (usage.cpu_seconds / _HOURS).quantize(quantum)
    if ratios.memory is not None:
        sums[5] += sign
        sums[6] += sign * (held.memory_mb * hours).quantize(quantum)
        if usage.memory_peak_mb:
            sums[7] += sign * (usage.memory_peak_mb * hours).quantize(quantum)
    if ratios.gpu is not None:
        gpu_hours = held.gpus * hours
        sums[8] += sign
        sums[9] += sign * gpu_hours.quantize(quantum)
        sums[10] += sign * (gpu_hours * ratios.gpu).quantize(quantum)
    if ratios.walltime is not None:
        sums[11] += sign
        sums[12] += sign * hours.quantize(quantum)
        sums[13] += sign * (Decimal(held.timelimit_minutes or 0) / 60).quantize(quantum)
    project_id, partition_id, username, day = key
    month = day.replace(day=1)
    buckets = deltas.buckets
    for metric, ratio in zip(Efficiency._fields, ratios, strict=True):
        if ratio is not None:
            bucket = (project_id, partition_id, username, month, metric, bucket_of(ratio))
            buckets[bucket] = buckets.get(bucket, 0) + sign


def _months_of(deltas: Deltas) -> dict[tuple[Any, ...], list[Any]]:
    """The batch's deltas of EfficiencyMonthly: per (project, partition, user, month), the
    charged jobs and SU of its days' UsageDaily deltas, then the sums of their EfficiencyDaily
    deltas."""
    jobs, service_units = DAILY_SUMS.index("jobs"), DAILY_SUMS.index("service_units")
    zero = [0, _ZERO, *_EFFICIENCY_ZEROS]
    months: dict[tuple[Any, ...], list[Any]] = {}
    for (project_id, partition_id, username, day), amounts in deltas.daily.items():
        key = (project_id, partition_id, username, day.replace(day=1))
        month = months.setdefault(key, zero.copy())
        month[0] += amounts[jobs]
        month[1] += amounts[service_units]
    for (project_id, partition_id, username, day), sums in deltas.efficiency.items():
        key = (project_id, partition_id, username, day.replace(day=1))
        month = months.setdefault(key, zero.copy())
        for index, amount in enumerate(sums, start=2):
            month[index] += amount
    return months


def bucket_of(ratio: Decimal) -> int:
    """The tenth an efficiency falls in: 0 for under 10 %, ..., 9 for 90 % to 100 %."""
    return min(int(ratio * 10), 9)


_EFFICIENCY_SUMS = (
    "jobs", "service_units", "right_sized_service_units", "core_hours_held", "core_hours_used",
    "memory_jobs", "memory_mb_hours_held", "memory_mb_hours_used", "gpu_jobs", "gpu_hours_held",
    "gpu_hours_used", "walltime_jobs", "hours_run", "hours_asked",
)  # fmt: skip
_EFFICIENCY_TYPES = tuple(
    "bigint" if name.endswith("jobs") else "numeric" for name in _EFFICIENCY_SUMS
)
_EFFICIENCY_ZEROS: list[Any] = [0 if name.endswith("jobs") else _ZERO for name in _EFFICIENCY_SUMS]


_MONTHLY_COLUMNS = (
    "project_id", "partition_id", "username", "month", "all_jobs", "charged_service_units",
    *_EFFICIENCY_SUMS,
)  # fmt: skip
_MONTHLY_TYPES = ("bigint", "bigint", "text", "date", "bigint", "numeric", *_EFFICIENCY_TYPES)


def efficiency_apply(deltas: Deltas) -> None:
    """Add the batch's efficiency sums to their days and months, and its distribution counts
    (one upsert each, sorted). The months are the batch's days folded (:func:`_months_of`):
    nothing more is computed per job."""
    rows = [(*key, *sums) for key, sums in sorted(deltas.efficiency.items()) if any(sums)]
    if rows:
        columns = ("project_id", "partition_id", "username", "day", *_EFFICIENCY_SUMS)
        types = ("bigint", "bigint", "text", "date", *_EFFICIENCY_TYPES)
        _upsert_adding(EfficiencyDaily._meta.db_table, columns, types, key=4, rows=rows)
    months = [(*key, *sums) for key, sums in sorted(_months_of(deltas).items()) if any(sums)]
    if months:
        _upsert_adding(
            EfficiencyMonthly._meta.db_table, _MONTHLY_COLUMNS, _MONTHLY_TYPES, key=4, rows=months
        )
    counts = [(*key, jobs) for key, jobs in sorted(deltas.buckets.items()) if jobs]
    if counts:
        _upsert_adding(
            EfficiencyBucket._meta.db_table,
            ("project_id", "partition_id", "username", "month", "metric", "bucket", "jobs"),
            ("bigint", "bigint", "text", "date", "text", "smallint", "bigint"),
            key=6,
            rows=counts,
        )


# The key of a shape row after its project and day or month, then its sums (Deltas.shapes).
_SHAPE_COLUMNS = (
    "partition_id", "nnodes", "cpus", "gpus", "memory_mb", "jobs", "elapsed_seconds",
    "service_units",
)  # fmt: skip
_SHAPE_TYPES = ("bigint", "bigint", "bigint", "bigint", "numeric", "bigint", "bigint", "numeric")


def shapes_apply(shapes: dict[tuple[Any, ...], list[Any]]) -> None:
    """Add the batch's charged jobs per shape to their days and months (one sorted upsert
    each); the months are the days folded, nothing more is computed per job."""
    months: dict[tuple[Any, ...], list[Any]] = {}
    for (project_id, day, *shape), sums in shapes.items():
        month = months.setdefault((project_id, day.replace(day=1), *shape), [0, 0, _ZERO])
        for index, amount in enumerate(sums):
            month[index] += amount
    for model, period, deltas in (
        (UsageShapeDaily, "day", shapes),
        (UsageShapeMonthly, "month", months),
    ):
        rows = [(*key, *sums) for key, sums in sorted(deltas.items()) if any(sums)]
        if rows:
            _upsert_adding(
                model._meta.db_table, ("project_id", period, *_SHAPE_COLUMNS),
                ("bigint", "date", *_SHAPE_TYPES), key=7, rows=rows,
            )  # fmt: skip


def run_changes_apply(rows: list[tuple[int, int, int, Decimal]]) -> None:
    """Add (run, project, corrected jobs, net SU change) rows to the runs' changes per project
    (``ImportRunChange``), in one sorted upsert."""
    _upsert_adding(
        ImportRunChange._meta.db_table,
        ("run_id", "project_id", "corrected_jobs", "service_units"),
        ("bigint", "bigint", "bigint", "numeric"),
        key=2,
        rows=sorted(rows),
    )


def hourly_apply(hourly: dict[tuple[int, datetime], list[int]]) -> None:
    """Add the batch's core- and GPU-seconds to the hourly utilisation rows (one upsert), and
    to the stamps of their UTC months (``UtilisationMonth``, one more upsert): the months' sums
    and one more change for each month the batch touched, which keys the cached Q(T) blocks."""
    rows = [(key, seconds) for key, seconds in sorted(hourly.items()) if any(seconds)]
    if not rows:
        return
    table = UtilisationHourly._meta.db_table
    columns = ("partition_id", "hour_start", "core_seconds", "gpu_seconds")
    values = [(p, hour, core, gpu) for (p, hour), (core, gpu) in rows]
    _upsert_adding(
        table, columns, ("bigint", "timestamptz", "bigint", "bigint"), key=2, rows=values
    )
    months: dict[tuple[int, date], list[int]] = {}
    for (partition_id, hour), (core, gpu) in rows:
        utc = from_epoch_seconds(epoch_seconds(hour))  # on the UTC calendar
        sums = months.setdefault((partition_id, date(utc.year, utc.month, 1)), [0, 0])
        sums[0] += core
        sums[1] += gpu
    _upsert_adding(
        UtilisationMonth._meta.db_table,
        ("partition_id", "month", "core_seconds", "gpu_seconds", "changes"),
        ("bigint", "date", "bigint", "bigint", "bigint"),
        key=2,
        rows=[(*key, core, gpu, 1) for key, (core, gpu) in sorted(months.items())],
    )


def energy_hours_apply(energy: dict[tuple[int, date, int, int], int]) -> None:
    """Add the batch's energy per hour to the hourly energy rows (one upsert)."""
    rows = [
        (project, day, partition, from_epoch_seconds(hour * 3600), _decimal(millionths))
        for (project, day, partition, hour), millionths in sorted(energy.items())
        if millionths
    ]
    if not rows:
        return
    columns = ("project_id", "day", "partition_id", "hour_start", "energy_wh")
    types = ("bigint", "date", "bigint", "timestamptz", "numeric")
    _upsert_adding(EnergyHourly._meta.db_table, columns, types, key=4, rows=rows)


DAILY_SUMS = (
    "service_units", "core_hours", "gpu_hours", "energy_wh", "cost", "jobs",
    "energy_measured_wh", "energy_measured_estimate_wh", "energy_measured_jobs",
)  # fmt: skip
_DAILY_TYPES = tuple("bigint" if name.endswith("jobs") else "numeric" for name in DAILY_SUMS)


def daily_apply(deltas: dict[tuple[Any, ...], list[Any]]) -> None:
    """Add the deltas to the daily roll-ups with one atomic upsert (sorted: no deadlocks)."""
    rows = [(*key, *amounts) for key, amounts in sorted(deltas.items()) if any(amounts)]
    if not rows:
        return
    columns = ("project_id", "partition_id", "username", "day", *DAILY_SUMS)
    types = ("bigint", "bigint", "text", "date", *_DAILY_TYPES)
    _upsert_adding(UsageDaily._meta.db_table, columns, types, key=4, rows=rows)
    _project_daily_apply(deltas)


# ProjectUsageDaily's sums: their places among DAILY_SUMS.
_PROJECT_DAILY_SUMS = ("service_units", "cost", "jobs")
_PROJECT_DAILY_AT = tuple(DAILY_SUMS.index(name) for name in _PROJECT_DAILY_SUMS)


def _project_daily_apply(deltas: dict[tuple[Any, ...], list[Any]]) -> None:
    """The same deltas summed over the users, added to ``ProjectUsageDaily`` (one upsert):
    the balance's roll-up is UsageDaily grouped by project, day and partition, by
    construction."""
    sums: dict[tuple[Any, ...], list[Any]] = {}
    for (project, partition, _username, day), amounts in deltas.items():
        current = sums.setdefault((project, day, partition), [_ZERO, _ZERO, 0])
        for place, index in enumerate(_PROJECT_DAILY_AT):
            current[place] += amounts[index]
    rows = [(*key, *amounts) for key, amounts in sorted(sums.items()) if any(amounts)]
    if not rows:
        return
    columns = ("project_id", "day", "partition_id", *_PROJECT_DAILY_SUMS)
    types = ("bigint", "date", "bigint", "numeric", "numeric", "bigint")
    _upsert_adding(ProjectUsageDaily._meta.db_table, columns, types, key=3, rows=rows)


def _array_param(column: tuple[Any, ...]) -> Any:
    """A column of an upsert as the text of a PostgreSQL array when its values are whole
    numbers, finite decimals or dates, which spell themselves in it (the driver then quotes one
    string instead of adapting each value); otherwise the list, for the driver to adapt."""
    kinds = set(map(type, column))
    if len(kinds) == 1 and (
        kinds <= {int, date} or (kinds == {Decimal} and all(map(Decimal.is_finite, column)))
    ):
        return "{" + ",".join(map(str, column)) + "}"
    return list(column)


def _upsert_adding(
    table: str,
    columns: tuple[str, ...],
    types: tuple[str, ...],
    *,
    key: int,
    rows: list[tuple[Any, ...]],
) -> None:
    """Insert ``rows`` into ``table``, adding the values of the columns after the first ``key``
    ones to a row that exists.

    On PostgreSQL the rows travel as one array per column (``unnest``): the statement's text is
    the same for every batch, so the driver parses it once (its cache is keyed on the text)
    instead of splitting a statement that grows with the batch, which was a third of the
    roll-ups' time; a column of numbers or dates goes as the text of its array
    (:func:`_array_param`). Elsewhere one ``executemany`` of the single-row statement.
    """
    names = ", ".join(columns)
    add = ", ".join(f"{name} = {table}.{name} + EXCLUDED.{name}" for name in columns[key:])
    conflict = f"ON CONFLICT ({', '.join(columns[:key])}) DO UPDATE SET {add}"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            arrays = ", ".join(f"%s::{kind}[]" for kind in types)
            cursor.execute(
                f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays}) {conflict}",  # noqa: S608
                [_array_param(column) for column in zip(*rows, strict=True)],
            )
            return
        placeholders = ", ".join(["%s"] * len(columns))
        cursor.executemany(
            f"INSERT INTO {table} ({names}) VALUES ({placeholders}) {conflict}",  # noqa: S608
            rows,
        )


# --------------------------------------------------------------------------------------------
# The same deltas for a batch's new rows at once

# Sizes past these go to the per-row path: within them every product below fits polars'
# 128-bit integers and the per-row Decimal maths (28 digits) is exact before it is rounded.
BULK_COUNT_LIMIT = 2**31
BULK_SECONDS_LIMIT = 2**40
_MILLION = 10**6


def rollups_add_new(deltas: Deltas, rows: list[dict[str, Any]], zone: tzinfo) -> None:
    """``rollup_add(deltas, values, zone, +1)`` for each of ``rows``, the arithmetic per row
    done in columns (polars, in whole millionths) and the rules that are not plain arithmetic
    once per distinct value: the local day of each end, the measured energy of each
    ConsumedEnergyRaw, the shape's memory of each size.

    ``rollup_add`` itself takes the rows the columns do not cover: pending and running jobs,
    jobs with an efficiency or a cost, sizes past the bounds above. The hours of a job go to
    the per-row split when the zone's offset is not a whole number of hours at the job's
    start or at an hour boundary it spans (its local hours are then not UTC hours).
    ``tests/accounting/test_rollups_bulk.py`` keeps the two forms equal.
    """
    columns: dict[str, list[Any]] = {name: [] for name in _BULK_SCHEMA}
    measured_of: dict[int | None, int | None] = {}
    memory_codes: dict[Any, int] = {}
    days: dict[datetime, Any] = {}
    bulk: list[dict[str, Any]] = []
    for values in rows:
        su = _millionths(values["service_units"]) if _bulk_ready(values) else None
        wh = _millionths(values["energy_wh"]) if su is not None else None
        if su is None or wh is None:
            rollup_add(deltas, values, zone, +1)
            continue
        joules = values["consumed_energy_joules"]
        if joules not in measured_of:
            measured = footprint.measured_energy_wh(joules)
            measured_of[joules] = None if measured is None else _millionths(measured)
        end = values["end"]
        day = days.get(end)
        if day is None:
            day = days[end] = _day_of(end, zone)
        bulk.append(values)
        columns["project_id"].append(values["project_id"])
        columns["partition_id"].append(values["partition_id"])
        columns["username"].append(values["username"])
        columns["day"].append(day)
        columns["su"].append(su)
        columns["wh"].append(wh)
        columns["measured"].append(measured_of[joules])
        columns["cpus"].append(values["cpus"])
        columns["gpus"].append(values["gpus"])
        columns["elapsed"].append(values["elapsed_seconds"])
        columns["charged"].append(values["charge_state"] == Job.ChargeState.CHARGED)
        columns["nnodes"].append(values["nnodes"])
        columns["memory"].append(memory_codes.setdefault(values["memory_mb"], len(memory_codes)))
        columns["start"].append(epoch_seconds(values["start"]))
        columns["end"].append(epoch_seconds(end))
    if not bulk:
        return
    frame = pl.DataFrame(columns, schema=_BULK_SCHEMA)
    _daily_bulk(deltas, frame)
    memories = {code: _shape_memory(memory) for memory, code in memory_codes.items()}
    _shapes_bulk(deltas, frame, memories)
    _hours_bulk(deltas, frame, rows=bulk, zone=zone)
    _energy_hours_bulk(deltas, frame)


def rollups_add_frame(
    deltas: Deltas,
    frame: pl.DataFrame,
    memories: list[Decimal],
    zone: tzinfo,
    efficiencies: Iterable[dict[str, Any]] = (),
) -> None:
    """:func:`rollups_add_new` for the new rows of ``accounting.ledger.frame_rows`` (booked,
    finished jobs with no cost, of sizes the columns sum), read from their frame without a row
    in Python. ``memories`` are the AllocTRES memories of the frame's ``alloc`` codes. The
    local day of each end comes from the zone's offset over its UTC hour, looked up once per
    hour (per row, with ``_day_of``, in an hour the offset changes in). ``efficiencies`` are the
    rows with a right-sized SU (``frame_rows.NewRows.measured``): their efficiency shares are
    added job by job, as ``rollup_add`` adds them."""
    if frame.is_empty():
        return
    for values in efficiencies:
        key = (values["project_id"], values["partition_id"], values["username"])
        _efficiency_add(deltas, values, (*key, _day_of(values["end"], zone)), +1)
    end = pl.col("end_s")
    day = pl.lit(local_day_numbers(frame.get_column("end_s"), zone))
    joules = pl.col("consumed_energy_joules").cast(pl.Int128)
    measured = pl.when(joules > 0).then(
        # footprint.measured_energy_wh: joules / 3600 to 6 places, half-even.
        _half_even_quotient(joules * _MILLION, 3600)
    )
    bulk = frame.select(
        "project_id",
        "partition_id",
        pl.col("user").alias("username"),
        day.cast(pl.Int32).cast(pl.Date).alias("day"),
        pl.col("su_q").alias("su"),
        pl.col("wh_q").alias("wh"),
        measured.alias("measured"),
        "cpus",
        "gpus",
        pl.col("elapsed_seconds").alias("elapsed"),
        (pl.col("charge_state") == Job.ChargeState.CHARGED).alias("charged"),
        "nnodes",
        pl.col("alloc").alias("memory"),
        pl.col("start_s").alias("start"),
        end.alias("end"),
    ).cast(_BULK_SCHEMA)  # type: ignore[arg-type]
    _daily_bulk(deltas, bulk)
    _shapes_bulk(
        deltas, bulk, {code: _shape_memory(memory) for code, memory in enumerate(memories)}
    )
    _hours_bulk(deltas, bulk, rows=_FrameRows(frame), zone=zone)
    _energy_hours_bulk(deltas, bulk)


_EPOCH_DAY = date(1970, 1, 1)


def local_day_numbers(ends: pl.Series, zone: tzinfo) -> pl.Series:
    """``_day_of`` of each end (Unix seconds), as days since 1970-01-01: the zone's offset is
    looked up once per UTC hour the ends fall in, and used where it is the same at the
    hour's first and last second; in an hour the offset changes in, each end is read with
    ``_day_of`` itself."""
    offsets: dict[int, int] = {}
    for hour in (ends // 3600).unique().to_list():
        first = _offset_seconds(hour * 3600, zone)
        if first == _offset_seconds(hour * 3600 + 3599, zone):
            offsets[hour] = first
    frame = pl.DataFrame({"end": ends}, schema={"end": pl.Int64})
    end = pl.col("end")
    offset = (end // 3600).replace_strict(offsets, default=None, return_dtype=pl.Int64)
    local_days = {
        seconds: (_day_of(from_epoch_seconds(seconds), zone) - _EPOCH_DAY).days
        for seconds in frame.filter(offset.is_null()).get_column("end").unique().to_list()
    }
    return frame.select(
        pl.when(offset.is_not_null())
        .then((end + offset) // 86400)
        .otherwise(end.replace_strict(local_days, default=None, return_dtype=pl.Int64))
        .alias("day")
    ).get_column("day")


def _offset_seconds(seconds: int, zone: tzinfo) -> int:
    offset = datetime.fromtimestamp(seconds, zone).utcoffset()
    return 0 if offset is None else int(offset.total_seconds())


def _half_even_quotient(numerator: pl.Expr, denominator: int) -> pl.Expr:
    quanta = numerator // denominator
    twice = (numerator - quanta * denominator) * 2
    up = (twice > denominator) | ((twice == denominator) & (quanta % 2 == 1))
    return quanta + up.cast(pl.Int128)


class _FrameRows:
    """The few values ``_hours_add`` reads of a frame's row, for the rows whose local hours
    are not UTC hours."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = self.frame.row(index, named=True)
        return {
            "partition_id": row["partition_id"],
            "start": from_epoch_seconds(row["start_s"]),
            "end": from_epoch_seconds(row["end_s"]),
            "cpus": row["cpus"],
            "gpus": row["gpus"],
            "charge_state": row["charge_state"],
            "elapsed_seconds": row["elapsed_seconds"],
        }


_BULK_SCHEMA: dict[str, Any] = {
    "project_id": pl.Int64, "partition_id": pl.Int64, "username": pl.String, "day": pl.Date,
    "su": pl.Int128, "wh": pl.Int128, "measured": pl.Int128, "cpus": pl.Int64,
    "gpus": pl.Int64, "elapsed": pl.Int64, "charged": pl.Boolean, "nnodes": pl.Int64,
    "memory": pl.Int64, "start": pl.Int64, "end": pl.Int64,
}  # fmt: skip


def _bulk_ready(values: dict[str, Any]) -> bool:
    """Whether a new row's deltas are plain sums: a booked job that ran, with no cost and no
    efficiency, of a size whose products stay exact."""
    start, end = values["start"], values["end"]
    return (
        start is not None
        and end is not None
        and start <= end
        and values["charge_state"] != Job.ChargeState.PENDING
        and values["cost"] is None
        and values["right_sized_service_units"] is None
        and 0 <= values["cpus"] < BULK_COUNT_LIMIT
        and 0 <= values["gpus"] < BULK_COUNT_LIMIT
        and 0 <= values["elapsed_seconds"] < BULK_SECONDS_LIMIT
    )


def _millionths(amount: Any) -> int | None:
    """A Decimal of at most 6 places as a whole number of millionths (None otherwise)."""
    if not isinstance(amount, Decimal) or not amount.is_finite():
        return None
    scaled = amount.scaleb(6)
    whole = int(scaled)
    return whole if whole == scaled else None


def _hours_quanta(count: pl.Expr) -> pl.Expr:
    """``count * elapsed / 3600`` hours in millionths, rounded half-even: ``_contribution``'s
    ``(cpus * hours).quantize(SU_QUANTUM)``."""
    numerator = count.cast(pl.Int128) * pl.col("elapsed") * _MILLION
    quanta = numerator // 3600
    twice = (numerator - quanta * 3600) * 2
    up = (twice > 3600) | ((twice == 3600) & (quanta % 2 == 1))
    return quanta + up.cast(pl.Int128)


def _daily_bulk(deltas: Deltas, frame: pl.DataFrame) -> None:
    measured = pl.col("measured").is_not_null()
    sums = frame.group_by("project_id", "partition_id", "username", "day").agg(
        pl.col("su").sum(),
        _hours_quanta(pl.col("cpus")).sum().alias("core"),
        _hours_quanta(pl.col("gpus")).sum().alias("gpu"),
        pl.col("wh").sum(),
        pl.len().alias("jobs"),
        pl.col("measured").fill_null(0).sum(),
        pl.when(measured).then(pl.col("wh")).otherwise(0).sum().alias("estimate"),
        measured.sum().alias("measured_jobs"),
    )
    for project_id, partition_id, username, day, *amounts in sums.iter_rows():
        su, core, gpu, wh, jobs, measured_wh, estimate, measured_jobs = amounts
        current = deltas.daily.setdefault(
            (project_id, partition_id, username, day),
            [_ZERO if kind == "numeric" else 0 for kind in _DAILY_TYPES],
        )
        added = (
            _decimal(su), _decimal(core), _decimal(gpu), _decimal(wh), _ZERO, jobs,
            _decimal(measured_wh), _decimal(estimate), measured_jobs,
        )  # fmt: skip
        for index, amount in enumerate(added):
            current[index] += amount


def _decimal(millionths: int) -> Decimal:
    return Decimal(millionths).scaleb(-6)


def _shapes_bulk(deltas: Deltas, frame: pl.DataFrame, memories: dict[int, Decimal]) -> None:
    sums = (
        frame.filter(pl.col("charged"))
        .group_by("project_id", "day", "partition_id", "nnodes", "cpus", "gpus", "memory")
        .agg(pl.len(), pl.col("elapsed").cast(pl.Int128).sum(), pl.col("su").sum())
    )
    for *shape, memory, jobs, elapsed, su in sums.iter_rows():
        key = (*shape, memories[memory])
        current = deltas.shapes.get(key)
        if current is None:
            current = deltas.shapes[key] = [0, 0, _ZERO]
        current[0] += jobs
        current[1] += elapsed
        current[2] += _decimal(su)


def _hours_bulk(deltas: Deltas, frame: pl.DataFrame, *, rows: Any, zone: tzinfo) -> None:
    """The hours of the rows in ``frame`` that held cores or GPUs, split by UTC hours; a row
    whose local hours are not UTC hours is split by :func:`_hours_add`."""
    held = frame.with_row_index("row").filter(
        ((pl.col("cpus") > 0) | (pl.col("gpus") > 0)) & (pl.col("start") < pl.col("end"))
    )
    if held.is_empty():
        return
    hours = held.select(
        "row", "partition_id", "cpus", "gpus", "start", "end",
        pl.int_ranges(
            pl.col("start") // 3600, (pl.col("end") - 1) // 3600 + 1
        ).alias("hour"),
    ).explode("hour")  # fmt: skip
    # Where the per-row split looks at the zone: each job's start and every hour boundary
    # from the hour it starts in to the first one at or after its end.
    instants = pl.concat(
        [
            hours.select((pl.col("hour") * 3600).alias("at")),
            held.select((((pl.col("end") - 1) // 3600 + 1) * 3600).alias("at")),
            held.select(pl.col("start").alias("at")),
        ]
    ).unique()
    off_hours = [seconds for (seconds,) in instants.iter_rows() if not _on_utc_hours(seconds, zone)]
    if off_hours:
        off = pl.Series(off_hours, dtype=pl.Int64).implode()
        local = (
            hours.filter(
                (pl.col("hour") * 3600).is_in(off)
                | ((pl.col("hour") + 1) * 3600).is_in(off)
                | pl.col("start").is_in(off)
            )
            .get_column("row")
            .unique()
        )
        for row in local.to_list():
            _hours_add(deltas, rows[row], zone, +1)
        hours = hours.filter(~pl.col("row").is_in(local.implode()))
    hour_start = pl.col("hour") * 3600
    seconds = pl.min_horizontal("end", hour_start + 3600) - pl.max_horizontal("start", hour_start)
    sums = hours.group_by("partition_id", "hour").agg(
        # 128 bits: a sum over any number of jobs stays exact, as Python's ints are.
        (pl.col("cpus").cast(pl.Int128) * seconds).sum(),
        (pl.col("gpus").cast(pl.Int128) * seconds).sum(),
    )
    for partition_id, hour, core_seconds, gpu_seconds in sums.iter_rows():
        current = deltas.hourly.setdefault((partition_id, from_epoch_seconds(hour * 3600)), [0, 0])
        current[0] += core_seconds
        current[1] += gpu_seconds


def _energy_hours_bulk(deltas: Deltas, frame: pl.DataFrame) -> None:
    """``_energy_hours_add`` of every row of ``frame`` in columns: the same shares
    (``footprint.energy_hour_shares``: the cumulative share rounded down, differenced)."""
    start, end = pl.col("start"), pl.col("end")
    ran = end > start
    first = pl.when(ran).then(start // 3600).otherwise(end // 3600)
    after = pl.when(ran).then((end - 1) // 3600 + 1).otherwise(end // 3600 + 1)
    hours = frame.select(
        "project_id", "day", "partition_id", "start", "end",
        pl.coalesce("measured", "wh").cast(pl.Int128).alias("best"),
        pl.int_ranges(first, after).alias("hour"),
    ).explode("hour")  # fmt: skip
    best, hour = pl.col("best"), pl.col("hour")
    duration = end - start
    through = best * (pl.min_horizontal(end, (hour + 1) * 3600) - start) // duration
    before = best * (pl.max_horizontal(start, hour * 3600) - start) // duration
    share = pl.when(duration > 0).then(through - before).otherwise(best)
    sums = (
        hours.with_columns(share.alias("share"))
        .filter(pl.col("share") != 0)
        .group_by("project_id", "day", "partition_id", "hour")
        .agg(pl.col("share").sum())
    )
    energy = deltas.energy
    for project_id, day, partition_id, hour_number, millionths in sums.iter_rows():
        key = (project_id, day, partition_id, hour_number)
        energy[key] = energy.get(key, 0) + millionths


def _on_utc_hours(seconds: int, zone: tzinfo) -> bool:
    """Whether the zone's local time at ``seconds`` is as far past its hour as UTC is (its
    offset is a whole number of hours there)."""
    local = datetime.fromtimestamp(seconds, zone)
    return local.minute * 60 + local.second == seconds % 3600


def ledger_stamp_move() -> None:
    """One more committed batch (``LedgerStamp``), in the caller's transaction: what caches
    keyed on :func:`accounting.ledger.selectors.ledger_stamp` see move. The row is written if
    it is missing (a test database flushed)."""
    table = connection.ops.quote_name(LedgerStamp._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (id, batches) VALUES (1, 1) "  # noqa: S608 - a table name
            f"ON CONFLICT (id) DO UPDATE SET batches = {table}.batches + 1"
        )

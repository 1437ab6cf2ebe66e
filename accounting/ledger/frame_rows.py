"""New ledger rows of fast lines as one polars frame, from the pricer to the COPY and the
roll-ups (docs/importing.md, "Columns end to end").

The import's first pass over a file is almost all new, finished jobs read by the columnar
reader (:class:`~accounting.ledger.columnar.FastLine`). Their rows used to be priced into one
Python dict per row, copied, gathered back into columns for the roll-ups and formatted value
by value for the COPY: most of the write stage. Here the batch's new fast lines become one
frame, and stay one:

- :func:`new_rows_priced` prices them in columns. Each rule runs once per distinct value with
  the import's own lookups and the charging engine (the account's project, created in the
  order the lines name them; the partition; the rate version in force at each start; the
  user; one :func:`~accounting.clusters.charging.charge_rate` per shape, checked once against
  ``charge()``; the booking of each state), and per row only integer arithmetic: SU and Wh as
  ``elapsed x rate`` rounded half-even in 128-bit integers, exactly as the engine rounds.
  A line the columns do not vouch for (an unknown account or partition, a time the common
  case does not cover, no rate version, a charge beyond the ledger or beyond 128 bits, a cost
  model, a size the bulk roll-ups do not sum) is handed back, for ``ShapePricer.rows`` and
  then the per-line code, which decide as before.
- :func:`copy_text` makes the ledger's and the key table's ``COPY`` text from the frame in
  polars, every column formatted by its type in one expression.
- ``rollups.rollups_add_frame`` sums the frame's roll-up deltas.

The frame's rows are exactly the rows ``ShapePricer.rows`` and ``pipeline._row_for`` make of
the same lines (``tests/accounting/test_columnar.py`` imports every sample both ways;
``tests/accounting/test_frame_rows.py`` pins the pieces).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

import polars as pl

from accounting.clusters.efficiency import JobUsage
from accounting.ledger.columnar import FastLine, ShapePricer, _quanta_bound
from accounting.ledger.limits import INPUT_LIMITS, _bounds, account_check, limits_check
from accounting.ledger.policy import booking_for
from accounting.ledger.rollups import BULK_COUNT_LIMIT, BULK_SECONDS_LIMIT
from accounting.ledger.usage import (
    USAGE_COLUMNS,
    memory_basis_notes,
    right_sized_of,
    usage_values,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
# Products of elapsed x rate x 10^6 stay below this, so that 128-bit integers hold them.
_INT128_SAFE = 2**126
_MILLION = 10**6


class NewRows(NamedTuple):
    """The priced rows of a batch's new fast lines, the lines left to the other paths, the
    memory of each AllocTRES code (the frame's ``alloc``), and the values the efficiency
    roll-ups read of each row with a right-sized SU (``rollups._efficiency_add``'s)."""

    frame: pl.DataFrame
    left: list[FastLine]
    memories: list[Decimal]
    measured: list[dict[str, Any]] = []


def _whole_seconds_up(moment: datetime) -> int:
    """The first whole second at or after ``moment``, as Unix seconds."""
    delta = moment - _EPOCH
    seconds = delta // _SECOND
    return seconds + 1 if delta % _SECOND else seconds


def _whole_seconds_down(moment: datetime) -> int:
    return (moment - _EPOCH) // _SECOND


def _half_even(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """``numerator / denominator`` rounded half-even to a whole number (both non-negative)."""
    quanta = numerator // denominator
    twice = (numerator - quanta * denominator) * 2
    up = (twice > denominator) | ((twice == denominator) & (quanta % 2 == 1))
    return quanta + up.cast(pl.Int128)


def _lines_frame(lines: Sequence[FastLine]) -> tuple[pl.DataFrame, list[Any]]:
    """The lines' values as one frame in their order (``index``), gathered from their chunks'
    tables, with each repeating column's reading joined in by value; and the distinct
    AllocTRES readings, whose positions are the frame's ``alloc`` codes."""
    by_chunk: dict[int, tuple[Any, list[int], list[int]]] = {}
    for index, line in enumerate(lines):
        entry = by_chunk.get(id(line.chunk))
        if entry is None:
            entry = by_chunk[id(line.chunk)] = (line.chunk, [], [])
        entry[1].append(line.row)
        entry[2].append(index)
    allocs: dict[str, Any] = {}
    parts = []
    for chunk, rows, indexes in by_chunk.values():
        part = chunk.table[rows]
        for text in part.get_column("s7").unique(maintain_order=True).to_list():
            allocs.setdefault(text, chunk.allocs[text])
        energy = pl.col("energy")
        parts.append(
            part.select(
                pl.Series("index", indexes, dtype=pl.Int64),
                "line_number", "job_id", "job_id_raw", "array_job_id", "array_task_id",
                "job_name",
                pl.col("Submit").alias("submit_s"),
                pl.col("Start").alias("start_s"),
                pl.col("End").alias("end_s"),
                pl.col("elapsed").cast(pl.Int64).alias("elapsed_seconds"),
                pl.when(energy != "").then(energy).cast(pl.Int64).alias("consumed_energy_joules"),
                pl.col("s0").alias("user"),
                pl.col("s1").alias("account"),
                pl.col("s2").alias("partition"),
                pl.col("s3").replace_strict(chunk.states, return_dtype=pl.String).alias("state"),
                pl.col("s3").alias("state_raw"),
                pl.col("s4").alias("nodelist"),
                pl.col("s5").replace_strict(chunk.nnodes, return_dtype=pl.Int64).alias("nnodes"),
                pl.col("s10")
                .replace_strict(chunk.timelimits, return_dtype=pl.Int64)
                .alias("timelimit_minutes"),
                pl.col("s11").alias("qos"),
                pl.col("s12").alias("exit_code"),
                pl.col("s7").alias("alloc_text"),
            )
        )  # fmt: skip
    codes = {text: code for code, text in enumerate(allocs)}
    frame = (
        pl.concat(parts)
        .sort("index")
        .with_columns(
            pl.col("alloc_text").replace_strict(codes, return_dtype=pl.Int64).alias("alloc")
        )
        .drop("alloc_text")
    )
    return frame, list(allocs.values())


def new_rows_priced(
    pricer: ShapePricer,
    lines: Sequence[FastLine],
    *,
    earliest: datetime,
    max_held: timedelta,
    usages: Mapping[str, JobUsage] | None = None,
) -> NewRows:
    """Price ``lines`` (new fast lines of one batch, in the batch's order) in columns.

    ``earliest`` and ``max_held`` are the common case of ``pipeline._time_problem`` (with the
    lookups' horizon); a line outside it is left to the pricer's own check. ``usages`` are
    what the jobs used, by JobIDRaw (their lines' usage columns with their steps'): a row of
    one gets the usage columns, the note on how memory was measured and the right-sized SU,
    job by job with ``_row_for``'s own functions (:func:`_measured_values`).
    """
    lookups = pricer.lookups
    if not lines or lookups.pricer is not None:
        # A cost model prices each job by its node list: the per-line code's work.
        return NewRows(pl.DataFrame(), list(lines), [])
    started = time.perf_counter()
    projects = pricer.projects
    frame, alloc_list = _lines_frame(lines)
    # The per-line order: each account's project first (it may be created), in the order the
    # lines name them; an account the per-line code quarantines creates nothing.
    project_ids: dict[str, int] = {}
    for account in frame.get_column("account").unique(maintain_order=True).to_list():
        project = projects.get(account)
        if project is None:
            if account_check(account) is not None:
                continue
            project = projects[account] = lookups.project(account)
        if project is not None:
            project_ids[account] = project.pk
    partitions = {
        name: lookups.partition(name) for name in frame.get_column("partition").unique().to_list()
    }
    user_ids = {user: lookups.user_id(user) for user in frame.get_column("user").unique().to_list()}
    alloc_table = pl.DataFrame(
        {
            "alloc": range(len(alloc_list)),
            "cpus": [alloc.cpus for alloc in alloc_list],
            "gpus": [alloc.gpus for alloc in alloc_list],
            "memory_text": [str(alloc.memory_mb) for alloc in alloc_list],
            "billing_text": [
                None if alloc.billing is None else str(alloc.billing) for alloc in alloc_list
            ],
        },
        schema={
            "alloc": pl.Int64, "cpus": pl.Int64, "gpus": pl.Int64, "memory_text": pl.String,
            "billing_text": pl.String,
        },
    )  # fmt: skip
    horizon = _whole_seconds_down(lookups.horizon)
    low = _whole_seconds_up(earliest)
    submit, start, end = pl.col("submit_s"), pl.col("start_s"), pl.col("end_s")
    partition_of = {name: p.pk for name, p in partitions.items() if p is not None}
    frame = (
        frame.join(alloc_table, on="alloc", how="left")
        .with_columns(
            pl.col("account")
            .replace_strict(project_ids, default=None, return_dtype=pl.Int64)
            .alias("project_id"),
            pl.col("partition")
            .replace_strict(partition_of, default=None, return_dtype=pl.Int64)
            .alias("partition_id"),
        )
        .filter(
            pl.col("project_id").is_not_null()
            & pl.col("partition_id").is_not_null()
            # pipeline._time_problem's common case; any other line is the pricer's to judge.
            & submit.is_between(low, horizon)
            & (start >= low)
            & (start <= end)
            & (end <= horizon)
            & (end - start <= max_held // _SECOND)
            # Sizes the roll-ups sum in columns.
            & (pl.col("cpus") < BULK_COUNT_LIMIT)
            & (pl.col("gpus") < BULK_COUNT_LIMIT)
            & (pl.col("elapsed_seconds") < BULK_SECONDS_LIMIT)
        )
    )
    # The rate version in force at each start: the newest that took effect at or before it.
    versions: dict[int, Any] = {}
    chain: Any = None
    for partition in partitions.values():
        if partition is None:
            continue
        for version in lookups.versions_of(partition):
            versions[version.pk] = version
            when = (pl.col("partition_id") == partition.pk) & (
                start >= _whole_seconds_up(version.effective_from)
            )
            chain = (pl.when(when) if chain is None else chain.when(when)).then(
                pl.lit(version.pk, dtype=pl.Int64)
            )
    if chain is None:
        return NewRows(pl.DataFrame(), list(lines), [])
    frame = frame.with_columns(chain.otherwise(None).alias("version_id")).filter(
        pl.col("version_id").is_not_null()
    )
    # One rate per shape, checked against the engine; shapes whose products could pass 128
    # bits, or that the engine refuses, are the pricer's.
    shapes = frame.group_by("version_id", "nnodes", "alloc").agg(pl.col("elapsed_seconds").max())
    rates: dict[str, list[Any]] = {
        name: [] for name in ("version_id", "nnodes", "alloc", "su_n", "su_d", "wh_n", "wh_d")
    }
    dominant: dict[str, list[Any]] = {"version_id": [], "nnodes": [], "alloc": [], "dom": []}
    for version_id, nnodes, alloc, longest in shapes.iter_rows():
        rate = pricer._rate(versions[version_id], nnodes, alloc_list[alloc])
        if rate is None:
            continue
        (su_n, su_d), (wh_n, wh_d) = rate.service_units_per_second, rate.energy_wh_per_second
        if (
            max(su_n, wh_n) * _MILLION * max(longest, 1) >= _INT128_SAFE
            or max(su_d, wh_d) >= _INT128_SAFE
        ):
            continue
        for name, value in zip(
            rates, (version_id, nnodes, alloc, su_n, su_d, wh_n, wh_d), strict=True
        ):
            rates[name].append(value)
        for name, value in zip(
            dominant, (version_id, nnodes, alloc, rate.dominant_resource), strict=True
        ):
            dominant[name].append(value)
    rate_table = pl.DataFrame(
        {**rates, "dom": dominant["dom"]},
        schema={
            "version_id": pl.Int64, "nnodes": pl.Int64, "alloc": pl.Int64, "su_n": pl.Int128,
            "su_d": pl.Int128, "wh_n": pl.Int128, "wh_d": pl.Int128, "dom": pl.String,
        },
    )  # fmt: skip
    elapsed = pl.col("elapsed_seconds").cast(pl.Int128) * _MILLION
    frame = (
        frame.join(rate_table, on=["version_id", "nnodes", "alloc"], how="inner")
        .with_columns(
            _half_even(elapsed * pl.col("su_n"), pl.col("su_d")).alias("su_q"),
            _half_even(elapsed * pl.col("wh_n"), pl.col("wh_d")).alias("wh_q"),
        )
        .filter(
            (pl.col("su_q") < _quanta_bound("service_units"))
            & (pl.col("wh_q") < _quanta_bound("energy_wh"))
        )
    )
    # The booking of each state: how much of the charge is booked, how much held pending.
    refund = lookups.cluster.refund_node_failures
    outcome, booked, pending = {}, {}, {}
    for state in frame.get_column("state").unique().to_list():
        booking = booking_for(
            finished=True, state=state, service_units=Decimal(1), refund_node_failures=refund
        )
        outcome[state] = str(booking.outcome)
        booked[state] = int(booking.service_units)
        pending[state] = int(booking.pending_service_units)
    state = pl.col("state")
    frame = frame.with_columns(
        state.replace_strict(outcome, return_dtype=pl.String).alias("charge_state"),
        (pl.col("su_q") * state.replace_strict(booked, return_dtype=pl.Int64)).alias("su_q"),
        (pl.col("su_q") * state.replace_strict(pending, return_dtype=pl.Int64)).alias("pending_q"),
        pl.col("user").replace_strict(user_ids, default=None, return_dtype=pl.Int64)
        .alias("user_id"),
    ).sort("index")  # fmt: skip
    measured: list[dict[str, Any]] = []
    if usages:
        frame, measured = _measured_values(frame, usages, versions, alloc_list)
    taken = set(frame.get_column("index").to_list())
    left = [line for index, line in enumerate(lines) if index not in taken]
    weights = {pk: version.weight for pk, version in versions.items()}
    frame = frame.with_columns(
        pl.col("version_id")
        .replace_strict(
            {pk: None if weight is None else str(weight) for pk, weight in weights.items()},
            return_dtype=pl.String,
        )
        .alias("weight_text")
    )
    if pricer.stages is not None:
        pricer.stages.add("price", started)
    return NewRows(frame, left, [alloc.memory_mb for alloc in alloc_list], measured)


# The usage columns a sacct line fills, with the limits ``_row_for`` checks them against.
_USAGE_LIMITS = tuple(limit for limit in INPUT_LIMITS if limit.attname in USAGE_COLUMNS)
# Whatever the per-line code would find beyond its column leaves the frame for it.
_RIGHT_SIZED_BOUND = _bounds("right_sized_service_units")[1]


def _measured_values(
    frame: pl.DataFrame,
    usages: Mapping[str, JobUsage],
    versions: Mapping[int, Any],
    allocs: Sequence[Any],
) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """The frame with what its measured jobs used, as ``_row_for`` makes it of each: the usage
    columns kept to their places (``usage_values``) and checked against their columns
    (``limits_check``: a value beyond one is left out, with a warning), the note on how memory
    was measured, and the right-sized SU of the booked SU (``usage.right_sized_of``: none
    without the CPU time). Per measured job in Python: these are per-job rules, and a
    measured job is a fraction of a dump's lines. Returns the frame with ``warnings`` (JSON),
    the usage columns and ``right_sized`` as text, and the values the efficiency roll-ups read
    of each row with a right-sized SU."""
    wanted = frame.filter(pl.col("job_id_raw").is_in(list(usages))).select(
        "index", "job_id_raw", "version_id", "project_id", "partition_id", "user", "end_s",
        "nnodes", "cpus", "alloc", "gpus", "elapsed_seconds", "timelimit_minutes", "su_q",
    )  # fmt: skip
    columns: dict[str, list[Any]] = {
        name: [] for name in ("index", "warnings", *USAGE_COLUMNS, "right_sized")
    }
    measured: list[dict[str, Any]] = []
    too_large: list[int] = []
    for (
        index, job_id_raw, version_id, project_id, partition_id, username, end_s, nnodes, cpus,
        alloc, gpus, elapsed, timelimit, su_q,
    ) in wanted.iter_rows():  # fmt: skip
        used = usages[job_id_raw]
        row: dict[str, Any] = {**usage_values(used), "warnings": memory_basis_notes(used)}
        limits_check(row, _USAGE_LIMITS)  # optional columns: never a quarantine
        service_units = Decimal(su_q).scaleb(-6)
        row.update(
            nnodes=nnodes, cpus=cpus, memory_mb=allocs[alloc].memory_mb, gpus=gpus,
            elapsed_seconds=elapsed, timelimit_minutes=timelimit, service_units=service_units,
        )  # fmt: skip
        right_sized = right_sized_of(versions[version_id].spec, row, service_units=service_units)
        if right_sized is not None and abs(right_sized) >= _RIGHT_SIZED_BOUND:
            too_large.append(index)
            continue
        columns["index"].append(index)
        columns["warnings"].append(json.dumps(row["warnings"]))
        for name in USAGE_COLUMNS:
            value = row[name]
            columns[name].append(None if value is None else str(value))
        columns["right_sized"].append(None if right_sized is None else str(right_sized))
        if right_sized is not None:
            row.update(
                project_id=project_id, partition_id=partition_id, username=username,
                end=_EPOCH + timedelta(seconds=end_s), right_sized_service_units=right_sized,
            )  # fmt: skip
            measured.append(row)
    table = pl.DataFrame(
        columns,
        schema={"index": pl.Int64, **dict.fromkeys(columns.keys() - {"index"}, pl.String)},
    )
    if too_large:
        frame = frame.filter(~pl.col("index").is_in(too_large))
    return frame.join(table, on="index", how="left", maintain_order="left"), measured


def _decimal_text(quanta: pl.Expr) -> pl.Expr:
    """Whole millionths (non-negative) as the text of a decimal of 6 places."""
    return pl.format(
        "{}.{}",
        (quanta // _MILLION).cast(pl.String),
        (quanta % _MILLION).cast(pl.String).str.zfill(6),
    )


def _time_text(seconds: pl.Expr) -> pl.Expr:
    """Unix seconds as a UTC time PostgreSQL reads into timestamptz."""
    return pl.from_epoch(seconds, time_unit="s").dt.strftime("%Y-%m-%d %H:%M:%S+00")


def _escaped(text: pl.Expr) -> pl.Expr:
    """Text as COPY's text format reads it back (a line never holds a NUL: the reader leaves
    those to the parser)."""
    return (
        text.str.replace_all("\\", "\\\\", literal=True)
        .str.replace_all("\t", "\\t", literal=True)
        .str.replace_all("\n", "\\n", literal=True)
        .str.replace_all("\r", "\\r", literal=True)
    )


def copy_frame(
    rows: NewRows,
    *,
    ids: Sequence[int] | None,
    source_hashes: Sequence[str],
    cluster_id: int,
    run_id: int,
    now: datetime,
    columns: Sequence[str],
) -> pl.DataFrame:
    """The rows' values as text, one column per ledger column named in ``columns`` (their
    attribute names, ``id`` among them when ``ids`` are given), NULL as null: what
    :func:`copy_text` writes. ``source_hashes`` are the lines' fingerprints, in the frame's
    order."""
    frame = rows.frame
    now_text = pl.lit(now.astimezone(UTC).isoformat())
    null = pl.lit(None, dtype=pl.String)
    whole = {
        name: pl.col(name).cast(pl.String)
        for name in (
            "project_id", "user_id", "partition_id", "elapsed_seconds", "timelimit_minutes",
            "nnodes", "cpus", "gpus", "consumed_energy_joules", "line_number",
        )
    }  # fmt: skip
    text = {
        # An array's ids are "" on a plain job, as the per-line rows have them.
        name: _escaped(pl.col(name).fill_null(""))
        for name in (
            "job_id", "job_name", "array_job_id", "array_task_id", "qos", "state",
            "state_raw", "exit_code", "nodelist",
        )
    }  # fmt: skip
    made: dict[str, pl.Expr] = {
        **whole,
        **text,
        "job_id_raw": _escaped(pl.col("job_id_raw")),
        "username": _escaped(pl.col("user")),
        "partition_version_id": pl.col("version_id").cast(pl.String),
        "cluster_id": pl.lit(str(cluster_id)),
        "run": pl.lit(""),
        "het_job_id": pl.lit(""),
        "het_offset": null,
        "submit": _time_text(pl.col("submit_s")),
        "start": _time_text(pl.col("start_s")),
        "end": _time_text(pl.col("end_s")),
        "memory_mb": pl.col("memory_text"),
        "billing": pl.col("billing_text"),
        "charge_state": pl.col("charge_state"),
        "service_units": _decimal_text(pl.col("su_q")),
        "pending_service_units": _decimal_text(pl.col("pending_q")),
        "reserved_service_units": null,
        "weight": pl.col("weight_text"),
        "dominant_resource": _escaped(pl.col("dom")),
        "warnings": _escaped(_or_none(frame, "warnings", pl.lit("[]"))),
        "energy_wh": _decimal_text(pl.col("wh_q")),
        "right_sized_service_units": _or_none(frame, "right_sized", null),
        "cost": null,
        "cost_model_version_id": null,
        "charged_at": now_text,
        "import_run_id": pl.lit(str(run_id)),
        "source_hash": pl.lit(pl.Series("source_hash", source_hashes, dtype=pl.String)),
        "updated_at": now_text,
    }
    made.update({name: _or_none(frame, name, null) for name in USAGE_COLUMNS})
    if ids is not None:
        made["id"] = pl.lit(pl.Series("id", ids, dtype=pl.Int64).cast(pl.String))
    return frame.select(*(made[name].alias(name) for name in columns))


def _or_none(frame: pl.DataFrame, name: str, default: pl.Expr) -> pl.Expr:
    """A measured value's text column, ``default`` where the row has none (or no row of the
    frame was measured)."""
    if name not in frame.columns:
        return default
    return pl.col(name).fill_null(default)


def copy_text(frame: pl.DataFrame) -> bytes:
    """``frame`` (text columns, NULL as null) as the text of ``COPY ... FROM STDIN``."""
    return frame.write_csv(
        separator="\t", include_header=False, quote_style="never", null_value="\\N"
    ).encode("utf-8")

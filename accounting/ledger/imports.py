"""Import sacct records into the ledger and charge them (DESIGN section 7).

``jobs_import`` streams lines through the pure parser (``accounting.ledger.sacct``), charges
finished jobs with the pure engine (``accounting.clusters.charging``) and writes batches, each in
one transaction that holds the jobs, their roll-ups, the quarantined lines and the run's counters.
So:

- the same input twice gives the same ledger (rows are keyed on cluster + JobIDRaw + run, and an
  unchanged row is left alone);
- a crash loses at most the batch in flight, and a rerun completes it without charging twice;
- two imports of overlapping windows cannot both insert a job: the unique key refuses the second
  insert, the batch is retried, and the retry sees the other's committed row as existing;
- memory stays flat: one batch of records is held at a time.

Every data line lands in exactly one bucket of the summary: ``steps_skipped``, ``imported``
(recorded, nothing to book: already in the ledger as read, or a job that never ran),
``updated`` (a known job whose record changed; the difference is booked), ``charged`` (a
finished job booked in this run), ``pending`` (not finished; shown as a pending charge) or
``quarantined`` (kept with its line number and reason, charged once the cause is fixed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import subprocess
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, OperationalError, connection, models, transaction
from django.db.models import F
from django.utils import timezone

from accounting.clusters import charging
from accounting.costs.services import CostOutOfRange, JobPricer
from accounting.ledger.sacct import (
    SacctHeaderError,
    SacctLineError,
    SacctRecord,
    SacctStep,
    parse_sacct,
)
from accounting.locks import cluster_row_lock
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
    QuarantinedRecord,
    UsageDaily,
    UtilisationHourly,
)
from accounting.utilisation.quality import AllocatedJob, hourly_contributions
from allocations.models import Project
from portal.queue import task_enqueue

logger = logging.getLogger(__name__)

BUCKETS = ("steps_skipped", "imported", "updated", "charged", "pending", "quarantined")
BATCH_SIZE = 5000
_RETRIES = 5
_HOURS = Decimal(3600)
_ZERO = Decimal(0)


class ImportFatal(Exception):
    """The input as a whole cannot be imported (no header, missing columns); nothing changed."""


@dataclass
class ImportSummary:
    """Counts of input lines (the header excluded); the buckets add up to ``lines``."""

    lines: int = 0
    steps_skipped: int = 0
    imported: int = 0
    updated: int = 0
    charged: int = 0
    pending: int = 0
    quarantined: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def add_one(self, bucket: str) -> None:
        setattr(self, bucket, getattr(self, bucket) + 1)

    def add(self, other: ImportSummary) -> None:
        for name in ("lines", *BUCKETS):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class _Quarantine:
    line_number: int
    raw: str
    reason: str
    field: str = ""
    job_id_raw: str = ""
    account: str = ""
    partition_name: str = ""


@dataclass
class _Batch:
    """What one transaction writes."""

    records: dict[tuple[str, str], SacctRecord] = field(default_factory=dict)
    quarantine: list[_Quarantine] = field(default_factory=list)
    lines: int = 0
    steps: int = 0

    def __len__(self) -> int:
        return self.lines


class _HeaderTap:
    """Passes lines through and remembers the header (the first non-blank line)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = lines
        self.header: str | None = None

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            if self.header is None and line.strip():
                self.header = line.rstrip("\r\n")
            yield line


class _Lookups:
    """Caches of accounts, partitions, versions and users for one import."""

    def __init__(self, cluster: Cluster, *, create_projects: bool) -> None:
        self.cluster = cluster
        self.create_projects = create_projects
        self.zone = cluster.zoneinfo
        self.projects: dict[str, Project] = {}
        self.partitions: dict[str, Partition | None] = {}
        self.versions: dict[int, list[PartitionVersion]] = {}
        self.users: dict[str, int | None] = {}
        self.pricer: JobPricer | None = None

    def pricer_refresh(self) -> None:
        """Read the cluster's cost model versions again (one small query per batch: a version
        saved during a long import prices the batches after it). Parsed models and node
        lists stay cached while the versions are the same; without a model, nothing is
        priced and the import pays only this query."""
        self.pricer = JobPricer.refreshed(self.pricer, cluster=self.cluster)

    def project(self, account: str) -> Project | None:
        project = self.projects.get(account)
        if project is None:
            project = Project.objects.filter(code=account).first()
            if project is None and self.create_projects and account:
                project, _ = Project.objects.get_or_create(
                    code=account, defaults={"title": f"{account} (created by sacct import)"}
                )
            if project is not None:
                self.projects[account] = project
        return project

    def partition(self, name: str) -> Partition | None:
        if name not in self.partitions:
            self.partitions[name] = Partition.objects.filter(
                cluster=self.cluster, name=name
            ).first()
        return self.partitions[name]

    def version(self, partition: Partition, at: datetime) -> PartitionVersion | None:
        versions = self.versions.get(partition.pk)
        if versions is None:
            versions = list(partition.versions.order_by("-effective_from"))
            for version in versions:
                version.partition = partition
            self.versions[partition.pk] = versions
        for version in versions:
            if version.effective_from <= at:
                return version
        return None

    def user_id(self, username: str) -> int | None:
        if username not in self.users:
            self.users[username] = (
                get_user_model()
                .objects.filter(username=username)
                .values_list("pk", flat=True)
                .first()
            )
        return self.users[username]


def _fractions_json(fractions: tuple[charging.NodeFractions, ...]) -> list[dict[str, str]]:
    """Per-node fractions, identical consecutive nodes folded into one entry with a count."""
    folded: list[dict[str, str]] = []
    for node in fractions:
        entry = {
            "cores": str(node.cores),
            "memory": str(node.memory),
            "gpus": str(node.gpus),
            **{name: str(value) for name, value in sorted(node.node_local.items())},
        }
        if folded and {k: v for k, v in folded[-1].items() if k != "nodes"} == entry:
            folded[-1]["nodes"] = str(int(folded[-1]["nodes"]) + 1)
        else:
            folded.append({"nodes": "1", **entry})
    return folded


def _quarantine_for(record: SacctRecord, reason: str, field_name: str = "") -> _Quarantine:
    return _Quarantine(
        line_number=record.line_number,
        raw=record.raw,
        reason=reason,
        field=field_name,
        job_id_raw=record.job_id_raw,
        account=record.account,
        partition_name=record.partition,
    )


def _row_for(record: SacctRecord, lookups: _Lookups) -> dict[str, Any] | _Quarantine:
    """The ledger row a job allocation stands for, charged when finished, or why it cannot be."""
    cluster = lookups.cluster
    project = lookups.project(record.account)
    if project is None:
        return _quarantine_for(
            record, f"unknown project (Slurm account {record.account!r})", "Account"
        )
    partition = lookups.partition(record.partition)
    if partition is None:
        return _quarantine_for(
            record,
            f"unknown partition {record.partition!r} on cluster {cluster.name!r}",
            "Partition",
        )
    if record.start is not None and record.end is not None and record.start > record.end:
        return _quarantine_for(record, "Start is after End", "End")
    priced_at = record.start or record.submit or record.end
    version = lookups.version(partition, priced_at) if priced_at else None
    if version is None:
        return _quarantine_for(
            record,
            f"partition {partition} has no specification in effect at the job's start",
            "Start",
        )

    row: dict[str, Any] = {
        "job_id": record.job_id,
        "job_name": record.job_name or "",
        "array_job_id": record.array_job_id or "",
        "array_task_id": record.array_task_id or "",
        "het_job_id": record.het_job_id or "",
        "het_offset": record.het_offset,
        "project_id": project.pk,
        "username": record.user,
        "user_id": lookups.user_id(record.user),
        "partition_id": partition.pk,
        "partition_version_id": version.pk,
        "qos": record.qos or "",
        "state": record.state,
        "state_raw": record.state_raw,
        "exit_code": record.exit_code or "",
        "submit": record.submit,
        "start": record.start,
        "end": record.end,
        "elapsed_seconds": record.elapsed_seconds,
        "timelimit_minutes": record.timelimit_minutes,
        "nnodes": record.nnodes,
        "cpus": record.cpus,
        "memory_mb": record.memory_mb,
        "gpus": record.gpus,
        "nodelist": record.nodelist,
        "billing": record.billing,
        "consumed_energy_joules": record.consumed_energy_joules,
        "charge_state": Job.ChargeState.PENDING,
        "service_units": Decimal(0),
        "pending_service_units": Decimal(0),
        "weight": version.weight,
        "dominant_resource": "",
        "node_fractions": [],
        "energy_wh": Decimal(0),
        "cost": None,
        "cost_model_version_id": None,
    }
    if record.nnodes == 0 or not record.nodes or record.start is None:
        # Never ran (cancelled while pending, a pending array range): nothing to charge.
        row["charge_state"] = (
            Job.ChargeState.CHARGED if record.is_finished else Job.ChargeState.PENDING
        )
        return row
    try:
        usage = charging.split_evenly(
            nodes=record.nnodes, cores=record.cpus, memory_mb=record.memory_mb, gpus=record.gpus
        )
        charge = charging.charge(version.spec, usage, elapsed_seconds=record.elapsed_seconds)
    except (charging.ChargeError, charging.SpecError) as error:
        return _quarantine_for(record, f"cannot be charged: {error}", "AllocTRES")
    row["dominant_resource"] = charge.dominant_resource
    row["node_fractions"] = _fractions_json(charge.nodes)
    row["energy_wh"] = charge.energy_wh
    if not record.is_finished:
        row["pending_service_units"] = charge.service_units
    elif record.state == "NODE_FAIL" and cluster.refund_node_failures:
        row["charge_state"] = Job.ChargeState.REFUNDED
    else:
        row["charge_state"] = Job.ChargeState.CHARGED
        row["service_units"] = charge.service_units
    if lookups.pricer is not None and record.is_finished and record.end is not None:
        # Money under the cost model in force at the job's end; refunded jobs cost the centre
        # all the same.
        try:
            priced = lookups.pricer.price(
                end=record.end,
                nodelist=record.nodelist,
                elapsed_seconds=record.elapsed_seconds,
                energy_joules=record.consumed_energy_joules,
            )
        except CostOutOfRange as error:
            return _quarantine_for(record, str(error), "")
        if priced is not None:
            row["cost"], row["cost_model_version_id"] = priced
    return row


_COMPARED = (
    "job_id", "job_name", "array_job_id", "array_task_id", "het_job_id", "het_offset",
    "project_id", "username", "user_id", "partition_id", "partition_version_id", "qos", "state",
    "state_raw", "exit_code", "submit", "start", "end", "elapsed_seconds", "timelimit_minutes",
    "nnodes", "cpus", "memory_mb", "gpus", "nodelist", "billing", "consumed_energy_joules",
    "charge_state", "service_units", "pending_service_units", "weight", "dominant_resource",
    "node_fractions", "energy_wh", "cost", "cost_model_version_id",
)  # fmt: skip


def _contribution(values: dict[str, Any], lookups: _Lookups) -> tuple[tuple[Any, ...], list[Any]]:
    """What a finished job adds to its day's roll-up: key and (SU, core-h, GPU-h, Wh, cost,
    jobs)."""
    end = values["end"]
    day = end.astimezone(lookups.zone).date()
    hours = Decimal(values["elapsed_seconds"]) / _HOURS
    key = (values["project_id"], values["partition_id"], values["username"], day)
    return key, [
        values["service_units"],
        (values["cpus"] * hours).quantize(charging.SU_QUANTUM),
        (values["gpus"] * hours).quantize(charging.SU_QUANTUM),
        values["energy_wh"],
        values["cost"] or _ZERO,
        1,
    ]


def _is_booked(values: dict[str, Any]) -> bool:
    return values["charge_state"] != Job.ChargeState.PENDING and values["end"] is not None


@dataclass
class _Deltas:
    """What a batch adds to the daily usage roll-ups and to the hourly utilisation rows."""

    daily: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    hourly: dict[tuple[int, datetime], list[int]] = field(default_factory=dict)


def _held_until(values: dict[str, Any]) -> datetime | None:
    """Until when a job held its allocation as far as its sacct line tells: its end, or for
    a running job its start plus the Elapsed that sacct reported (so the hours a running job
    has used count in Q(T) now, and follow from the stored row alone: the next line of the
    job takes them back and adds its own, like any change)."""
    start = values["start"]
    if start is None or not (values["cpus"] or values["gpus"]):
        return None
    if values["end"] is not None:
        return values["end"] if _is_booked(values) else None
    if values["charge_state"] == Job.ChargeState.PENDING and values["elapsed_seconds"] > 0:
        return start + timedelta(seconds=values["elapsed_seconds"])
    return None


def _add_rollup(deltas: _Deltas, values: dict[str, Any], lookups: _Lookups, sign: int) -> None:
    """Add (``sign`` +1) or take back (-1) a job's share of the roll-ups: a booked job's
    usage of its day, and the hours any job held its allocation (running ones so far)."""
    if _is_booked(values):
        key, amounts = _contribution(values, lookups)
        current = deltas.daily.setdefault(key, [_ZERO, _ZERO, _ZERO, _ZERO, _ZERO, 0])
        for index, amount in enumerate(amounts):
            current[index] += sign * amount
    held_until = _held_until(values)
    if held_until is None:
        return
    job = AllocatedJob(
        partition=str(values["partition_id"]), start=values["start"], end=held_until,
        cores=values["cpus"], gpus=values["gpus"],
    )  # fmt: skip
    for hour in hourly_contributions(job, timezone=lookups.zone):
        seconds = deltas.hourly.setdefault((values["partition_id"], hour.hour_start), [0, 0])
        seconds[0] += sign * hour.core_seconds
        seconds[1] += sign * hour.gpu_seconds


def _hourly_apply(hourly: dict[tuple[int, datetime], list[int]]) -> None:
    """Add the batch's core- and GPU-seconds to the hourly utilisation rows (one upsert)."""
    rows = [(key, seconds) for key, seconds in sorted(hourly.items()) if any(seconds)]
    if not rows:
        return
    table = UtilisationHourly._meta.db_table
    placeholders = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    params: list[Any] = []
    for (partition_id, hour_start), (core_seconds, gpu_seconds) in rows:
        params.extend((partition_id, hour_start, core_seconds, gpu_seconds))
    sql = (
        f"INSERT INTO {table} (partition_id, hour_start, core_seconds, gpu_seconds) "  # noqa: S608
        f"VALUES {placeholders} ON CONFLICT (partition_id, hour_start) DO UPDATE SET "
        f"core_seconds = {table}.core_seconds + EXCLUDED.core_seconds, "
        f"gpu_seconds = {table}.gpu_seconds + EXCLUDED.gpu_seconds"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _rollups_apply(deltas: dict[tuple[Any, ...], list[Any]]) -> None:
    """Add the deltas to the daily roll-ups with one atomic upsert (sorted: no deadlocks)."""
    rows = [(key, amounts) for key, amounts in sorted(deltas.items()) if any(amounts)]
    if not rows:
        return
    table = UsageDaily._meta.db_table
    columns = (
        "project_id, partition_id, username, day, "
        "service_units, core_hours, gpu_hours, energy_wh, cost, jobs"
    )
    placeholders = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows))
    params: list[Any] = []
    for key, amounts in rows:
        params.extend(key)
        params.extend(amounts)
    add = ", ".join(
        f"{name} = {table}.{name} + EXCLUDED.{name}"
        for name in ("service_units", "core_hours", "gpu_hours", "energy_wh", "cost", "jobs")
    )
    sql = (
        f"INSERT INTO {table} ({columns}) VALUES {placeholders} "  # noqa: S608 - names are ours
        f"ON CONFLICT (project_id, partition_id, username, day) DO UPDATE SET {add}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _raw_hash(header: str, raw: str) -> str:
    return hashlib.sha256(f"{header}\n{raw}".encode()).hexdigest()


def _fingerprint(header: str, raw: str) -> str:
    """A short digest of a sacct line in its layout: equal lines need no second look."""
    return hashlib.blake2b(f"{header}\n{raw}".encode(), digest_size=16).hexdigest()


# Columns of a new ledger row, in table order (the COPY path writes them positionally).
_INSERT_FIELDS = [f for f in Job._meta.concrete_fields if not f.primary_key]


def _jobs_insert(rows: list[dict[str, Any]]) -> None:
    """Insert new ledger rows: COPY on PostgreSQL (the bulk of a first import), else the ORM.

    A row inserted meanwhile by a concurrent import makes COPY fail on the unique key; the
    batch is then retried and finds that row existing.
    """
    columns = ", ".join(connection.ops.quote_name(f.column or f.attname) for f in _INSERT_FIELDS)
    attnames = [f.attname for f in _INSERT_FIELDS]
    if connection.vendor != "postgresql":
        # One prepared INSERT run for every row, values prepared the way the ORM would; the
        # ORM's bulk_create spent three quarters of an SQLite import building statements.
        placeholders = ", ".join(["%s"] * len(_INSERT_FIELDS))
        sql = f"INSERT INTO {Job._meta.db_table} ({columns}) VALUES ({placeholders})"  # noqa: S608
        prepare = _preparers()
        prepared = [
            [convert(row[name]) if convert else row[name] for name, convert in prepare]
            for row in rows
        ]
        with connection.cursor() as cursor:
            cursor.executemany(sql, prepared)
        return
    sql = f"COPY {Job._meta.db_table} ({columns}) FROM STDIN"
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.cursor.copy(sql) as copy,
    ):
        for row in rows:
            row["node_fractions"] = json.dumps(row["node_fractions"])
            copy.write_row([row[name] for name in attnames])


def _preparers() -> list[tuple[str, Callable[[Any], Any] | None]]:
    """Per column: the attribute and the ORM's conversion of its value, where one is needed
    (decimals, times and JSON); plain numbers and strings go to the driver as they are."""

    def prepare_with(field: Any) -> Callable[[Any], Any]:
        return lambda value: field.get_db_prep_save(value, connection)

    needs_preparing = (models.DecimalField, models.DateTimeField, models.JSONField)
    return [
        (f.attname, prepare_with(f) if isinstance(f, needs_preparing) else None)
        for f in _INSERT_FIELDS
    ]


def _known_rows(cluster: Cluster, raw_ids: list[str]) -> Iterable[tuple[str, str, int, str, str]]:
    """(job_id_raw, run, pk, source_hash, charge_state) of the batch's existing rows.

    On PostgreSQL one index probe per key, whatever the planner's statistics say: a table
    that grew from empty during this very import has none, and the plain IN-list query (or a
    join the planner may flatten) then hashes every row of the cluster for each batch. The
    LIMIT keeps the LATERAL subquery from being flattened; no job has that many runs.
    """
    if not raw_ids:
        return []
    if connection.vendor != "postgresql":
        return Job.objects.filter(cluster=cluster, job_id_raw__in=raw_ids).values_list(
            "job_id_raw", "run", "pk", "source_hash", "charge_state"
        )
    table = Job._meta.db_table
    sql = (
        "SELECT j.job_id_raw, j.run, j.id, j.source_hash, j.charge_state "  # noqa: S608
        "FROM unnest(%s::text[]) AS k(job_id_raw) CROSS JOIN LATERAL ("
        f"  SELECT id, job_id_raw, run, source_hash, charge_state FROM {table}"
        "   WHERE cluster_id = %s AND job_id_raw = k.job_id_raw LIMIT 10000) AS j"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [raw_ids, cluster.pk])
        return cursor.fetchall()


def _new_row(
    values: dict[str, Any], *, cluster: Cluster, key: tuple[str, str], run: ImportRun,
    record: SacctRecord, now: datetime,
) -> dict[str, Any]:  # fmt: skip
    return {
        **values,
        "cluster_id": cluster.pk,
        "job_id_raw": key[0],
        "run": key[1],
        "import_run_id": run.pk,
        "line_number": record.line_number,
        "charged_at": now if _is_booked(values) else None,
        "updated_at": now,
    }


def _batch_write(
    batch: _Batch, *, run: ImportRun, lookups: _Lookups, header: str, resolve_quarantine: bool
) -> ImportSummary:
    """Write one batch in one transaction and return its counts.

    A job whose sacct line is exactly the one already booked is left alone without being
    charged again; only new and changed lines go through the engine.
    """
    summary = ImportSummary(lines=batch.lines, steps_skipped=batch.steps)
    cluster = lookups.cluster
    now = timezone.now()
    quarantine = list(batch.quarantine)
    stored_lines: list[str] = []
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # Do not wait for the WAL flush of each batch. A database crash can then lose the
            # last batches committed, whole (jobs, roll-ups and counters go together), and
            # the rerun an interrupted import needs anyway books them again.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        # The cost model versions this batch prices with stay the newest until it commits.
        cluster_row_lock(cluster, exclusive=False)
        lookups.pricer_refresh()
        # Which rows exist, and what line each was read from. No lock here: most rows of an
        # overlapping window are unchanged and are not written, and locking them would write
        # every one of them (PostgreSQL records row locks in the rows).
        known: dict[tuple[str, str], tuple[int, str, str]] = {}
        raw_ids = sorted({job_id_raw for job_id_raw, _ in batch.records})
        for job_id_raw, run_key, pk, source_hash, charge_state in _known_rows(cluster, raw_ids):
            known[(job_id_raw, run_key)] = (pk, source_hash, charge_state)

        fingerprints = {key: _fingerprint(header, rec.raw) for key, rec in batch.records.items()}
        changed_pks = [
            known[key][0]
            for key in batch.records
            if key in known and known[key][1] != fingerprints[key]
        ]
        # The rows this batch will change are locked (in key order, so that two imports
        # cannot deadlock) and read again: a concurrent import may have booked them meanwhile.
        old_jobs = {
            (job.job_id_raw, job.run): job
            for job in Job.objects.select_for_update()
            .filter(pk__in=changed_pks)
            .order_by("job_id_raw", "run")
        } if changed_pks else {}  # fmt: skip

        deltas = _Deltas()
        inserts: list[dict[str, Any]] = []
        updates: list[Job] = []
        for key, record in batch.records.items():
            stored = known.get(key)
            locked = old_jobs.get(key)
            if locked is not None and locked.source_hash == fingerprints[key]:
                stored = (locked.pk, locked.source_hash, locked.charge_state)
            if stored is not None and stored[1] == fingerprints[key]:
                bucket = "pending" if stored[2] == Job.ChargeState.PENDING else "imported"
                summary.add_one(bucket)
                stored_lines.append(record.raw)
                continue
            values = _row_for(record, lookups)
            if isinstance(values, _Quarantine):
                quarantine.append(values)
                continue
            values["source_hash"] = fingerprints[key]
            stored_lines.append(record.raw)
            job = old_jobs.get(key)
            if job is None:
                inserts.append(
                    _new_row(values, cluster=cluster, key=key, run=run, record=record, now=now)
                )
                _add_rollup(deltas, values, lookups, +1)
                summary.add_one(_bucket_new(values))
                continue
            old = {name: getattr(job, name) for name in _COMPARED}
            new = {name: values[name] for name in _COMPARED}
            if old == new:
                summary.add_one("pending" if not _is_booked(new) else "imported")
            elif _is_booked(old) and not _is_booked(new):
                # An older dump (taken while the job ran) read after a newer one: the
                # finished record stands, a charge never goes back to pending.
                summary.add_one("imported")
            else:
                _add_rollup(deltas, old, lookups, -1)
                _add_rollup(deltas, new, lookups, +1)
                if _is_booked(new) and not _is_booked(old):
                    summary.add_one("charged")
                else:
                    summary.add_one("updated" if _is_booked(new) else "pending")
                for name, value in values.items():
                    setattr(job, name, value)
                job.import_run = run
                job.line_number = record.line_number
                if _is_booked(new) and job.charged_at is None:
                    job.charged_at = now
                updates.append(job)

        if inserts:
            _jobs_insert(inserts)
        if updates:
            Job.objects.bulk_update(
                updates,
                [*_COMPARED, "source_hash", "import_run", "line_number", "charged_at"],
                batch_size=500,
            )
        _rollups_apply(deltas.daily)
        _hourly_apply(deltas.hourly)

        if quarantine:
            QuarantinedRecord.objects.bulk_create(
                [
                    QuarantinedRecord(
                        cluster=cluster,
                        import_run=run,
                        source=run.source,
                        header=header,
                        raw_hash=_raw_hash(header, item.raw),
                        **asdict(item),
                    )
                    for item in quarantine
                ],
                update_conflicts=True,
                unique_fields=["cluster", "raw_hash"],
                # The first sighting keeps its source and line number; the reason is refreshed.
                update_fields=["reason", "field"],
            )
            summary.quarantined += len(quarantine)
        if resolve_quarantine and stored_lines:
            QuarantinedRecord.objects.filter(
                cluster=cluster,
                resolved_at__isnull=True,
                raw_hash__in=[_raw_hash(header, raw) for raw in stored_lines],
            ).update(resolved_at=now, resolution=f"imported by run {run.pk}")

        ImportRun.objects.filter(pk=run.pk).update(
            **{name: F(name) + getattr(summary, name) for name in ("lines", *BUCKETS)}
        )
    return summary


def _bucket_new(values: dict[str, Any]) -> str:
    if not _is_booked(values):
        return "pending"
    if values["charge_state"] == Job.ChargeState.CHARGED and values["start"] is None:
        return "imported"  # never ran: recorded, nothing to book
    return "charged"


def _batch_write_with_retry(batch: _Batch, **kwargs: Any) -> ImportSummary:
    """Retry a batch that lost a race with a concurrent import (unique key or deadlock).

    The retry runs in a new transaction, which sees the other import's committed rows as
    existing, so each job is booked once.
    """
    for attempt in range(1, _RETRIES + 1):
        try:
            return _batch_write(batch, **kwargs)
        except (IntegrityError, OperationalError) as error:
            if attempt == _RETRIES:
                raise
            logger.info("batch retried after a concurrent write (attempt %d): %s", attempt, error)
    raise AssertionError("unreachable")


def _run_key(record: SacctRecord) -> str:
    # A requeued incarnation (REQUEUED row, with --duplicates) is a run of its own, keyed by
    # its start; the current incarnation of a job has the empty run key.
    if record.state == "REQUEUED" and record.start is not None:
        return record.start.isoformat()
    return ""


def jobs_import(
    *,
    cluster: Cluster,
    lines: Iterable[str],
    source: str,
    create_projects: bool = False,
    started_by: Any = None,
    run: ImportRun | None = None,
    tz: tzinfo | None = None,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[ImportSummary], None] | None = None,
) -> tuple[ImportRun, ImportSummary]:
    """Import ``sacct --parsable2`` lines for ``cluster``; return the run and its summary.

    Times are read in ``tz``, by default the cluster's time zone (sacct prints local time).
    Raises ``ImportFatal`` (after recording the run as failed) when the input has no usable
    header. Quarantined lines are not errors: they are counted and kept.
    """
    if run is None:
        run = ImportRun.objects.create(cluster=cluster, source=source[:500], started_by=started_by)
    lookups = _Lookups(cluster, create_projects=create_projects)
    resolve = QuarantinedRecord.objects.filter(cluster=cluster, resolved_at__isnull=True).exists()
    tap = _HeaderTap(lines)
    total = ImportSummary()
    batch = _Batch()

    def flush() -> None:
        nonlocal batch
        if batch.lines:
            total.add(
                _batch_write_with_retry(
                    batch,
                    run=run,
                    lookups=lookups,
                    header=tap.header or "",
                    resolve_quarantine=resolve,
                )
            )
            if progress is not None:
                progress(total)
        batch = _Batch()

    try:
        for item in parse_sacct(tap, tz=tz or lookups.zone, cluster=cluster.name, steps=False):
            if run.header == "" and tap.header is not None:
                run.header = tap.header
                ImportRun.objects.filter(pk=run.pk).update(header=tap.header)
            batch.lines += 1
            if isinstance(item, SacctLineError):
                batch.quarantine.append(
                    _Quarantine(
                        line_number=item.line_number,
                        raw=item.raw,
                        reason=item.reason,
                        field=item.field or "",
                    )
                )
            elif isinstance(item, SacctStep):
                batch.steps += 1
            else:
                key = (item.job_id_raw, _run_key(item))
                if key in batch.records:
                    # The same run twice in one input (overlapping dumps concatenated): the
                    # batch so far is written first, so the later line is read as an update.
                    batch.lines -= 1
                    flush()
                    batch.lines += 1
                batch.records[key] = item
            if batch.lines >= batch_size:
                flush()
        flush()
    except SacctHeaderError as error:
        _run_failed(run, str(error))
        raise ImportFatal(str(error)) from None
    except BaseException as error:
        _run_failed(run, f"{type(error).__name__}: {error}")
        raise
    ImportRun.objects.filter(pk=run.pk).update(
        status=ImportRun.Status.SUCCEEDED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    return run, total


def _run_failed(run: ImportRun, message: str) -> None:
    ImportRun.objects.filter(pk=run.pk).update(
        status=ImportRun.Status.FAILED, finished_at=timezone.now(), error=message[:10000]
    )


# --- sacct on this host ----------------------------------------------------------------------

SACCT_FORMAT = (
    "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Start,End,"
    "Elapsed,ElapsedRaw,NNodes,NCPUS,NodeList,ReqTRES,AllocTRES,ReqMem,ConsumedEnergyRaw,"
    "TimelimitRaw"
)


class SacctFailed(ImportFatal):
    """The configured sacct command could not run or exited with an error."""


def sacct_command(*, cluster: Cluster, since: datetime, until: datetime) -> list[str]:
    """The command line that dumps one window; times are given and printed in UTC."""
    utc_format = "%Y-%m-%dT%H:%M:%S"
    return [
        cluster.sacct_command,
        *shlex.split(cluster.sacct_arguments),
        f"--starttime={since.astimezone(UTC).strftime(utc_format)}",
        f"--endtime={until.astimezone(UTC).strftime(utc_format)}",
        f"--format={SACCT_FORMAT}",
    ]


@contextmanager
def sacct_lines(*, cluster: Cluster, since: datetime, until: datetime) -> Iterator[Iterator[str]]:
    """Run sacct for a window with TZ=UTC and stream its output lines (no temporary file)."""
    command = sacct_command(cluster=cluster, since=since, until=until)
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"},
        )
    except OSError as error:
        raise SacctFailed(f"cannot run {command[0]!r}: {error.strerror}") from None
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        try:
            yield iter(process.stdout)
        except ImportFatal:
            # Empty or broken output is most often sacct failing: report its own words.
            if process.wait() != 0:
                errors = process.stderr.read().strip()
                raise SacctFailed(
                    f"{command[0]} exited with {process.returncode}: {errors}"
                ) from None
            raise
        process.stdout.close()
        errors = process.stderr.read()
        if process.wait() != 0:
            raise SacctFailed(f"{command[0]} exited with {process.returncode}: {errors.strip()}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def sacct_window_import(
    *, cluster: Cluster, until: datetime | None = None, since: datetime | None = None
) -> tuple[ImportRun, ImportSummary]:
    """Import the next window of ``cluster``: from the previous window's end less the overlap
    (or ``since``) to ``until`` (now). Overlaps are harmless: known jobs are left alone."""
    until = until or timezone.now()
    if since is None:
        last = cluster.last_imported_until or (until - timedelta(days=1))
        since = last - timedelta(minutes=cluster.import_overlap_minutes)
    run = ImportRun.objects.create(
        cluster=cluster,
        source=f"sacct {since.isoformat()} .. {until.isoformat()}",
        window_start=since,
        window_end=until,
    )
    with sacct_lines(cluster=cluster, since=since, until=until) as lines:
        result = jobs_import(cluster=cluster, lines=lines, source=run.source, run=run, tz=UTC)
    Cluster.objects.filter(pk=cluster.pk).update(last_imported_until=until)
    return result


def quarantine_retry(*, cluster: Cluster) -> ImportSummary:
    """Read the cluster's open quarantined lines again (after a partition, project or spec was
    added); those that now import are charged and marked resolved, the rest stay."""
    total = ImportSummary()
    open_records = QuarantinedRecord.objects.filter(cluster=cluster, resolved_at__isnull=True)
    headers = list(open_records.values_list("header", flat=True).distinct().order_by("header"))
    for header in headers:
        raws = open_records.filter(header=header).order_by("pk").values_list("raw", flat=True)
        _, summary = jobs_import(
            cluster=cluster,
            lines=[header, *raws.iterator()],
            source="quarantine retry",
        )
        total.add(summary)
    return total


def import_upload_start(
    *,
    cluster: Cluster,
    name: str,
    chunks: Iterable[bytes],
    started_by: Any = None,
    create_projects: bool = False,
    upload_dir: Path,
) -> ImportRun:
    """Keep an uploaded sacct file and enqueue its import (after the commit)."""
    upload_dir.mkdir(parents=True, exist_ok=True)
    run = ImportRun.objects.create(
        cluster=cluster, source=f"upload {Path(name).name}"[:500], started_by=started_by
    )
    path = upload_dir / f"import-{run.pk}.psv"
    with path.open("wb") as out:
        for chunk in chunks:
            out.write(chunk)
    task_enqueue(
        name="accounting.tasks.import_sacct_file",
        args=(run.pk, str(path)),
        kwargs={"create_projects": create_projects},
    )
    return run

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

Every data line lands in exactly one bucket of the summary: ``blank`` (an empty line, skipped),
``other_clusters`` (a row whose Cluster column names another Slurm cluster, skipped),
``steps_skipped``, ``imported`` (recorded, nothing to book: already in the ledger as read, or a
job that never ran),
``updated`` (a known job whose record changed; the difference is booked), ``charged`` (a
finished job booked in this run), ``pending`` (not finished; shown as a pending charge) or
``quarantined`` (kept with its line number and reason, charged once the cause is fixed).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import (
    DatabaseError,
    Error,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connection,
    models,
    transaction,
)
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone
from psycopg.copy import QueuedLibpqWriter

from accounting.clusters import charging
from accounting.clusters.efficiency import JobUsage
from accounting.costs.services import CostOutOfRange, JobPricer, JobShape
from accounting.ledger import columnar, frame_rows
from accounting.ledger.limits import CHARGE_LIMITS, INPUT_LIMITS, account_check, limits_check
from accounting.ledger.policy import booking_for, booking_never_ran, reserved_for
from accounting.ledger.references import references_check
from accounting.ledger.rollups import (
    Deltas,
    daily_apply,
    efficiency_apply,
    energy_hours_apply,
    hourly_apply,
    is_booked,
    ledger_stamp_move,
    rollup_add,
    rollups_add_frame,
    rollups_add_new,
    run_changes_apply,
    shapes_apply,
)
from accounting.ledger.sacct import (
    EMPTY_LINE_REASON,
    SacctHeaderError,
    SacctLineError,
    SacctRecord,
    SacctStep,
    columns_header,
    line_item,
    parse_sacct,
    size_held_or_requested,
)
from accounting.ledger.sacct_json import JSON_HEADER, parse_sacct_json
from accounting.ledger.usage import (
    USAGE_COLUMNS,
    memory_basis_notes,
    right_sized_of,
    usage_values,
)
from accounting.ledger_storage import (
    KEY_COLUMNS,
    KEY_TABLE,
    is_partitioned,
    job_ids_reserve,
    key_table_kept_here,
    keys_insert,
    keys_update_from,
    ledger_write_lock,
    month_of,
    partitions_ensure,
)
from accounting.locks import cluster_row_lock
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
    QuarantinedRecord,
)
from accounting.signals import charges_booked
from kit.pg_copy import rows_copy
from kit.read_ahead import read_ahead
from projects.accounts import project_code_of
from projects.models import Project
from projects.selectors import account_suffixes, project_for_account

logger = logging.getLogger(__name__)

BUCKETS = (
    "blank",
    "other_clusters",
    "steps_skipped",
    "imported",
    "updated",
    "charged",
    "pending",
    "quarantined",
)
BATCH_SIZE = settings.IMPORT_BATCH_LINES  # lines per batch: one transaction each
_RETRIES = 5
_HOURS = Decimal(3600)
_ZERO = Decimal(0)


class ImportFatal(Exception):
    """The input as a whole cannot be imported (no header, missing columns); nothing changed."""


@dataclass
class ImportSummary:
    """Counts of input lines (the header excluded); the buckets add up to ``lines``."""

    lines: int = 0
    blank: int = 0
    other_clusters: int = 0
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

    records: dict[tuple[str, str], SacctRecord | columnar.FastLine] = field(default_factory=dict)
    # What the steps read so far used, per job (JobIDRaw): merged into their job's row.
    usage: dict[str, JobUsage] = field(default_factory=dict)
    quarantine: list[_Quarantine] = field(default_factory=list)
    lines: int = 0
    steps: int = 0
    blank: int = 0
    other_clusters: int = 0
    # Every line, in order, of each run read more than once in the batch (_repeats_resolve).
    repeated: dict[tuple[str, str], list[SacctRecord | columnar.FastLine]] = field(
        default_factory=dict
    )

    def __len__(self) -> int:
        return self.lines


class _HeaderTap:
    """Passes lines through and remembers the header (the first non-blank line), unless it was
    given (a ``--noheader`` dump read with its column list)."""

    def __init__(self, lines: Iterable[str], header: str | None = None) -> None:
        self._lines = lines
        self.header: str | None = header

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
        self.account_suffixes = account_suffixes(cluster_ids=[cluster.pk])
        # Created in the batch being written: gone again if its transaction rolls back.
        self.created: set[str] = set()
        self.partitions: dict[str, Partition | None] = {}
        self.versions: dict[int, list[PartitionVersion]] = {}
        self.users: dict[str, int | None] = {}
        self.pricer: JobPricer | None = None
        # Times after this are refused (see _time_problem); fixed for the whole import.
        self.horizon = timezone.now() + FUTURE_SLACK
        # Months whose ledger partition this import has made sure of.
        self.months: set[date] = set()

    def months_ready(self, records: Iterable[SacctRecord | columnar.FastLine]) -> None:
        """Make sure the ledger has a partition for the month each record ended in, before
        the batch's transaction (the DDL must not wait inside it). An End past the horizon
        is quarantined (``_time_problem``): it needs no partition."""
        horizon = self.horizon
        chunks: dict[int, Any] = {}
        months: set[date] = set()
        for r in records:
            if isinstance(r, columnar.FastLine):
                chunks[id(r.chunk)] = r.chunk  # the months of its chunk's lines, at once
            elif r.end is not None and r.end <= horizon:
                months.add(month_of(r.end))
        for chunk in chunks.values():
            months |= chunk.months_until(horizon)
        months -= self.months
        if months:
            partitions_ensure(months)
            self.months |= months

    def pricer_refresh(self) -> None:
        """Read the cluster's cost model versions again (one small query per batch: a version
        saved during a long import prices the batches after it). Parsed models and node
        lists stay cached while the versions are the same; without a model, nothing is
        priced and the import pays only this query."""
        self.pricer = JobPricer.refreshed(self.pricer, cluster=self.cluster)

    def project(self, account: str) -> Project | None:
        """The project a Slurm account books to (``projects.selectors.project_for_account``);
        with ``create_projects``, a new project for an account that has none."""
        project = self.projects.get(account)
        if project is None:
            project = project_for_account(account, suffixes=self.account_suffixes)
            if project is None and self.create_projects and account:
                code = project_code_of(account, self.account_suffixes)
                project, created = Project.objects.get_or_create(
                    code=code, defaults={"title": f"{code} (created by sacct import)"}
                )
                if created:
                    self.created.add(account)
            if project is not None:
                self.projects[account] = project
        return project

    def forget_created(self) -> None:
        """Forget the projects created in a batch that was rolled back (they are gone)."""
        for account in self.created:
            self.projects.pop(account, None)
        self.created.clear()

    def batch_committed(self) -> None:
        self.created.clear()

    def partition(self, name: str) -> Partition | None:
        if name not in self.partitions:
            self.partitions[name] = Partition.objects.filter(
                cluster=self.cluster, name=name
            ).first()
        return self.partitions[name]

    def versions_of(self, partition: Partition) -> list[PartitionVersion]:
        """The partition's rate versions, newest first."""
        versions = self.versions.get(partition.pk)
        if versions is None:
            versions = list(partition.versions.order_by("-effective_from"))
            for version in versions:
                version.partition = partition
            self.versions[partition.pk] = versions
        return versions

    def version(self, partition: Partition, at: datetime) -> PartitionVersion | None:
        for version in self.versions_of(partition):
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


class _NothingToCharge:
    """A job that never ran and has no partition the portal knows: counted, nothing stored."""


NOTHING_TO_CHARGE = _NothingToCharge()
# No allocation is held longer: a line that says so has a broken Start, End or ElapsedRaw, and
# would otherwise add an hourly utilisation row for every hour of it.
MAX_HELD = timedelta(days=366)
# Times later than this after the import are a clock or file error (End=2999-01-01).
FUTURE_SLACK = timedelta(days=1)
# Times before this are one too: sacct's times are Unix seconds, and 0 is "Unknown". (Year 1
# in a zone west of UTC has no local day for the roll-ups.)
EARLIEST = datetime(1970, 1, 2, tzinfo=UTC)


def _time_problem(record: SacctRecord, *, horizon: datetime) -> tuple[str, str] | None:
    """Why the line's times cannot be right, naming the column, or None."""
    submit, start, end = record.submit, record.start, record.end
    if (
        submit is not None
        and start is not None
        and end is not None
        and EARLIEST <= submit <= horizon
        and EARLIEST <= start <= end <= horizon
        and end - start <= MAX_HELD
    ):
        return None  # the common case, decided in one expression (what the checks below pass)
    for name, moment in (("Submit", record.submit), ("Start", record.start), ("End", record.end)):
        if moment is None:
            continue
        if moment > horizon:
            return name, (
                f"{name} {moment.isoformat()} is more than a day after this import"
                f" ({horizon.isoformat()}): a clock or file error"
            )
        if moment < EARLIEST:
            return name, f"{name} {moment.isoformat()} is before 1970: a clock or file error"
    if record.start is None:
        return None
    if record.end is not None:
        if record.start > record.end:
            return "End", "Start is after End"
        held, name = record.end - record.start, "End"
    else:
        # Compared as seconds: Start plus an ElapsedRaw of twenty digits is no datetime.
        if record.elapsed_seconds > (horizon - record.start).total_seconds():
            return "ElapsedRaw", f"ElapsedRaw {record.elapsed_seconds} runs past this import"
        held, name = timedelta(seconds=record.elapsed_seconds), "ElapsedRaw"
        if held > MAX_HELD and not record.is_finished:
            return "State", (
                f"a runaway job: Slurm still has it {record.state} after {held.days} days,"
                " though it surely ended (the controller lost its end). List such jobs with"
                " `sacctmgr show runawayjobs`, let sacctmgr fix them (it sets their end),"
                " then import this window again"
            )
    if held > MAX_HELD:
        return name, f"the job would have held its nodes for {held.days} days (over a year)"
    return None


def _reserved(
    record: SacctRecord, spec: charging.PartitionSpec, *, pending: Decimal
) -> Decimal | None:
    """What a job not yet finished holds of its project's SU (``policy.reserved_for``): its
    price at the size it holds or asks for over its whole time limit, where sacct gives both.
    Priced once here, at import, so a balance only sums it."""
    at_time_limit = None
    size = size_held_or_requested(record) if record.timelimit_minutes is not None else None
    if size is not None and record.timelimit_minutes is not None:
        nodes, cpus, memory_mb, gpus = size
        try:
            usage = charging.split_evenly(nodes=nodes, cores=cpus, memory_mb=memory_mb, gpus=gpus)
            at_time_limit = charging.charge(
                spec, usage, elapsed_seconds=record.timelimit_minutes * 60
            ).service_units
        except (charging.ChargeError, charging.SpecError):
            at_time_limit = None  # a request the partition cannot hold: what it used so far
    return reserved_for(
        finished=record.is_finished, pending_service_units=pending, at_time_limit=at_time_limit
    )


def _row_for(
    record: SacctRecord, lookups: _Lookups, steps_usage: JobUsage | None = None
) -> dict[str, Any] | _Quarantine | _NothingToCharge:
    """The ledger row a job allocation stands for, charged when finished, or why it cannot be;
    with what it used (its line's and its steps' ``steps_usage``) and, once charged, the SU
    it would have cost had it asked for that (accounting.clusters.efficiency)."""
    cluster = lookups.cluster
    never_ran = record.nnodes == 0 or not record.nodes or record.start is None
    too_long = account_check(record.account)
    if too_long is not None:
        return _quarantine_for(record, too_long[1], too_long[0])
    project = lookups.project(record.account)
    if project is None:
        return _quarantine_for(
            record, f"unknown project (Slurm account {record.account!r})", "Account"
        )
    partition = lookups.partition(record.partition)
    if partition is None:
        if never_ran:
            return NOTHING_TO_CHARGE
        return _quarantine_for(
            record,
            f"unknown partition {record.partition!r} on cluster {cluster.name!r}",
            "Partition",
        )
    problem = _time_problem(record, horizon=lookups.horizon)
    if problem is not None:
        return _quarantine_for(record, problem[1], problem[0])
    priced_at = record.start or record.submit or record.end
    version = lookups.version(partition, priced_at) if priced_at else None
    if version is None and not never_ran:
        return _quarantine_for(
            record,
            f"partition {partition} has no specification in effect at the job's start",
            "Start",
        )

    used = record.usage.merged(steps_usage) if record.usage else steps_usage
    row: dict[str, Any] = {
        "job_id_raw": record.job_id_raw,
        "run": record.run_key,
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
        "partition_version_id": version.pk if version else None,
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
        "reserved_service_units": None,
        "weight": version.weight if version else None,
        "dominant_resource": "",
        "warnings": [*record.warnings, *memory_basis_notes(used)],
        "energy_wh": Decimal(0),
        "cost": None,
        "cost_model_version_id": None,
        **usage_values(used),
        "right_sized_service_units": None,
    }
    problem = limits_check(row, INPUT_LIMITS)
    if problem is not None:
        return _quarantine_for(record, problem[1], problem[0])
    if never_ran or version is None:
        row["charge_state"] = booking_never_ran(finished=record.is_finished).outcome
        if version is not None and not record.is_finished:  # queued: holds its request
            row["reserved_service_units"] = _reserved(record, version.spec, pending=Decimal(0))
            problem = limits_check(row, CHARGE_LIMITS)
            if problem is not None:
                return _quarantine_for(record, problem[1], problem[0])
        return row
    try:
        usage = charging.split_evenly(
            nodes=record.nnodes, cores=record.cpus, memory_mb=record.memory_mb, gpus=record.gpus
        )
        charge = charging.charge(version.spec, usage, elapsed_seconds=record.elapsed_seconds)
    except (charging.ChargeError, charging.SpecError) as error:
        return _quarantine_for(record, f"cannot be charged: {error}", "AllocTRES")
    row["dominant_resource"] = charge.dominant_resource
    row["energy_wh"] = charge.energy_wh
    booking = booking_for(
        finished=record.is_finished,
        state=record.state,
        service_units=charge.service_units,
        refund_node_failures=cluster.refund_node_failures,
    )
    row["charge_state"] = booking.outcome
    row["service_units"] = booking.service_units
    row["pending_service_units"] = booking.pending_service_units
    if not record.is_finished:
        row["reserved_service_units"] = _reserved(
            record, version.spec, pending=booking.pending_service_units
        )
    if record.is_finished:
        row["right_sized_service_units"] = right_sized_of(
            version.spec, row, service_units=booking.service_units
        )
    if lookups.pricer is not None and record.is_finished and record.end is not None:
        # Money under the cost model in force at the job's end; refunded jobs cost the centre
        # all the same.
        try:
            priced = lookups.pricer.price(
                end=record.end,
                nodelist=record.nodelist,
                elapsed_seconds=record.elapsed_seconds,
                energy_joules=record.consumed_energy_joules,
                shape=JobShape(
                    version.pk, record.nnodes, record.cpus, record.memory_mb, record.gpus
                ),
            )
        except CostOutOfRange as error:
            return _quarantine_for(record, str(error), "")
        if priced is not None:
            row["cost"], row["cost_model_version_id"] = priced
    problem = limits_check(row, CHARGE_LIMITS)
    if problem is not None:
        return _quarantine_for(record, problem[1], problem[0])
    return row


_COMPARED = (
    "job_id", "job_name", "array_job_id", "array_task_id", "het_job_id", "het_offset",
    "project_id", "username", "user_id", "partition_id", "partition_version_id", "qos", "state",
    "state_raw", "exit_code", "submit", "start", "end", "elapsed_seconds", "timelimit_minutes",
    "nnodes", "cpus", "memory_mb", "gpus", "nodelist", "billing", "consumed_energy_joules",
    "charge_state", "service_units", "pending_service_units", "reserved_service_units",
    "weight", "dominant_resource", "warnings", "energy_wh", "cost", "cost_model_version_id",
    *USAGE_COLUMNS, "right_sized_service_units",
)  # fmt: skip


def _raw_hash(header: str, raw: str) -> str:
    # surrogatepass: a line refused for a lone surrogate (a JSON "\ud800") is hashed as well.
    return hashlib.sha256(f"{header}\n{raw}".encode("utf-8", "surrogatepass")).hexdigest()


def _fingerprint(header: str, raw: str, steps_usage: JobUsage | None = None) -> str:
    """A short digest of a sacct line in its layout, and of what its steps used: equal lines
    need no second look."""
    if steps_usage is None:
        text = f"{header}\n{raw}"
    else:
        # The four measures as JobUsage printed them before it said how memory was measured
        # (the basis follows from the header, which is hashed too): fingerprints stored
        # earlier stay equal, and a re-import leaves those jobs alone.
        cpu, memory, gpu, gpu_memory = steps_usage[:4]
        text = (
            f"{header}\n{raw}\nJobUsage(cpu_seconds={cpu!r}, memory_peak_mb={memory!r}, "
            f"gpu_utilisation={gpu!r}, gpu_memory_peak_mb={gpu_memory!r})"
        )
    # surrogatepass: a JobName of a JSON "\ud800" is left out of the job, not of its line.
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# Columns of a new ledger row, in table order (the COPY path writes them positionally).
_INSERT_FIELDS = [f for f in Job._meta.concrete_fields if not f.primary_key]


def _jobs_insert(
    rows: list[dict[str, Any]],
    framed: frame_rows.NewRows | None = None,
    *,
    during: Callable[[], None] | None = None,
    **frame_values: Any,
) -> None:
    """Insert new ledger rows: COPY on PostgreSQL (the bulk of a first import), else the ORM.
    ``framed`` are more new rows as a frame (PostgreSQL only), written in the same COPY;
    ``frame_values`` are what ``frame_rows.copy_frame`` needs besides them. ``during`` is
    work of the batch's own that runs while the server reads the rows (or after the insert,
    off PostgreSQL).

    A row inserted meanwhile by a concurrent import makes COPY fail on the unique key; the
    batch is then retried and finds that row existing.
    """
    framed_count = 0 if framed is None else framed.frame.height
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
        if during is not None:
            during()
        return
    for row in rows:
        warnings = row["warnings"]
        row["warnings"] = "[]" if warnings == [] else json.dumps(warnings)
    with connection.wrap_database_errors, connection.cursor() as cursor:
        if not is_partitioned():
            sql = f"COPY {Job._meta.db_table} ({columns}) FROM STDIN"
            with cursor.cursor.copy(sql, writer=QueuedLibpqWriter(cursor.cursor)) as copy:
                rows_copy(copy, rows, attnames)
                if framed is not None and framed_count:
                    values = frame_rows.copy_frame(
                        framed, ids=None, columns=attnames, **frame_values
                    )
                    copy.write(frame_rows.copy_text(values))
                if during is not None:
                    during()
            return
        # The key rows first, with ids taken from the ledger's sequence: a key a concurrent
        # import wrote first fails here, before the ledger's COPY. The key table's triggers
        # skip these statements (migration 0022).
        ids = job_ids_reserve(cursor, len(rows) + framed_count)
        for row, pk in zip(rows, ids, strict=False):
            row["id"] = pk
        framed_ids = ids[len(rows) :]
        key_text = b""
        if framed is not None and framed_count:
            key_text = frame_rows.copy_text(
                frame_rows.copy_frame(
                    framed, ids=framed_ids, columns=["id", *KEY_COLUMNS], **frame_values
                )
            )
        ledger_text: list[bytes] = []

        def ledger_format() -> None:
            # Formatted while the server reads the key rows (the COPYs' writers are queued:
            # a write returns at once, a worker thread sends it).
            if framed is not None and framed_count:
                values = frame_rows.copy_frame(
                    framed, ids=framed_ids, columns=["id", *attnames], **frame_values
                )
                ledger_text.append(frame_rows.copy_text(values))

        with key_table_kept_here(cursor):
            keys_insert(cursor, rows, key_text, during=ledger_format)
            sql = f"COPY {Job._meta.db_table} (id, {columns}) FROM STDIN"
            with cursor.cursor.copy(sql, writer=QueuedLibpqWriter(cursor.cursor)) as copy:
                rows_copy(copy, rows, ["id", *attnames])
                for text in ledger_text:
                    copy.write(text)
                if during is not None:
                    during()  # while the server reads the ledger's rows


_UPDATED = [*_COMPARED, "source_hash", "import_run_id", "line_number", "charged_at"]
_COLUMN_OF = {f.attname: f.column or f.attname for f in Job._meta.concrete_fields}
_JSON_COLUMNS = {"warnings"}


def _jobs_update(jobs: list[Job]) -> None:
    """Write the batch's changed rows: on PostgreSQL one COPY into a temporary table and one
    ``UPDATE ... FROM`` (set-based: the statements do not grow with the batch); elsewhere the
    ORM's ``bulk_update``."""
    if connection.vendor != "postgresql":
        Job.objects.bulk_update(jobs, _UPDATED, batch_size=500)
        return
    table = Job._meta.db_table
    quoted = [connection.ops.quote_name(_COLUMN_OF[name]) for name in _UPDATED]
    assignments = ", ".join(f"{name} = c.{name}" for name in quoted)
    with connection.wrap_database_errors, connection.cursor() as cursor:
        # Created once per connection, emptied at each commit.
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS job_changes ON COMMIT DELETE ROWS AS "  # noqa: S608
            f"SELECT id, {', '.join(quoted)} FROM {table} WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY job_changes (id, {', '.join(quoted)}) FROM STDIN") as copy:
            for job in jobs:
                values = [getattr(job, name) for name in _UPDATED]
                copy.write_row(
                    [
                        job.pk,
                        *(
                            json.dumps(value) if name in _JSON_COLUMNS else value
                            for name, value in zip(_UPDATED, values, strict=True)
                        ),
                    ]
                )
        if not is_partitioned():
            cursor.execute(
                f"UPDATE {table} AS j SET {assignments} FROM job_changes AS c "  # noqa: S608
                "WHERE j.id = c.id"
            )
            return
        with key_table_kept_here(cursor):
            cursor.execute(
                f"UPDATE {table} AS j SET {assignments} FROM job_changes AS c "  # noqa: S608
                "WHERE j.id = c.id"
            )
            keys_update_from(cursor, "job_changes")


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
    # The partitioned ledger's key table holds what is asked here: one probe of one index,
    # where the ledger itself would need one per monthly partition.
    table, id_column = (KEY_TABLE, "job_id") if is_partitioned() else (Job._meta.db_table, "id")
    sql = (
        "SELECT j.job_id_raw, j.run, j.id, j.source_hash, j.charge_state "  # noqa: S608
        "FROM unnest(%s::text[]) AS k(job_id_raw) CROSS JOIN LATERAL ("
        f"  SELECT {id_column} AS id, job_id_raw, run, source_hash, charge_state FROM {table}"
        "   WHERE cluster_id = %s AND job_id_raw = k.job_id_raw LIMIT 10000) AS j"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [raw_ids, cluster.pk])
        return cursor.fetchall()


def _new_row(
    values: dict[str, Any], *, cluster: Cluster, key: tuple[str, str], run: ImportRun,
    record: SacctRecord | columnar.FastLine, now: datetime,
) -> dict[str, Any]:  # fmt: skip
    return {
        **values,
        "cluster_id": cluster.pk,
        "job_id_raw": key[0],
        "run": key[1],
        "import_run_id": run.pk,
        "line_number": record.line_number,
        "charged_at": now if is_booked(values) else None,
        "updated_at": now,
    }


@dataclass
class _Prepared:
    """A batch read, compared with the ledger and priced: what :func:`_batch_apply` writes."""

    batch: _Batch
    summary: ImportSummary
    changes: _Changes
    quarantine: list[_Quarantine]
    now: datetime


def _commit_unflushed() -> None:
    if connection.vendor == "postgresql":
        # Do not wait for the WAL flush of each batch. A database crash can then lose the
        # last batches committed, whole (jobs, roll-ups and counters go together), and the
        # rerun an interrupted import needs anyway books them again.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _batch_prepare(
    batch: _Batch,
    *,
    run: ImportRun,
    lookups: _Lookups,
    header: str,
    pricer: columnar.ShapePricer | None = None,
) -> _Prepared:
    """In the caller's transaction: compare the batch with the ledger and price what it
    changes (projects an account needs are created here). Nothing else is written."""
    summary = ImportSummary(
        lines=batch.lines,
        blank=batch.blank,
        other_clusters=batch.other_clusters,
        steps_skipped=batch.steps,
    )
    cluster = lookups.cluster
    now = timezone.now()
    quarantine = list(batch.quarantine)
    ledger_write_lock()  # before any table lock: see accounting.ledger_storage
    # The cost model versions this batch prices with stay the newest until it commits.
    cluster_row_lock(cluster, exclusive=False)
    lookups.pricer_refresh()
    if batch.repeated:
        quarantine.extend(_repeats_resolve(batch, lookups, pricer, summary))
    known, old_jobs, fingerprints = _stored_rows(batch, cluster=cluster, header=header)
    changes = _changes_for(
        batch, known=known, old_jobs=old_jobs, fingerprints=fingerprints, lookups=lookups,
        run=run, now=now, summary=summary, pricer=pricer,
    )  # fmt: skip
    quarantine.extend(changes.quarantine)
    return _Prepared(batch, summary, changes, quarantine, now)


def _batch_apply(
    prepared: _Prepared,
    *,
    cluster: Cluster,
    run: ImportRun,
    zone: tzinfo,
    header: str,
    resolve_quarantine: bool,
) -> ImportSummary:
    """In the caller's transaction: write what :func:`_batch_prepare` found -- jobs, roll-ups,
    quarantined lines, the run's counters and the ledger's stamp -- and return the batch's
    counts."""
    changes, summary, now = prepared.changes, prepared.summary, prepared.now
    references_check(
        [*changes.inserts, *changes.updates],
        _framed_references(changes, cluster_id=cluster.pk, run_id=run.pk),
    )
    framed = changes.framed

    def framed_rollups() -> None:
        # The framed rows' roll-up deltas, summed while the server reads their COPY.
        if framed is not None and changes.framed_hashes:
            rollups_add_frame(changes.deltas, framed.frame, framed.memories, zone, framed.measured)

    if changes.inserts or changes.framed_hashes:
        _jobs_insert(
            changes.inserts, framed, during=framed_rollups,
            source_hashes=changes.framed_hashes, cluster_id=cluster.pk, run_id=run.pk, now=now,
        )  # fmt: skip
    if changes.updates:
        _jobs_update(changes.updates)
    daily_apply(changes.deltas.daily)
    efficiency_apply(changes.deltas)
    shapes_apply(changes.deltas.shapes)
    hourly_apply(changes.deltas.hourly)
    energy_hours_apply(changes.deltas.energy)
    _corrections_apply(changes.corrections, run=run)

    _quarantine_store(
        prepared.quarantine, cluster=cluster, run=run, header=header, summary=summary,
        resolve_lines=changes.stored_lines if resolve_quarantine else [],
        resolve_jobs=changes.stored_ids if resolve_quarantine else [], now=now,
    )  # fmt: skip

    ImportRun.objects.filter(pk=run.pk).update(
        heartbeat_at=now,  # committed with the counters: the run's sign of life
        **{name: F(name) + getattr(summary, name) for name in ("lines", *BUCKETS)},
    )
    ledger_stamp_move()  # last: concurrent batches wait on its row only until this one commits
    return summary


def _batch_write(
    batch: _Batch,
    *,
    run: ImportRun,
    lookups: _Lookups,
    header: str,
    resolve_quarantine: bool,
    pricer: columnar.ShapePricer | None = None,
) -> ImportSummary:
    """Write one batch in one transaction -- jobs, roll-ups, quarantined lines and the run's
    counters together -- and return its counts."""
    with transaction.atomic():
        _commit_unflushed()
        prepared = _batch_prepare(batch, run=run, lookups=lookups, header=header, pricer=pricer)
        return _batch_apply(
            prepared, cluster=lookups.cluster, run=run, zone=lookups.zone, header=header,
            resolve_quarantine=resolve_quarantine,
        )  # fmt: skip


def _framed_references(changes: _Changes, *, cluster_id: int, run_id: int) -> dict[str, set[Any]]:
    """The distinct references of the framed new rows, column by column."""
    if not changes.framed_hashes or changes.framed is None:
        return {}
    frame = changes.framed.frame
    found = {
        column: set(frame.get_column(name).unique().drop_nulls().to_list())
        for column, name in (
            ("project_id", "project_id"), ("partition_id", "partition_id"),
            ("partition_version_id", "version_id"), ("user_id", "user_id"),
        )
    }  # fmt: skip
    return {**found, "cluster_id": {cluster_id}, "import_run_id": {run_id}}


def _repeats_resolve(
    batch: _Batch, lookups: _Lookups, pricer: columnar.ShapePricer | None, summary: ImportSummary
) -> list[_Quarantine]:
    """Choose, for each run read more than once in the batch, the line that books it, and
    return the quarantined ones among the others.

    The last line that can be booked wins (as when each line was a batch of its own), except
    that an older dump of a job that a booked line finished does not take it back to pending.
    The other lines count as "imported" (superseded) or "quarantined", one bucket each; when
    no line of the run can be booked, the last stays, to be quarantined with its reason.
    """
    quarantine: list[_Quarantine] = []
    for key, lines in batch.repeated.items():
        verdicts: list[tuple[SacctRecord | columnar.FastLine, Any]] = []
        for line in lines:
            values: Any = None
            if (
                pricer is not None
                and isinstance(line, columnar.FastLine)
                and _used(line, batch) is None
            ):
                values = pricer.rows([line]).get(key)
            if values is None:
                parsed = line.parsed() if isinstance(line, columnar.FastLine) else line
                values = _row_for(parsed, lookups, batch.usage.get(parsed.job_id_raw))
            verdicts.append((line, values))
        rows = [verdict for verdict in verdicts if isinstance(verdict[1], dict)]
        winner = rows[-1] if rows else verdicts[-1]
        booked = [verdict for verdict in rows if is_booked(verdict[1])]
        if booked and not is_booked(winner[1]):
            winner = booked[-1]
        for verdict in verdicts:
            if verdict is winner:
                continue
            if isinstance(verdict[1], _Quarantine):
                quarantine.append(verdict[1])
            else:
                summary.add_one("imported")
        batch.records[key] = winner[0]  # the same choice again if the batch is retried
    return quarantine


def _stored_rows(
    batch: _Batch, *, cluster: Cluster, header: str
) -> tuple[
    dict[tuple[str, str], tuple[int, str, str]],
    dict[tuple[str, str], Job],
    dict[tuple[str, str], str],
]:
    """The batch's jobs already in the ledger (pk, line fingerprint, charge state), the rows
    whose line changed (locked and read again) and each record's fingerprint."""
    # Which rows exist, and what line each was read from. No lock here: most rows of an
    # overlapping window are unchanged and are not written, and locking them would write
    # every one of them (PostgreSQL records row locks in the rows).
    known: dict[tuple[str, str], tuple[int, str, str]] = {}
    raw_ids = sorted({job_id_raw for job_id_raw, _ in batch.records})
    for job_id_raw, run_key, pk, source_hash, charge_state in _known_rows(cluster, raw_ids):
        known[(job_id_raw, run_key)] = (pk, source_hash, charge_state)

    fingerprints = {
        key: _fingerprint(header, rec.raw, batch.usage.get(rec.job_id_raw))
        for key, rec in batch.records.items()
    }
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
    return known, old_jobs, fingerprints


@dataclass
class _Changes:
    """What a batch changes: new rows, changed rows, their roll-up deltas, and lines to
    quarantine or to mark resolved."""

    inserts: list[dict[str, Any]] = field(default_factory=list)
    # More new rows, as one frame (accounting.ledger.frame_rows), and their fingerprints.
    framed: frame_rows.NewRows | None = None
    framed_hashes: list[str] = field(default_factory=list)
    updates: list[Job] = field(default_factory=list)
    deltas: Deltas = field(default_factory=Deltas)
    quarantine: list[_Quarantine] = field(default_factory=list)
    stored_lines: list[str] = field(default_factory=list)
    # The jobs now in the ledger: their earlier quarantined lines are closed.
    stored_ids: list[str] = field(default_factory=list)
    # Per project: [corrected jobs, net SU change] of the booked jobs read again changed.
    corrections: dict[int, list[Any]] = field(default_factory=dict)


def _changes_for(
    batch: _Batch,
    *,
    known: dict[tuple[str, str], tuple[int, str, str]],
    old_jobs: dict[tuple[str, str], Job],
    fingerprints: dict[tuple[str, str], str],
    lookups: _Lookups,
    run: ImportRun,
    now: datetime,
    summary: ImportSummary,
    pricer: columnar.ShapePricer | None = None,
) -> _Changes:
    """Compare each record of the batch with its stored row and say what to write.

    A job whose sacct line is exactly the one already booked is left alone without being
    charged again; only new and changed lines go through the engine: the columnar reader's
    lines priced per shape (``columnar.ShapePricer``), the rest, and any it leaves, by
    ``_row_for``.
    """
    changes = _Changes()
    cluster = lookups.cluster
    new_rows: list[dict[str, Any]] = []  # their roll-up deltas are added in columns
    fast_rows: dict[tuple[str, str], dict[str, Any] | None] = {}
    framed: set[tuple[str, str]] = set()
    if pricer is not None:
        lines = [
            record
            for key, record in batch.records.items()
            if isinstance(record, columnar.FastLine)
            and (key not in known or known[key][1] != fingerprints[key])
        ]
        if connection.vendor == "postgresql":
            # New lines priced into one frame, written and rolled up from it, with what they
            # used (their own usage columns and their steps'); the rest (and what the frame
            # leaves) as rows.
            unknown = [line for line in lines if (line.job_id_raw, "") not in known]
            used = {line.job_id_raw: _used(line, batch) for line in unknown}
            changes.framed = frame_rows.new_rows_priced(
                pricer,
                unknown,
                earliest=EARLIEST,
                max_held=MAX_HELD,
                usages={job_id_raw: usage for job_id_raw, usage in used.items() if usage},
            )
            if changes.framed.frame.height:
                raw_ids = changes.framed.frame.get_column("job_id_raw").to_list()
                framed = {(job_id_raw, "") for job_id_raw in raw_ids}
                changes.framed_hashes = [fingerprints[(raw_id, "")] for raw_id in raw_ids]
            lines = [line for line in lines if (line.job_id_raw, "") not in framed]
        # The pricer's rows hold no usage: a measured line is the per-line code's.
        fast_rows = pricer.rows([line for line in lines if _used(line, batch) is None])
    for key, record in batch.records.items():
        if key in framed:
            summary.add_one("charged")  # booked (charged or refunded), new
            changes.stored_lines.append(record.raw)
            changes.stored_ids.append(record.job_id_raw)
            continue
        stored = known.get(key)
        locked = old_jobs.get(key)
        if locked is not None and locked.source_hash == fingerprints[key]:
            stored = (locked.pk, locked.source_hash, locked.charge_state)
        if stored is not None and stored[1] == fingerprints[key]:
            bucket = "pending" if stored[2] == Job.ChargeState.PENDING else "imported"
            summary.add_one(bucket)
            changes.stored_lines.append(record.raw)
            changes.stored_ids.append(record.job_id_raw)
            continue
        values: dict[str, Any] | _Quarantine | _NothingToCharge | None = None
        if isinstance(record, columnar.FastLine):
            values = fast_rows.get(key)
        if values is None:
            # The per-line code decides, for this line only.
            parsed = record.parsed() if isinstance(record, columnar.FastLine) else record
            record = parsed
            values = _row_for(parsed, lookups, batch.usage.get(record.job_id_raw))
        if isinstance(values, _Quarantine):
            changes.quarantine.append(values)
            continue
        if isinstance(values, _NothingToCharge):
            summary.add_one("imported")
            changes.stored_lines.append(record.raw)
            changes.stored_ids.append(record.job_id_raw)
            continue
        values["source_hash"] = fingerprints[key]
        changes.stored_lines.append(record.raw)
        changes.stored_ids.append(record.job_id_raw)
        job = old_jobs.get(key)
        if job is None:
            changes.inserts.append(
                _new_row(values, cluster=cluster, key=key, run=run, record=record, now=now)
            )
            new_rows.append(values)
            summary.add_one(_bucket_new(values))
            continue
        old = {name: getattr(job, name) for name in _COMPARED}
        new = {name: values[name] for name in _COMPARED}
        if old == new:
            summary.add_one("pending" if not is_booked(new) else "imported")
        elif is_booked(old) and not is_booked(new):
            # An older dump (taken while the job ran) read after a newer one: the
            # finished record stands, a charge never goes back to pending.
            summary.add_one("imported")
        else:
            rollup_add(changes.deltas, old, lookups.zone, -1)
            rollup_add(changes.deltas, new, lookups.zone, +1)
            if is_booked(new) and not is_booked(old):
                summary.add_one("charged")
            else:
                summary.add_one("updated" if is_booked(new) else "pending")
            if is_booked(new) and is_booked(old):
                _correction_add(changes.corrections, old, -1)
                _correction_add(changes.corrections, new, +1)
            for name, value in values.items():
                setattr(job, name, value)
            job.import_run = run
            job.line_number = record.line_number
            if is_booked(new) and job.charged_at is None:
                job.charged_at = now
            changes.updates.append(job)
    rollups_add_new(changes.deltas, new_rows, lookups.zone)
    return changes


def _used(line: columnar.FastLine, batch: _Batch) -> JobUsage | None:
    """What a fast line's job used: its line's usage columns with its steps' (``_row_for``'s
    rule), or None when neither says."""
    steps = batch.usage.get(line.job_id_raw)
    return line.usage.merged(steps) if line.usage else steps


def _correction_add(corrections: dict[int, list[Any]], values: dict[str, Any], sign: int) -> None:
    """A corrected job's SU taken back from (-1) or added to (+1) its project's net change;
    the job counts once, under the project it is booked to now."""
    entry = corrections.setdefault(values["project_id"], [0, Decimal(0)])
    entry[1] += sign * values["service_units"]
    if sign > 0:
        entry[0] += 1


def _corrections_apply(corrections: dict[int, list[Any]], *, run: ImportRun) -> None:
    """Add the batch's corrections to the run's changes per project (one upsert)."""
    rows = [
        (run.pk, project_id, jobs, units)
        for project_id, (jobs, units) in sorted(corrections.items())
        if jobs or units
    ]
    if rows:
        run_changes_apply(rows)


def _storable(name: str, value: Any) -> Any:
    """Text a quarantine or run column can keep: a NUL byte (binary junk in a dump) is shown
    as U+2400, a lone surrogate (a JSON ``\\ud800``) as its escape, and a value longer than
    its column (an account of 300 characters) is cut."""
    if not isinstance(value, str):
        return value
    value = value.replace("\x00", "\u2400")
    if not value.isascii():
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    max_length = _QUARANTINE_LENGTHS.get(name)
    return value[:max_length] if max_length else value


_QUARANTINE_LENGTHS = {
    f.attname: f.max_length
    for f in QuarantinedRecord._meta.concrete_fields
    if isinstance(f, models.CharField)
}


def _quarantine_store(
    quarantine: list[_Quarantine],
    *,
    cluster: Cluster,
    run: ImportRun,
    header: str,
    summary: ImportSummary,
    resolve_lines: list[str],
    resolve_jobs: list[str],
    now: datetime,
) -> None:
    """Keep the batch's unusable lines (a line seen before keeps its first sighting) and mark
    resolved the quarantined lines this batch has now stored, and those of jobs it booked (a
    corrected line of the same job closes the broken one)."""
    if quarantine:
        # The same line twice in one batch (two blank lines, a repeated bad line) is one
        # record: one upsert may not touch a row twice. Both count as quarantined lines.
        first: dict[str, _Quarantine] = {}
        for item in quarantine:
            first.setdefault(_raw_hash(header, item.raw), item)
        QuarantinedRecord.objects.bulk_create(
            [
                QuarantinedRecord(
                    cluster=cluster,
                    import_run=run,
                    source=run.source,
                    header=_storable("header", header),
                    raw_hash=raw_hash,
                    **{name: _storable(name, value) for name, value in asdict(item).items()},
                )
                for raw_hash, item in first.items()
            ],
            update_conflicts=True,
            unique_fields=["cluster", "raw_hash"],
            # The first sighting keeps its source and line number; the reason is refreshed.
            update_fields=["reason", "field"],
        )
        summary.quarantined += len(quarantine)
    if resolve_lines:
        QuarantinedRecord.objects.filter(
            cluster=cluster,
            resolved_at__isnull=True,
            raw_hash__in=[_raw_hash(header, raw) for raw in resolve_lines],
        ).update(resolved_at=now, resolution=f"imported by run {run.pk}")
    if resolve_jobs:
        QuarantinedRecord.objects.filter(
            cluster=cluster, resolved_at__isnull=True, job_id_raw__in=resolve_jobs
        ).update(resolved_at=now, resolution=f"job booked from another line by run {run.pk}")


def _bucket_new(values: dict[str, Any]) -> str:
    if not is_booked(values):
        return "pending"
    if values["charge_state"] == Job.ChargeState.CHARGED and values["start"] is None:
        return "imported"  # never ran: recorded, nothing to book
    return "charged"


def _batch_write_with_retry(
    batch: _Batch, write: Callable[..., Any] = _batch_write, **kwargs: Any
) -> Any:
    """Retry a batch that lost a race with a concurrent import (unique key or deadlock).
    ``write`` is the batch's work (``_batch_write``, or ``_batch_prepare_only`` of an
    overlapped import); what it returns is returned.

    The retry runs in a new transaction, which sees the other import's committed rows as
    existing, so each job is booked once. Projects the failed attempt created went with its
    rollback: the lookups forget them and read again. A batch whose connection was lost is
    written again on a new one, once the server answers (``_RECONNECTS``).
    """
    lost: list[str] = []  # the connection errors met so far
    races = 0
    while True:
        try:
            kwargs["lookups"].months_ready(batch.records.values())
            summary = write(batch, **kwargs)
            kwargs["lookups"].batch_committed()
            if lost:
                run_interrupted(
                    kwargs["run"],
                    f"the database connection broke ({lost[0]}); the batch was written on a"
                    f" new connection after {len(lost)} attempt(s)",
                )
            return summary
        except (IntegrityError, OperationalError, InterfaceError) as error:
            kwargs["lookups"].forget_created()
            if kwargs.get("pricer") is not None:
                kwargs["pricer"].forget()
            if connection_lost(error):
                # The server went away (a restart): wait for it, then write the batch again
                # on a new connection; what it committed before is in the run's counters.
                if len(lost) == _RECONNECTS:
                    raise
                lost.append(str(error).strip().splitlines()[0] if str(error).strip() else "")
                time.sleep(_RECONNECT_WAIT_SECONDS * 2 ** (len(lost) - 1))
                continue
            races += 1
            if races == _RETRIES or isinstance(error, InterfaceError):
                raise
            logger.info("batch retried after a concurrent write (attempt %d): %s", races, error)


# A lost connection is tried again after 0.5, 1, 2, 4, 8 and 16 s (31.5 s in all: a restart);
# a database away longer fails the run with the reason.
_RECONNECTS = 6
_RECONNECT_WAIT_SECONDS = 0.5


def connection_lost(error: Error) -> bool:
    """Whether ``error`` says the connection to PostgreSQL is gone (the server restarted,
    terminated it or could not be reached: SQLSTATE class 08 or 57P, or no answer at all),
    not that the database refused the work (a deadlock, a unique key). The connection is then
    closed, so the next query opens a new one; inside a caller's transaction nothing can be
    done about it (False)."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return False
    sqlstate = getattr(error.__cause__, "sqlstate", None)
    if sqlstate is not None and not sqlstate.startswith(("08", "57P")):
        return False
    connection.close()
    return True


def run_interrupted(run: ImportRun, note: str) -> None:
    """Add a dated line to what interrupted ``run`` (its page and API show them)."""
    line = f"{timezone.now():%Y-%m-%d %H:%M:%S} UTC: {note}"[:2000]
    ImportRun.objects.filter(pk=run.pk).update(
        interruptions=Concat("interruptions", Value(line + "\n"), output_field=models.TextField())
    )


def _fault_point(batches_written: int) -> None:
    """Test-only: with ``PORTAL_IMPORT_FAULT_AFTER_BATCH=N`` the process dies by SIGKILL right
    after its Nth batch committed, as a worker killed by the kernel would (docs/importing.md)."""
    after = settings.IMPORT_FAULT_AFTER_BATCH
    if after and batches_written == after:
        if settings.IMPORT_FAULT_COMMAND:
            # A fault made by a test at this point (restart the database, stop the broker):
            # the import goes on once the command returns.
            logger.warning("PORTAL_IMPORT_FAULT_AFTER_BATCH=%d: running the fault command", after)
            subprocess.run(settings.IMPORT_FAULT_COMMAND, shell=True, check=True)  # noqa: S602
            return
        logger.warning("PORTAL_IMPORT_FAULT_AFTER_BATCH=%d: killing this process", after)
        os.kill(os.getpid(), signal.SIGKILL)


class _NotOverlapped(Exception):
    """A batch to write whole, in one transaction on the import's own connection: it changes
    stored rows (locked where they are read), or it is priced by a cost model."""


def _batch_prepare_only(
    batch: _Batch,
    *,
    run: ImportRun,
    lookups: _Lookups,
    header: str,
    resolve_quarantine: bool,
    pricer: columnar.ShapePricer | None = None,
) -> _Prepared:
    """The first half of an overlapped batch, in a transaction of its own that commits the
    projects it created (the writer's transaction must see them). Raises
    :class:`_NotOverlapped`, rolling back, for a batch to write whole."""
    del resolve_quarantine  # the writer's
    with transaction.atomic():
        prepared = _batch_prepare(batch, run=run, lookups=lookups, header=header, pricer=pricer)
        if prepared.changes.updates or lookups.pricer is not None:
            raise _NotOverlapped
        return prepared


def _batch_apply_on_own_connection(
    prepared: _Prepared, *, cluster: Cluster, **kwargs: Any
) -> ImportSummary:
    """The second half of an overlapped batch, in the writer thread (on its own connection):
    the batch's locks taken again, then everything written and committed at once."""
    try:
        with transaction.atomic():
            _commit_unflushed()
            ledger_write_lock()
            cluster_row_lock(cluster, exclusive=False)
            if JobPricer.refreshed(None, cluster=cluster) is not None:
                raise _NotOverlapped  # a cost model was saved after the batch was priced
            return _batch_apply(prepared, cluster=cluster, **kwargs)
    except BaseException:
        connection.close()  # the next batch opens a new one
        raise


def _close_own_connection() -> None:
    connection.close()


class _Overlap:
    """Batch k written and committed on a second connection, by a thread, while batch k+1 is
    compared with the ledger and priced on the import's own (docs/importing.md, "Batches
    overlapped"). Batches still commit one at a time and in order, and each is still one
    transaction: its jobs, roll-ups, quarantined lines and counters. A batch that shares a run
    with the one being written waits for it (it must see that row); a batch that changes stored
    rows or is priced by a cost model is written whole on the import's connection; a batch the
    writer could not commit (a concurrent import's row, a lost connection, a cost model saved
    meanwhile) is written again, whole, there, with the retries a single import has."""

    def __init__(
        self,
        *,
        prepare: Callable[[_Batch], _Prepared],
        apply: Callable[[_Prepared], ImportSummary],
        write: Callable[[_Batch], ImportSummary],
        forget: Callable[[], None],
        committed: Callable[[ImportSummary], None],
        whole: Callable[[], bool],
    ) -> None:
        self.prepare, self.apply, self.write = prepare, apply, write
        self.forget, self.committed, self.whole = forget, committed, whole
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-writer")
        self.pending: tuple[_Batch, Future[ImportSummary]] | None = None

    def submit(self, batch: _Batch) -> None:
        if self.pending is not None and not self.pending[0].records.keys().isdisjoint(
            batch.records
        ):
            self.drain()  # a run of both: its row must be in the ledger when this one reads
        if self.whole():  # a cost model prices the cluster's jobs: every batch is written whole
            self.drain()
            self.committed(self.write(batch))
            return
        try:
            prepared = self.prepare(batch)
        except _NotOverlapped:
            self.forget()  # the projects it created were rolled back with it
            self.drain()
            self.committed(self.write(batch))
            return
        self.drain()
        self.pending = (batch, self.executor.submit(self.apply, prepared))

    def drain(self) -> None:
        """Wait for the batch being written, and count it once committed."""
        if self.pending is None:
            return
        batch, future = self.pending
        self.pending = None
        try:
            summary = future.result()
        except (_NotOverlapped, IntegrityError, OperationalError, InterfaceError) as error:
            logger.info("batch written again on the import's connection: %s", error)
            self.forget()
            summary = self.write(batch)
        self.committed(summary)

    def close(self, *, failed: bool) -> None:
        """Drain (quietly when the import already failed), then close the writer."""
        try:
            if failed:
                if self.pending is not None:
                    wait([self.pending[1]])
                    self.pending = None
            else:
                self.drain()
        finally:
            # The writer thread's own connection (looked up in that thread).
            self.executor.submit(_close_own_connection).result()
            self.executor.shutdown()


def jobs_import(
    *,
    cluster: Cluster,
    lines: Iterable[str] = (),
    json_stream: IO[bytes] | None = None,
    source: str,
    create_projects: bool = False,
    started_by: Any = None,
    run: ImportRun | None = None,
    tz: tzinfo | None = None,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[ImportSummary], None] | None = None,
    columns: str | None = None,
    delimiter: str | None = None,
    header: str | None = None,
    first_line_number: int = 1,
    finish_run: bool = True,
    resume_after: int = 0,
    columnar_pricing: bool = True,
    overlap_batches: bool | None = None,
) -> tuple[ImportRun, ImportSummary]:
    """Import ``sacct --parsable2`` lines (or, given ``json_stream``, ``sacct --json`` output)
    for ``cluster``; return the run and its summary.

    Times are read in ``tz``, by default the cluster's time zone (sacct prints local time).
    ``columns`` reads a ``--noheader`` dump made with that column list; ``delimiter`` is the
    one sacct was given (``--delimiter``; by default read from the header, ``|`` with
    ``columns``). ``header`` and ``first_line_number`` read a range of a file whose header line
    is ``header`` (``accounting.ledger.sources.file_import_parallel``); with ``finish_run``
    false the run is left running for the caller to finish. ``columnar_pricing`` false reads
    every line with the per-line code (the fast path's tests compare the two).
    ``overlap_batches`` (by default ``settings.IMPORT_OVERLAP``) writes each batch on a second
    connection while the next is priced (``_Overlap``); never inside a caller's transaction.
    ``resume_after`` skips that many data lines (items of JSON): those an interrupted attempt
    at ``run`` already committed and counted, so a redelivered or requeued import counts each
    line once.
    Raises ``ImportFatal`` (after recording the run as failed) when the input has no usable
    header. Quarantined lines are not errors: they are counted and kept.
    """
    if run is None:
        run = ImportRun.objects.create(cluster=cluster, source=source[:500], started_by=started_by)
    lookups = _Lookups(cluster, create_projects=create_projects)
    resolve = QuarantinedRecord.objects.filter(cluster=cluster, resolved_at__isnull=True).exists()
    try:
        given = header
        if given is None and columns is not None:
            given = columns_header(columns, delimiter or "|")
        if json_stream is not None:
            # Records read from JSON carry the parsable2 line sacct would have printed for
            # them: quarantined ones are kept, and read again, under this header.
            given = JSON_HEADER
        tap = _HeaderTap(lines, header=given)
    except SacctHeaderError as error:
        _run_failed(run, str(error))
        raise ImportFatal(str(error)) from None
    slurm_name = cluster.slurm_name
    total = ImportSummary()
    batch = _Batch()
    batches_written = 0
    stages = columnar.Stages()
    pricer = None
    reader = json_reader = None
    if columnar_pricing:
        pricer = columnar.ShapePricer(
            lookups,
            time_problem=lambda line: _time_problem(line, horizon=lookups.horizon),
            stages=stages,
        )
        json_reader = functools.partial(
            columnar.read_entries,
            stages=stages,
            chunk_lines=min(batch_size, columnar.CHUNK_LINES),
        )
        reader = functools.partial(
            columnar.read_lines,
            step_item=line_item,
            stages=stages,
            # Read no further ahead than a batch: an import stopped midway has written all
            # but the batch in flight.
            chunk_lines=min(batch_size, columnar.CHUNK_LINES),
        )
    to_skip = resume_after

    def write(batch: _Batch, how: Callable[..., Any] = _batch_write) -> Any:
        return _batch_write_with_retry(
            batch, how, run=run, lookups=lookups, header=tap.header or "",
            resolve_quarantine=resolve, pricer=pricer,
        )  # fmt: skip

    def committed(summary: ImportSummary) -> None:
        nonlocal batches_written
        total.add(summary)
        batches_written += 1
        _fault_point(batches_written)
        if progress is not None:
            progress(total)

    def forget() -> None:
        lookups.forget_created()
        if pricer is not None:
            pricer.forget()

    overlap = None
    if (overlap_batches if overlap_batches is not None else settings.IMPORT_OVERLAP) and (
        connection.vendor == "postgresql" and not connection.in_atomic_block
    ):
        overlap = _Overlap(
            prepare=lambda batch: write(batch, _batch_prepare_only),
            apply=functools.partial(
                _batch_apply_on_own_connection,
                cluster=cluster,
                run=run,
                zone=lookups.zone,
                header=tap.header or "",
                resolve_quarantine=resolve,
            ),
            write=write,
            forget=forget,
            committed=committed,
            whole=lambda: lookups.pricer is not None,
        )

    def flush() -> None:
        nonlocal batch
        if batch.lines:
            started, priced = time.perf_counter(), stages.seconds["price"]
            if overlap is not None:
                overlap.submit(batch)
            else:
                committed(write(batch))
            stages.add("write", started)
            stages.seconds["write"] -= stages.seconds["price"] - priced
        batch = _Batch()

    try:
        items: Iterable[Any]
        if json_stream is not None:
            items = parse_sacct_json(
                json_stream,
                tz=tz or lookups.zone,
                cluster=slurm_name,
                steps=False,
                reader=json_reader,
            )
        else:
            items = parse_sacct(
                tap,
                tz=tz or lookups.zone,
                cluster=slurm_name,
                steps=False,
                columns=columns,
                delimiter=delimiter,
                header=header,
                first_line_number=first_line_number,
                reader=reader,
            )
        # The next lines are read and parsed while a batch is written (the process mostly
        # waits on the server then); a batch is still written only once read whole.
        for item in read_ahead(items, name=f"import-run-{run.pk}"):
            if run.header == "" and tap.header is not None:
                run.header = tap.header
                ImportRun.objects.filter(pk=run.pk).update(header=_storable("header", tap.header))
            if to_skip:
                to_skip -= 1  # committed by an earlier attempt at this run
                continue
            if batch.lines >= batch_size and not isinstance(item, SacctStep):
                # A full batch is written before the next job, never between a job and the
                # steps that follow it (their usage is the job's).
                flush()
            batch.lines += 1
            if isinstance(item, SacctLineError):
                if item.reason == EMPTY_LINE_REASON:
                    batch.blank += 1
                    continue
                batch.quarantine.append(
                    _Quarantine(
                        line_number=item.line_number,
                        raw=item.raw,
                        reason=item.reason,
                        field=item.field or "",
                        job_id_raw=item.job_id_raw,
                    )
                )
            elif isinstance(item, SacctStep):
                batch.steps += 1
                if item.usage is not None:
                    steps = batch.usage.get(item.job_id_raw)
                    batch.usage[item.job_id_raw] = (
                        item.usage if steps is None else steps.plus_step(item.usage)
                    )
            elif item.cluster != slurm_name:
                batch.other_clusters += 1
            else:
                key = (item.job_id_raw, item.run_key)
                earlier = batch.records.get(key)
                if earlier is not None:
                    # The same run twice in one batch (overlapping dumps concatenated, or a
                    # hostile file of one job id): resolved in memory when the batch is
                    # written (_repeats_resolve), not by writing the batch at each repeat.
                    batch.repeated.setdefault(key, [earlier]).append(item)
                    del batch.records[key]  # the run's place in the batch is its last line's
                batch.records[key] = item
        flush()
        if overlap is not None:
            overlap.close(failed=False)
            overlap = None
    except SacctHeaderError as error:
        if overlap is not None:
            overlap.close(failed=True)
        _run_failed(run, str(error))
        raise ImportFatal(str(error)) from None
    except BaseException as error:
        if overlap is not None:
            overlap.close(failed=True)
        _run_failed(run, f"{type(error).__name__}: {error}")
        raise
    stages.log(run.pk)
    if finish_run:
        # A resumed run also tells of the charges its earlier attempts committed.
        run_succeeded(run, charged=total.charged + (run.charged if resume_after else 0))
    run.refresh_from_db()
    return run, total


def run_succeeded(run: ImportRun, *, charged: int) -> None:
    """End an import run that booked all it read, however many processes wrote it. When it
    charged jobs, the balances moved: the apps above are told (``charges_booked``)."""
    ImportRun.objects.filter(pk=run.pk).update(
        status=ImportRun.Status.SUCCEEDED, finished_at=timezone.now()
    )
    if charged:
        charges_booked.send(sender=ImportRun, cluster_id=run.cluster_id)


def _run_failed(run: ImportRun, message: str) -> None:
    """Mark ``run`` failed. After a database error the connection may be broken: the run is
    then marked on a new one (a restarted server), else the recovery task finds it later."""
    for attempt in range(1, 4):
        try:
            ImportRun.objects.filter(pk=run.pk).update(
                status=ImportRun.Status.FAILED,
                finished_at=timezone.now(),
                error=_storable("error", message)[:10000],
            )
            return
        except DatabaseError as error:
            if attempt == 3 or not connection_lost(error):
                raise
            time.sleep(_RECONNECT_WAIT_SECONDS * 2 ** (attempt - 1))


# --- sacct on this host ----------------------------------------------------------------------


def quarantine_retry(*, cluster: Cluster) -> ImportSummary:
    """Read the cluster's open quarantined lines again (after a partition, project or spec was
    added); those that now import are charged and marked resolved, the rest stay."""
    total = ImportSummary()
    open_records = QuarantinedRecord.objects.filter(cluster=cluster, resolved_at__isnull=True)
    headers = list(open_records.values_list("header", flat=True).distinct().order_by("header"))
    for header in headers:
        raws = open_records.filter(header=header).order_by("pk").values_list("raw", flat=True)
        if header == JSON_HEADER:
            # A JSON job object that could not be converted is kept as JSON: only a new dump
            # of the job can replace it (its import closes the record).
            raws = raws.exclude(raw__startswith="{")
        _, summary = jobs_import(
            cluster=cluster,
            lines=[header, *raws.iterator()],
            source="quarantine retry",
        )
        total.add(summary)
    return total

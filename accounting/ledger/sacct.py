"""Streaming parser for ``sacct --parsable2`` output (Slurm 22.05).

Pure module: no Django, no settings, no database. :func:`parse_sacct` reads one line at a
time and yields, for every data line, exactly one :class:`SacctRecord` or
:class:`SacctLineError`; nothing is accumulated, so memory does not grow with the input.

Decisions an importer relies on:

* **Header.** The first non-blank line is the header; columns may come in any order and
  unknown columns are ignored. It is read when :func:`parse_sacct` is called, which raises
  :class:`SacctHeaderError` at once for missing required columns or an input without one.
* **Blank lines.** A blank line after the header is still a line of input, so it yields a
  :class:`SacctLineError` whose reason is :data:`EMPTY_LINE_REASON`. The invariant is simple:
  lines after the header == records + errors. An importer may choose not to show those.
  Blank lines *before* the header are skipped (they are counted in line numbers).
* **A repeated header line** (two dumps concatenated) yields an error with
  :data:`REPEATED_HEADER_REASON`; a header with another column order is not re-read.
* **Line numbers** are 1-based over the whole input: the header is line 1 when it is first.
* **States** are normalised by dropping the ``by <uid>`` suffix of ``CANCELLED by <uid>``
  (the uid goes to ``cancelled_by_uid``). A state outside :data:`KNOWN_STATES` is a line
  error rather than a guess, so a record's ``is_finished`` is always well defined.
* **Times** are sacct's naive local times, read in ``tz`` and converted to UTC. In a DST
  fold (the repeated hour) the first occurrence is taken (``fold=0``); a time in a DST gap
  is read with the offset in force before the gap (zoneinfo's ``fold=0`` rule).
* **run_key** tells apart the incarnations of a requeued job, which share ``JobIDRaw``: a
  ``REQUEUED`` line's key is its start (ISO 8601 UTC), the current incarnation's is empty.
  The ledger keys on cluster + JobIDRaw + run key; this property is the one definition.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from operator import itemgetter
from types import MappingProxyType
from typing import IO, Any, Literal, NamedTuple, TypeVar, overload

import hostlist

from accounting.clusters.efficiency import (
    MEMORY_ONE_TASK,
    MEMORY_SUMMED,
    MEMORY_TIMES_TASKS,
    JobUsage,
)
from accounting.clusters.units import is_ascii_digits, parse_decimal, parse_memory_mb
from kit.errors import ApplicationError

__all__ = [
    "ACTIVE_STATES",
    "ELAPSED_FIELDS",
    "EMPTY_LINE_REASON",
    "FINISHED_STATES",
    "KNOWN_STATES",
    "MAX_LINE_CHARS",
    "MAX_REASON_LENGTH",
    "OPTIONAL_FIELDS",
    "REPEATED_HEADER_REASON",
    "REQUIRED_FIELDS",
    "SacctHeaderError",
    "SacctLineError",
    "SacctRecord",
    "bounded_lines",
    "columns_header",
    "header_delimiter",
    "parse_elapsed",
    "parse_sacct",
    "parse_sacct_time",
    "parse_tres",
    "size_held_or_requested",
]

REQUIRED_FIELDS = (
    "JobID",
    "JobIDRaw",
    "User",
    "Account",
    "Partition",
    "State",
    "Submit",
    "Start",
    "End",
    "NNodes",
    "NodeList",
)
# At least one of these is required too; ElapsedRaw wins when both are present.
ELAPSED_FIELDS = ("ElapsedRaw", "Elapsed")
USAGE_FIELDS = (
    "TotalCPU", "MaxRSS", "TRESUsageInTot", "TRESUsageInMax", "TRESUsageInAve", "NTasks"
)  # fmt: skip
OPTIONAL_FIELDS = (
    # Without AllocTRES (dumps made for Open XDMoD before 2020, for instance) the resources
    # are read from NCPUS, ReqMem and the GPUs of ReqTRES or AllocGRES/ReqGRES, and each job
    # says so in its warnings.
    "AllocTRES",
    "AllocGRES",
    "ReqGRES",
    "Cluster",
    "JobName",
    "QOS",
    "ExitCode",
    "NCPUS",
    "ReqTRES",
    "ReqMem",
    "ConsumedEnergyRaw",
    "TimelimitRaw",
    # Formatted ("01:00:00", "6-23:59:00", "UNLIMITED"): read only without TimelimitRaw.
    "Timelimit",
    # What a job used (accounting.clusters.efficiency): TotalCPU on the allocation's line,
    # the others on its steps' lines.
    *USAGE_FIELDS,
)

EMPTY_LINE_REASON = "empty line"
# No sacct line is this long (the longest real ones, with big TRES and node lists, are a few
# KiB); a longer one is junk, quarantined with its first characters, so that memory stays
# bounded whatever the input (the readers cut lines at MAX_LINE_CHARS + 1).
MAX_LINE_CHARS = 1 << 20
_KEPT_OF_LONG_LINE = 4096
# SacctLineError.reason never exceeds this, whatever the line holds.
MAX_REASON_LENGTH = 300
REPEATED_HEADER_REASON = "repeated header line"

# Slurm's base states plus the state flags that sacct prints instead of the base state
# (https://slurm.schedmd.com/job_state_codes.html). A job in one of ACTIVE_STATES may still
# change; FINISHED_STATES are final for that record (a requeued run's REQUEUED row included).
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETING",
        "CONFIGURING",
        "STAGE_OUT",
        "SIGNALING",
        "STOPPED",
        "RESV_DEL_HOLD",
        "POWER_UP_NODE",
        "UPDATE_DB",
        "EXPEDITING",
        # Not printed by Slurm 22.05; accepted because the portal's design names it.
        "REQUEUING",
    }
)
FINISHED_STATES = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "SPECIAL_EXIT",
        "REVOKED",
        "RESIZING",
        "LAUNCH_FAILED",
        "RECONFIG_FAIL",
    }
)
KNOWN_STATES = ACTIVE_STATES | FINISHED_STATES

_NO_TIME = frozenset({"", "Unknown", "None"})
_NO_NODES = frozenset({"", "None assigned", "(null)"})
_NO_TIMELIMIT = frozenset({"", "UNLIMITED", "Partition_Limit"})
# Optional columns whose value is left out, with a warning, when it holds binary junk; the
# charge never reads them (AllocTRES it does, and Cluster picks the rows to import).
_JUNK_LEFT_OUT = frozenset(OPTIONAL_FIELDS) - {"AllocTRES", "Cluster"}
_EMPTY_MAPPING: Mapping[str, str] = MappingProxyType({})
# Bounds of the per-parse caches: they hold repeated values (times shared by a job and its
# steps, a few TRES strings), and are simply emptied when full so memory stays flat.
_CACHE_LIMIT = 4096
_T = TypeVar("_T")


class SacctHeaderError(ApplicationError):
    """The header line is missing or lacks required columns: the whole input is unusable."""

    def __init__(self, message: str, missing_fields: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.missing_fields = tuple(missing_fields)


@dataclass(frozen=True, slots=True)
class SacctRecord:
    """One job allocation or job step, as printed by sacct, with typed fields.

    Times are timezone-aware UTC. Memory is in MiB (Slurm's "MB"). ``alloc_tres`` and
    ``req_tres`` are read-only mappings of the raw ``name=value`` TRES strings. As in sacct,
    step rows have an empty ``user`` and ``partition`` and no ``qos``, ``req_tres`` or time
    limit: take those from the allocation. ``cpus``, ``memory_mb`` and ``gpus`` are 0 and
    ``billing`` is None when AllocTRES is empty (a job that never started).
    """

    line_number: int
    raw: str
    job_id: str
    job_id_raw: str
    kind: str
    step: str | None
    array_job_id: str | None
    array_task_id: str | None
    array_pending: bool
    het_job_id: str | None
    het_offset: int | None
    cluster: str | None
    user: str
    account: str
    partition: str
    qos: str | None
    job_name: str | None
    state: str
    state_raw: str
    cancelled_by_uid: int | None
    exit_code: str | None
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    elapsed_seconds: int
    nnodes: int
    ncpus: int | None
    nodelist: str
    nodes: tuple[str, ...]
    # Mappings are not hashable; leaving them out of the hash keeps records usable in sets.
    alloc_tres: Mapping[str, str] = field(hash=False)
    cpus: int
    memory_mb: Decimal
    gpus: int
    billing: Decimal | None
    req_tres: Mapping[str, str] = field(hash=False)
    req_mem_mb: Decimal | None
    consumed_energy_joules: int | None
    timelimit_minutes: int | None
    # What the job (or step) used; None when the dump has no usage columns.
    usage: JobUsage | None
    # A bad value in an optional column is left out and noted here; it never costs the job.
    warnings: tuple[str, ...] = ()

    @property
    def is_finished(self) -> bool:
        """True when this record has ended and will not change any more."""
        return self.end is not None and self.state not in ACTIVE_STATES

    @property
    def run_key(self) -> str:
        """Tell apart the runs of a requeued job, which share one JobIDRaw (the ledger keys on
        cluster + JobIDRaw + run key).

        A requeued incarnation (a ``REQUEUED`` line, with ``--duplicates``) is a run of its own,
        keyed by its start in ISO form; the current incarnation of a job has the empty key, so
        its line keeps one ledger row from submission to end.
        """
        if self.state == "REQUEUED" and self.start is not None:
            return self.start.isoformat()
        return ""


@dataclass(frozen=True, slots=True)
class SacctLineError:
    """A data line that could not be turned into a record, kept with its reason."""

    line_number: int
    raw: str
    reason: str
    field: str | None
    # The line's JobIDRaw when it could be read (the line had the header's shape), so a later
    # import that books the job can close this error; "" otherwise.
    job_id_raw: str = ""


class _FieldError(Exception):
    """Internal: a field that cannot be parsed; becomes a SacctLineError."""

    def __init__(self, field_name: str | None, reason: str) -> None:
        super().__init__(reason)
        self.field_name = field_name
        self.reason = reason


# --------------------------------------------------------------------------------------
# Public field parsers (they raise ValueError on bad input)


def _parse_count(text: str, what: str) -> int:
    if is_ascii_digits(text):
        return int(text)
    raise ValueError(f"{what} {text!r} is not a whole number")


def parse_elapsed(text: str) -> int:
    """Return the seconds in a Slurm duration, truncating any fraction of a second.

    Accepts what sacct prints (``[D-]HH:MM:SS``, ``MM:SS``, ``MM:SS.mmm``) and Slurm's
    other day forms ``D-HH`` and ``D-HH:MM``. Raises ValueError otherwise.
    """
    days_text, dash, clock = text.partition("-")
    if not dash:
        days_text, clock = "", text
    parts = clock.split(":")
    if dash:
        days = _parse_count(days_text, "days of elapsed time")
        # With a day part Slurm writes hours first: D-HH, D-HH:MM, D-HH:MM:SS.
        if len(parts) > 3:
            raise ValueError(f"elapsed time {text!r} has too many ':' parts")
        parts += ["0"] * (3 - len(parts))
    else:
        days = 0
        if len(parts) == 2:
            parts.insert(0, "0")
        elif len(parts) != 3:
            raise ValueError(f"elapsed time {text!r} is not [D-]HH:MM:SS or MM:SS")
    hours_text, minutes_text, seconds_text = parts
    # sacct adds milliseconds ("MM:SS.mmm") to short CPU times; whole seconds are kept.
    seconds_text, dot, fraction = seconds_text.partition(".")
    if dot and not is_ascii_digits(fraction):
        raise ValueError(f"elapsed time {text!r} has a bad fraction of a second")
    hours = _parse_count(hours_text, "hours of elapsed time")
    minutes = _parse_count(minutes_text, "minutes of elapsed time")
    seconds = _parse_count(seconds_text, "seconds of elapsed time")
    if minutes >= 60 or seconds >= 60 or (dash and hours >= 24):
        raise ValueError(f"elapsed time {text!r} is out of range")
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_tres(text: str) -> dict[str, str]:
    """Split a TRES string such as ``"billing=1,cpu=1,mem=1914M,node=1"`` into a dict.

    An empty string gives ``{}``. Values stay strings. Raises ValueError on an item without
    ``=``, an empty name or value, or a repeated name.
    """
    tres: dict[str, str] = {}
    if not text:
        return tres
    for item in text.split(","):
        name, equals, value = item.partition("=")
        if not equals or not name or not value:
            raise ValueError(f"TRES item {item!r} is not name=value")
        if name in tres:
            raise ValueError(f"TRES {name!r} appears twice")
        tres[name] = value
    return tres


def parse_sacct_time(text: str, tz: tzinfo) -> datetime | None:
    """Read a sacct time (naive, in the sacct process's zone ``tz``) as an aware UTC datetime.

    ``"Unknown"``, ``"None"`` and ``""`` give None. In a DST fold the first occurrence is
    used (``fold=0``). A time that carries its own UTC offset keeps it. Raises ValueError on
    anything else.
    """
    _check_time_zone(tz)
    return _utc_time(text, tz)


def _utc_time(text: str, tz: tzinfo) -> datetime | None:
    # parse_sacct_time without the time zone check, which the parser makes once per input.
    if text in _NO_TIME:
        return None
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            if tz is UTC:
                return moment.replace(tzinfo=UTC)
            moment = moment.replace(tzinfo=tz, fold=0)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"time {text!r} is not YYYY-MM-DDTHH:MM:SS") from exc


def _check_time_zone(tz: object) -> None:
    # A naive result would silently be read in the server's zone; pytz zones need
    # localize() and give local mean time offsets with replace().
    if not isinstance(tz, tzinfo) or hasattr(tz, "localize"):
        raise TypeError(f"tz must be a zoneinfo.ZoneInfo or datetime.timezone, not {tz!r}")


@functools.lru_cache(maxsize=4096)
def _expand_nodes(nodelist: str) -> tuple[str, ...]:
    # Cached: a cluster has few distinct node lists compared with the number of rows.
    try:
        return tuple(hostlist.expand_hostlist(nodelist))
    except hostlist.BadHostlist as exc:
        raise ValueError(f"node list {nodelist!r} is not a hostlist: {exc}") from exc


# --------------------------------------------------------------------------------------
# Line parsing


@dataclass(frozen=True, slots=True)
class _Resources:
    """What the charging code needs from one TRES string, cached per distinct string."""

    tres: Mapping[str, str]
    cpus: int
    memory_mb: Decimal
    gpus: int
    billing: Decimal | None


def _resources_from_tres(text: str) -> _Resources:
    return _resources_of(parse_tres(text))


def _resources_of(tres: Mapping[str, str]) -> _Resources:
    tres = dict(tres)
    cpus = _parse_count(tres["cpu"], "cpu count") if "cpu" in tres else 0
    memory_mb = parse_memory_mb(tres["mem"]) if "mem" in tres else Decimal(0)
    billing = parse_decimal(tres["billing"], "billing") if "billing" in tres else None
    if "gres/gpu" in tres:
        # The untyped total already counts every typed GPU.
        gpus = _parse_count(tres["gres/gpu"], "GPU count")
    else:
        # Only "gres/gpu:<type>"; "gres/gpumem" and "gres/gpuutil" are not GPU counts.
        gpus = sum(
            _parse_count(value, "GPU count")
            for name, value in tres.items()
            if name.startswith("gres/gpu:")
        )
    mapping = MappingProxyType(tres) if tres else _EMPTY_MAPPING
    return _Resources(mapping, cpus, memory_mb, gpus, billing)


_NO_RESOURCES = _Resources(_EMPTY_MAPPING, 0, Decimal(0), 0, None)


def size_held_or_requested(record: SacctRecord) -> tuple[int, int, Decimal, int] | None:
    """The nodes, CPUs, memory (MiB) and GPUs a job holds (AllocTRES) or, before it starts,
    asks for (ReqTRES, and NNodes or ReqTRES's node count): the size it holds SU at until it
    ends. None when sacct gives neither."""
    if record.cpus:
        return record.nnodes, record.cpus, record.memory_mb, record.gpus
    try:
        requested = _resources_of(record.req_tres)
        nodes = record.nnodes or _parse_count(record.req_tres.get("node", "1"), "node count")
    except ValueError:
        return None
    if not requested.cpus or nodes < 1:
        return None
    return nodes, requested.cpus, requested.memory_mb, requested.gpus


# Every column the parser reads, in the order _Layout.values() returns them.
_COLUMNS = (*REQUIRED_FIELDS, *ELAPSED_FIELDS, *OPTIONAL_FIELDS)
# Other names sacct has for a column the parser reads.
_ALIASES = {"alloccpus": "NCPUS"}
_NO_HEADER_HINT = (
    "the first line is a job, not a header: for a --noheader dump give the columns it was"
    " made with (import_sacct --columns JobID,JobIDRaw,...)"
)


def header_delimiter(header: str) -> str:
    """The delimiter of a header line: what follows its first column name (``|`` for
    ``--parsable2``; sacct's ``--delimiter`` allows any string, e.g. ``;|;`` or ``☃``)."""
    text = header.lstrip("\ufeff").strip()
    end = 0
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    start = end
    while end < len(text) and not (text[end].isalnum() or text[end] == "_"):
        end += 1
    delimiter = text[start:end].strip()
    return delimiter or "|"


class _Layout:
    """Column positions read from the header line."""

    def __init__(self, header: str, delimiter: str | None = None) -> None:
        self.delimiter = delimiter or header_delimiter(header)
        # A byte-order mark survives from files saved by some editors.
        names = [name.strip() for name in header.lstrip("\ufeff").split(self.delimiter)]
        # sacct prints canonical capitalisation; hand-written files may not.
        canonical = {name.lower(): name for name in _COLUMNS}
        lowered = {name.lower() for name in names}
        # An alias stands in only for a column the header lacks (AllocCPUS for NCPUS).
        canonical |= {
            alias: name for alias, name in _ALIASES.items() if name.lower() not in lowered
        }
        positions: dict[str, int] = {}
        duplicates = []
        for position, name in enumerate(names):
            known = canonical.get(name.lower())
            if known is None:
                continue
            if known in positions:
                duplicates.append(known)
            positions[known] = position
        missing = [name for name in REQUIRED_FIELDS if name not in positions]
        if not any(name in positions for name in ELAPSED_FIELDS):
            missing.append(" or ".join(ELAPSED_FIELDS))
        if missing and not positions and is_ascii_digits(names[0].partition("_")[0][:1]):
            raise SacctHeaderError(_NO_HEADER_HINT, missing)
        if missing:
            raise SacctHeaderError(
                f"sacct header lacks required columns: {', '.join(missing)}", missing
            )
        if duplicates:
            raise SacctHeaderError(f"sacct header repeats columns: {', '.join(duplicates)}")
        self.header = header
        self.field_count = len(names)
        self.positions = positions
        # One C-level call picks every needed value; an absent optional column points one
        # past the end, where the parser appends "" (absent and empty mean the same).
        self.values = itemgetter(*(positions.get(name, len(names)) for name in _COLUMNS))
        self.has_alloc_tres = "AllocTRES" in positions
        self.has_usage = any(name in positions for name in USAGE_FIELDS)
        # A step's usage columns (_LineParser.step) are split off the end of its line: the
        # last ``step_tail`` fields, from the first usage column on (in the portal's sacct
        # command they are the last columns, and the rest of a step line is never read).
        # ``step_values`` picks them from ``line.rsplit(delimiter, step_tail)``, whose item 0
        # is the rest of the line; an absent column points past the end, where "" is appended.
        usage_positions = [positions.get(name) for name in USAGE_FIELDS]
        first = min((at for at in usage_positions if at is not None), default=len(names))
        self.step_tail = len(names) - first
        self.step_values = itemgetter(
            *(self.step_tail + 1 if at is None else at - first + 1 for at in usage_positions)
        )


class _MutableRecord:
    """Same slots as SacctRecord, but plain attribute stores.

    A frozen dataclass sets each of its 38 fields through ``object.__setattr__``, which
    costs about 5 µs per record: half of the per-line budget for a million-line import.
    The parser fills this twin with ordinary stores and then retypes it as a SacctRecord
    (CPython allows ``__class__`` assignment between classes with identical slots), so the
    result is a genuine frozen SacctRecord. ``_check_record_twin`` keeps the two in step.
    """

    __slots__ = SacctRecord.__slots__

    def __init__(
        self,
        line_number: int,
        raw: str,
        job_id: str,
        job_id_raw: str,
        kind: str,
        step: str | None,
        array_job_id: str | None,
        array_task_id: str | None,
        array_pending: bool,
        het_job_id: str | None,
        het_offset: int | None,
        cluster: str | None,
        user: str,
        account: str,
        partition: str,
        qos: str | None,
        job_name: str | None,
        state: str,
        state_raw: str,
        cancelled_by_uid: int | None,
        exit_code: str | None,
        submit: datetime | None,
        start: datetime | None,
        end: datetime | None,
        elapsed_seconds: int,
        nnodes: int,
        ncpus: int | None,
        nodelist: str,
        nodes: tuple[str, ...],
        alloc_tres: Mapping[str, str],
        cpus: int,
        memory_mb: Decimal,
        gpus: int,
        billing: Decimal | None,
        req_tres: Mapping[str, str],
        req_mem_mb: Decimal | None,
        consumed_energy_joules: int | None,
        timelimit_minutes: int | None,
        usage: JobUsage | None,
        warnings: tuple[str, ...],
    ) -> None:
        self.line_number = line_number
        self.raw = raw
        self.job_id = job_id
        self.job_id_raw = job_id_raw
        self.kind = kind
        self.step = step
        self.array_job_id = array_job_id
        self.array_task_id = array_task_id
        self.array_pending = array_pending
        self.het_job_id = het_job_id
        self.het_offset = het_offset
        self.cluster = cluster
        self.user = user
        self.account = account
        self.partition = partition
        self.qos = qos
        self.job_name = job_name
        self.state = state
        self.state_raw = state_raw
        self.cancelled_by_uid = cancelled_by_uid
        self.exit_code = exit_code
        self.submit = submit
        self.start = start
        self.end = end
        self.elapsed_seconds = elapsed_seconds
        self.nnodes = nnodes
        self.ncpus = ncpus
        self.nodelist = nodelist
        self.nodes = nodes
        self.alloc_tres = alloc_tres
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.gpus = gpus
        self.billing = billing
        self.req_tres = req_tres
        self.req_mem_mb = req_mem_mb
        self.consumed_energy_joules = consumed_energy_joules
        self.timelimit_minutes = timelimit_minutes
        self.usage = usage
        self.warnings = warnings


def _check_record_twin() -> None:
    # Fails at import, not in production data, if a field is added to one class only.
    record_fields = tuple(item.name for item in fields(SacctRecord))
    init_arguments = _MutableRecord.__init__.__code__.co_varnames[1 : len(record_fields) + 1]
    if init_arguments != record_fields or SacctRecord.__slots__ != record_fields:
        raise RuntimeError("_MutableRecord is out of step with SacctRecord")


_check_record_twin()


class _LineParser:
    """Parse data lines for one layout, time zone and cluster, with small bounded caches."""

    def __init__(self, layout: _Layout, tz: tzinfo, cluster: str | None) -> None:
        self.layout = layout
        self.tz = tz
        self.cluster = cluster
        self.times: dict[str, datetime | None] = {}
        self.resources: dict[str, _Resources] = {}
        self.states: dict[str, tuple[str, int | None]] = {}
        self.exit_codes: set[str] = set()
        self.memories: dict[str, _ReqMem] = {}

    def parse(self, line_number: int, line: str) -> SacctRecord | SacctLineError:
        raw = line.rstrip("\r\n")
        if len(raw) > MAX_LINE_CHARS:
            reason = f"the line is longer than {MAX_LINE_CHARS:,} characters: not sacct output"
            return SacctLineError(line_number, raw[:_KEPT_OF_LONG_LINE] + "...", reason, None)
        try:
            if "\x00" in raw or not (raw.isascii() or _is_encodable(raw)):
                cleaned, notes = self._without_junk(raw)
                record = self._parse(line_number, cleaned)
                if isinstance(record, SacctRecord):
                    record = replace(record, raw=raw, warnings=(*record.warnings, *notes))
                return record
            return self._parse(line_number, raw)
        except _FieldError as exc:
            reason, field_name = exc.reason, exc.field_name
        except Exception as exc:
            # The contract is one object per line: a parser bug must not stop an import.
            reason, field_name = f"unexpected parser error: {exc!r}", None
        return SacctLineError(line_number, raw, _shorten(reason), field_name, self._job_id(raw))

    def step(self, line_number: int, line: str, job_id_raw: str) -> SacctStep:
        """A step line's usage, read from those columns alone (steps are most lines of a full
        dump), for the job ``job_id_raw`` (the step's JobIDRaw). A bad usage value loses that
        step's usage, not its job's line. The line has the header's number of fields."""
        layout = self.layout
        fields = line.rstrip("\r\n").rsplit(layout.delimiter, layout.step_tail)
        fields.append("")
        total_cpu, max_rss, usage_tot, usage_max, usage_ave, ntasks = layout.step_values(fields)
        try:
            usage = usage_from_columns(total_cpu, max_rss, usage_tot, usage_max, usage_ave, ntasks)
        except _FieldError:
            usage = None
        return SacctStep(line_number, "step", job_id_raw.partition(".")[0], usage)

    def _without_junk(self, raw: str) -> tuple[str, list[str]]:
        """A line holding a NUL byte or a lone surrogate (binary junk, or a JSON ``\\u0000``
        / ``\\ud800`` escape), which no PostgreSQL text column keeps: refused, naming the
        column, when a column the charge needs holds one (a value without it would not be
        what sacct wrote); in an optional column (JobName, QOS, ...) the value is left out
        with a warning, and in a column the portal does not read it is dropped."""
        fields = raw.split(self.layout.delimiter)
        names = {at: name for name, at in self.layout.positions.items()}
        notes = []
        for at, value in enumerate(fields):
            if "\x00" not in value and _is_encodable(value):
                continue
            name = names.get(at)
            what = "a NUL byte" if "\x00" in value else "a lone surrogate (not UTF-8)"
            if name is not None and name not in _JUNK_LEFT_OUT:
                raise _FieldError(name, f"{name} holds {what}: binary junk, not sacct output")
            if name is not None:
                notes.append(f"{name} held {what}: left out (optional column)")
            fields[at] = ""
        return self.layout.delimiter.join(fields), notes

    def _job_id(self, raw: str) -> str:
        # Read only from a line of the header's shape, and only a plausible id: a later import
        # that books this job closes the error by it.
        fields = raw.split(self.layout.delimiter)
        if len(fields) != self.layout.field_count:
            return ""
        job_id_raw = fields[self.layout.positions["JobIDRaw"]]
        base = job_id_raw.partition(".")[0]
        return job_id_raw if is_ascii_digits(base) and len(job_id_raw) <= 64 else ""

    def _parse(self, line_number: int, raw: str) -> SacctRecord | SacctLineError:
        layout = self.layout
        fields = raw.split(layout.delimiter)
        if len(fields) != layout.field_count or raw == layout.header:
            return self._misshapen(line_number, raw, len(fields))
        fields.append("")
        (
            job_id,
            job_id_raw,
            user,
            account,
            partition,
            state_raw,
            submit_text,
            start_text,
            end_text,
            nnodes_text,
            nodelist,
            elapsed_raw_text,
            elapsed_text,
            alloc_tres_text,
            alloc_gres_text,
            req_gres_text,
            cluster,
            job_name,
            qos,
            exit_code,
            ncpus_text,
            req_tres_text,
            req_mem_text,
            energy_text,
            timelimit_text,
            timelimit_formatted_text,
            total_cpu_text,
            max_rss_text,
            usage_tot_text,
            usage_max_text,
            usage_ave_text,
            ntasks_text,
        ) = layout.values(fields)

        # The common shapes ("123", "123.batch" with an identical JobIDRaw) skip the
        # general JobID analysis.
        base, dot, step_text = job_id.partition(".")
        if job_id == job_id_raw and base.isdigit() and base.isascii() and (step_text or not dot):
            kind, step = ("step", step_text) if dot else ("allocation", None)
            array_job_id = array_task_id = het_job_id = None
            array_pending, het_offset = False, None
        else:
            (kind, step, array_job_id, array_task_id, array_pending, het_job_id, het_offset) = (
                _split_job_id(job_id, job_id_raw)
            )

        if state_raw in self.states:
            state, cancelled_by_uid = self.states[state_raw]
        else:
            state, cancelled_by_uid = self._state(state_raw)

        warnings: list[str] = []
        if exit_code and exit_code not in self.exit_codes:
            exit_code = self._optional(self._check_exit_code, exit_code, warnings)

        times = self.times
        submit = times[submit_text] if submit_text in times else self._time(submit_text, "Submit")
        start = times[start_text] if start_text in times else self._time(start_text, "Start")
        end = times[end_text] if end_text in times else self._time(end_text, "End")

        if elapsed_raw_text.isdigit() and elapsed_raw_text.isascii():
            elapsed_seconds = int(elapsed_raw_text)
        else:
            elapsed_seconds = self._elapsed(elapsed_raw_text, elapsed_text)

        if nnodes_text.isdigit() and nnodes_text.isascii():
            nnodes = int(nnodes_text)
        else:
            nnodes = _node_count(nnodes_text)

        nodes: tuple[str, ...]
        if nodelist in _NO_NODES:
            nodelist, nodes = "", ()
        else:
            try:
                nodes = _expand_nodes(nodelist)
            except ValueError as exc:
                raise _FieldError("NodeList", str(exc)) from None

        resources = self.resources
        if layout.has_alloc_tres:
            alloc = resources.get(alloc_tres_text) or self._resources(alloc_tres_text, "AllocTRES")
        requested = (
            resources.get(req_tres_text)
            or self._optional(self._req_tres, req_tres_text, warnings)
            or _NO_RESOURCES
        )
        if ncpus_text.isdigit() and ncpus_text.isascii():
            ncpus: int | None = int(ncpus_text)
        else:
            ncpus = self._optional(_optional_count("NCPUS"), ncpus_text, warnings)
        if not layout.has_alloc_tres:
            alloc = self._resources_without_alloc_tres(
                ncpus=ncpus,
                nnodes=nnodes,
                req_mem=req_mem_text,
                requested=requested,
                gres=alloc_gres_text or req_gres_text,
                warnings=warnings,
            )
        memory_mb = alloc.memory_mb
        req_mem_mb: Decimal | None
        if req_mem_text:
            per_unit = self.memories.get(req_mem_text) or self._optional(
                self._req_mem, req_mem_text, warnings
            )
            req_mem_mb, memory_mb = _memory_totals(
                per_unit, alloc, ncpus=ncpus, nnodes=nnodes, warnings=warnings
            )
        else:
            # Without a ReqMem column, ReqTRES holds the same job total.
            req_mem_mb = requested.memory_mb if "mem" in requested.tres else None

        if not timelimit_text and timelimit_formatted_text not in _NO_TIMELIMIT:
            timelimit_minutes = self._optional(
                _formatted_timelimit, timelimit_formatted_text, warnings
            )
        elif timelimit_text in _NO_TIMELIMIT:
            timelimit_minutes = None
        else:
            timelimit_minutes = self._optional(
                _optional_count("TimelimitRaw"), timelimit_text, warnings
            )
        if energy_text.isdigit() and energy_text.isascii():
            energy: int | None = int(energy_text)
        else:
            energy = self._optional(_optional_count("ConsumedEnergyRaw"), energy_text, warnings)
        usage = None
        if layout.has_usage:
            usage = self._optional(
                _usage_reader(
                    max_rss_text, usage_tot_text, usage_max_text, usage_ave_text, ntasks_text
                ),
                total_cpu_text,
                warnings,
            )

        record = _MutableRecord(
            line_number,
            raw,
            job_id,
            job_id_raw,
            kind,
            step,
            array_job_id,
            array_task_id,
            array_pending,
            het_job_id,
            het_offset,
            cluster or self.cluster,
            user,
            account,
            partition,
            qos or None,
            job_name or None,
            state,
            state_raw,
            cancelled_by_uid,
            exit_code or None,
            submit,
            start,
            end,
            elapsed_seconds,
            nnodes,
            ncpus,
            nodelist,
            nodes,
            alloc.tres,
            alloc.cpus,
            memory_mb,
            alloc.gpus,
            alloc.billing,
            requested.tres,
            req_mem_mb,
            energy,
            timelimit_minutes,
            usage,
            tuple(warnings) if warnings else (),
        )
        record.__class__ = SacctRecord  # type: ignore[assignment]
        return record  # type: ignore[return-value]

    def _misshapen(self, line_number: int, raw: str, found: int) -> SacctLineError:
        if not raw.strip():
            reason = EMPTY_LINE_REASON
        elif raw == self.layout.header:
            reason = REPEATED_HEADER_REASON
        else:
            reason = (
                f"expected {self.layout.field_count} fields, found {found}"
                " (is there a '|' inside a value such as JobName?)"
            )
        return SacctLineError(line_number, raw, reason, None)

    def _time(self, text: str, name: str) -> datetime | None:
        try:
            moment = _utc_time(text, self.tz)
        except ValueError as exc:
            raise _FieldError(name, str(exc)) from None
        if len(self.times) >= _CACHE_LIMIT:
            self.times.clear()
        self.times[text] = moment
        return moment

    def _resources(self, text: str, name: str) -> _Resources:
        try:
            resources = _resources_from_tres(text)
        except ValueError as exc:
            raise _FieldError(name, str(exc)) from None
        if len(self.resources) >= _CACHE_LIMIT:
            self.resources.clear()
        self.resources[text] = resources
        return resources

    def _req_tres(self, text: str) -> _Resources | None:
        return self._resources(text, "ReqTRES")

    def _resources_without_alloc_tres(
        self,
        *,
        ncpus: int | None,
        nnodes: int,
        req_mem: str,
        requested: _Resources,
        gres: str,
        warnings: list[str],
    ) -> _Resources:
        """What a job held, for a dump without AllocTRES: NCPUS, the ReqMem total (Slurm
        allocates the memory asked for) and the GPUs asked for."""
        memory_mb = requested.memory_mb
        if req_mem:
            per_unit = self.memories.get(req_mem) or self._optional(self._req_mem, req_mem, [])
            if per_unit is not None:
                memory_mb = _memory_totals(
                    per_unit, _NO_RESOURCES, ncpus=ncpus, nnodes=nnodes, warnings=[]
                )[0] or Decimal(0)
        gpus = requested.gpus or _gres_gpus(gres)
        warnings.append("no AllocTRES column: charged from NCPUS, ReqMem and the GPUs requested")
        return _Resources(_EMPTY_MAPPING, ncpus or 0, memory_mb, gpus, None)

    def _req_mem(self, text: str) -> _ReqMem:
        # Slurm before 21.08 ends ReqMem with "n" (per node) or "c" (per CPU); 20.11 still
        # prints "0n". From 21.08 on it is the job's total.
        per = text[-1] if text[-1:] in ("n", "c") else ""
        number = text[:-1] if per else text
        # Some Slurm 16.05 builds printed a per-CPU request with Slurm's MEM_PER_CPU flag bit
        # still set in the number and an "n": 2147486648Mn is 3000 MB per CPU.
        digits = number.rstrip("KMGTP")
        if per == "n" and is_ascii_digits(digits):
            for flag in (2**63, 2**31):
                if int(digits) >= flag:
                    number, per = f"{int(digits) - flag}{number[len(digits) :]}", "c"
                    break
        try:
            memory_mb = parse_memory_mb(number)
        except ValueError as exc:
            raise _FieldError("ReqMem", str(exc)) from None
        if len(self.memories) >= _CACHE_LIMIT:
            self.memories.clear()
        self.memories[text] = req_mem = _ReqMem(memory_mb, per)
        return req_mem

    def _optional(
        self, parse: Callable[[str], _T | None], text: str, warnings: list[str]
    ) -> _T | None:
        """Parse an optional column's value; a bad one is left out with a warning."""
        try:
            return parse(text)
        except _FieldError as exc:
            reason = exc.reason
            if not reason.startswith(str(exc.field_name)):
                reason = f"{exc.field_name}: {reason}"
            warnings.append(_shorten(f"{reason} (optional column, ignored)"))
            return None

    def _state(self, text: str) -> tuple[str, int | None]:
        state, by, uid_text = text.partition(" by ")
        if state not in KNOWN_STATES:
            raise _FieldError("State", f"unknown job state {text!r}")
        uid = None
        if by:
            if not is_ascii_digits(uid_text):
                raise _FieldError("State", f"state {text!r} does not end with a numeric uid")
            uid = int(uid_text)
        if len(self.states) >= _CACHE_LIMIT:
            self.states.clear()
        self.states[text] = (state, uid)
        return state, uid

    def _check_exit_code(self, exit_code: str) -> str:
        status, colon, signal = exit_code.partition(":")
        if not (colon and is_ascii_digits(status) and is_ascii_digits(signal)):
            raise _FieldError("ExitCode", f"exit code {exit_code!r} is not status:signal")
        if len(self.exit_codes) >= _CACHE_LIMIT:
            self.exit_codes.clear()
        self.exit_codes.add(exit_code)
        return exit_code

    def _elapsed(self, elapsed_raw_text: str, elapsed_text: str) -> int:
        # ElapsedRaw wins; Elapsed is read only when ElapsedRaw is absent or empty.
        has_raw_column = "ElapsedRaw" in self.layout.positions
        if elapsed_raw_text or (has_raw_column and not elapsed_text):
            raise _FieldError(
                "ElapsedRaw", f"elapsed seconds {elapsed_raw_text!r} is not a whole number"
            )
        try:
            return parse_elapsed(elapsed_text)
        except ValueError as exc:
            raise _FieldError("Elapsed", str(exc)) from None


def _is_encodable(text: str) -> bool:
    """True unless ``text`` holds a lone surrogate, which no UTF-8 database column keeps."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shorten(reason: str) -> str:
    # Reasons quote the bad value; the whole line is kept in ``raw`` anyway.
    if len(reason) <= MAX_REASON_LENGTH:
        return reason
    return reason[: MAX_REASON_LENGTH - 3] + "..."


def parse_total_cpu(text: str) -> Decimal:
    """Seconds of a Slurm CPU time (``TotalCPU``: ``MM:SS.mmm``, ``HH:MM:SS``,
    ``D-HH:MM:SS``), milliseconds kept. Raises ValueError."""
    if len(text) == 9 and text[2] == ":" and text[5] == "." and text.isascii():
        # The common short form, MM:SS.mmm, read without the general parser.
        minutes, seconds, fraction = text[:2], text[3:5], text[6:]
        if minutes.isdigit() and seconds.isdigit() and fraction.isdigit() and seconds < "60":
            return Decimal(f"{int(minutes) * 60 + int(seconds)}.{fraction}")
    clock, dot, fraction = text.partition(".")
    if dot and not is_ascii_digits(fraction):
        raise ValueError(f"CPU time {text!r} has a bad fraction of a second")
    whole = parse_elapsed(clock)
    return Decimal(f"{whole}.{fraction}") if fraction else Decimal(whole)


def _usage_memory_mb(text: str) -> Decimal:
    """A memory amount of a TRESUsage field or MaxRSS: ``320628K`` (sacct's units), or a bare
    number of bytes (as Slurm stores TRES usage)."""
    if text[-1:] == "K" and is_ascii_digits(text[:-1]):
        return Decimal(int(text[:-1])) / 1024  # a step's usual peak, first: exact, no rounding
    if is_ascii_digits(text):
        return Decimal(int(text)) / (1024 * 1024)
    return parse_memory_mb(text)


def _tres_item(text: str, key: str) -> str:
    """The value of ``key`` in a TRES string (``cpu=00:00:08,...,mem=1263436K,...``), "" when
    it has none. Only the items the portal reads are looked for: steps are most of a dump."""
    if text.startswith(key):
        at = 0
    else:
        at = text.find("," + key)
        if at < 0:
            return ""
        at += 1
    value, _, _ = text[at + len(key) :].partition(",")
    return value


def _usage_reader(
    max_rss: str, usage_tot: str, usage_max: str, usage_ave: str, ntasks: str = ""
) -> Callable[[str], JobUsage | None]:
    """Read a line's usage columns, given its TotalCPU (for ``_LineParser._optional``)."""

    def read(total_cpu: str) -> JobUsage | None:
        return usage_from_columns(total_cpu, max_rss, usage_tot, usage_max, usage_ave, ntasks)

    return read


def usage_from_columns(
    total_cpu: str,
    max_rss: str,
    usage_tot: str,
    usage_max: str,
    usage_ave: str,
    ntasks: str = "",
) -> JobUsage | None:
    """What one sacct line says was used; None when it says nothing. The memory peak is the
    step's ``TRESUsageInTot`` mem (the sum over its tasks of each one's peak), else MaxRSS
    (one task's peak) times the step's ``NTasks`` where given, else MaxRSS alone; the usage
    says which (``memory_basis``). GPU utilisation is the step's mean (``TRESUsageInAve``
    gres/gpuutil, percent) and GPU memory its peak (``TRESUsageInMax`` gres/gpumem). Raises
    _FieldError naming a bad column."""
    if not (total_cpu or max_rss or usage_tot or usage_max or usage_ave):
        return None
    try:
        cpu_seconds = parse_total_cpu(total_cpu) if total_cpu else None
    except ValueError as exc:
        raise _FieldError("TotalCPU", str(exc)) from None
    memory_text, memory_column = _tres_item(usage_tot, "mem="), "TRESUsageInTot"
    basis: str | None = MEMORY_SUMMED
    if not memory_text:
        memory_text, memory_column = max_rss, "MaxRSS"
        basis = MEMORY_ONE_TASK
    try:
        memory = _usage_memory_mb(memory_text) if memory_text else None
    except ValueError as exc:
        raise _FieldError(memory_column, str(exc)) from None
    if memory is None:
        basis = None
    elif basis == MEMORY_ONE_TASK and is_ascii_digits(ntasks) and int(ntasks) > 0:
        memory, basis = memory * int(ntasks), MEMORY_TIMES_TASKS
    gpu_memory = gpu = None
    if usage_max and "gres/gpumem=" in usage_max:
        try:
            gpu_memory = _usage_memory_mb(_tres_item(usage_max, "gres/gpumem="))
        except ValueError as exc:
            raise _FieldError("TRESUsageInMax", str(exc)) from None
    if usage_ave and "gres/gpuutil=" in usage_ave:
        try:
            gpu = parse_decimal(_tres_item(usage_ave, "gres/gpuutil="), "GPU utilisation")
        except ValueError as exc:
            raise _FieldError("TRESUsageInAve", str(exc)) from None
    return JobUsage(cpu_seconds, memory, gpu, gpu_memory, basis)  # positional: one per step line


def _optional_count(name: str) -> Callable[[str], int | None]:
    def parse(text: str) -> int | None:
        return _whole_number(text, name) if text else None

    return parse


def _formatted_timelimit(text: str) -> int:
    """Minutes of a formatted ``Timelimit`` (``01:00:00``, ``6-23:59:00``, ``30:00``), a part
    minute counted whole; ``UNLIMITED`` and ``Partition_Limit`` are no limit (read by the
    caller)."""
    try:
        seconds = parse_elapsed(text)
    except ValueError as exc:
        raise _FieldError("Timelimit", str(exc)) from None
    return -(-seconds // 60)


def _gres_gpus(text: str) -> int:
    """The GPUs of a GRES string: ``gpu:2``, ``gpu:v100:2(IDX:0-1)``, ``gpu:2,mps:100``."""
    gpus = 0
    for item in text.split(","):
        name, _, rest = item.partition(":")
        if name != "gpu" or not rest:
            continue
        count = rest.split("(")[0].rpartition(":")[2]
        gpus += int(count) if is_ascii_digits(count) else 0
    return gpus


@dataclass(frozen=True, slots=True)
class _ReqMem:
    """A ReqMem value and what it is per: "" the job, "n" each node, "c" each CPU."""

    memory_mb: Decimal
    per: str


def _memory_totals(
    req_mem: _ReqMem | None,
    alloc: _Resources,
    *,
    ncpus: int | None,
    nnodes: int,
    warnings: list[str],
) -> tuple[Decimal | None, Decimal]:
    """The job's requested memory total, and its allocated memory, from ReqMem and AllocTRES.

    Per node means times NNodes, per CPU times NCPUS (or the allocated CPUs). Slurm before
    17.02 printed AllocTRES ``mem=`` as the per-CPU figure of a ``--mem-per-cpu`` job: a "c"
    ReqMem equal to ``mem=`` on a job of several CPUs is read that way, and said so.
    """
    if req_mem is None:
        return None, alloc.memory_mb
    memory_mb = alloc.memory_mb
    if req_mem.per == "n":
        return req_mem.memory_mb * nnodes, memory_mb
    if req_mem.per == "c":
        cpus = ncpus if ncpus else alloc.cpus
        if alloc.cpus > 1 and memory_mb == req_mem.memory_mb and memory_mb > 0:
            memory_mb = memory_mb * alloc.cpus
            warnings.append(
                "AllocTRES: mem= equals the per-CPU ReqMem, read as per CPU as Slurm before"
                f" 17.02 printed it: {memory_mb} MB in all"
            )
        return req_mem.memory_mb * cpus, memory_mb
    return req_mem.memory_mb, memory_mb


def _whole_number(text: str, name: str) -> int:
    if text.isdigit() and text.isascii():
        return int(text)
    raise _FieldError(name, f"{name} {text!r} is not a whole number")


def _node_count(text: str) -> int:
    # sacct prints NNodes through convert_num_unit, which writes an exact multiple of 1024
    # above 1024 with a unit: 2048 nodes is "2K".
    if text[:-1] and text[-1] in "KM" and is_ascii_digits(text[:-1]):
        return int(text[:-1]) * (1024 if text[-1] == "K" else 1024**2)
    raise _FieldError("NNodes", f"node count {text!r} is not a whole number")


def _split_job_id(
    job_id: str, job_id_raw: str
) -> tuple[str, str | None, str | None, str | None, bool, str | None, int | None]:
    """Return kind, step, array job/task ids, array_pending, het job id and het offset."""
    base, dot, step_text = job_id.partition(".")
    raw_base, raw_dot, raw_step = job_id_raw.partition(".")
    if not is_ascii_digits(raw_base):
        raise _FieldError("JobIDRaw", f"job id {job_id_raw!r} does not start with a number")
    if dot:
        if not step_text:
            raise _FieldError("JobID", f"job id {job_id!r} has an empty step")
        if raw_step != step_text:
            raise _FieldError(
                "JobIDRaw", f"JobIDRaw {job_id_raw!r} is not a row of the same step as {job_id!r}"
            )
        kind, step = "step", step_text
    else:
        if raw_dot:
            raise _FieldError(
                "JobIDRaw", f"JobIDRaw {job_id_raw!r} is a step but JobID {job_id!r} is not"
            )
        kind, step = "allocation", None

    array_job_id = array_task_id = het_job_id = None
    het_offset = None
    array_pending = False
    if is_ascii_digits(base):
        pass
    elif "_" in base:
        array_job_id, _, array_task_id = base.partition("_")
        # A pending array remainder is one row with the task range: "123_[5-9%1]".
        array_pending = array_task_id.startswith("[") and array_task_id.endswith("]")
        if not is_ascii_digits(array_job_id) or not (
            array_pending or is_ascii_digits(array_task_id)
        ):
            raise _FieldError("JobID", f"job id {job_id!r} is not <job>_<task>")
    elif "+" in base:
        het_job_id, _, offset_text = base.partition("+")
        if not is_ascii_digits(het_job_id) or not is_ascii_digits(offset_text):
            raise _FieldError("JobID", f"job id {job_id!r} is not <job>+<offset>")
        het_offset = int(offset_text)
    else:
        raise _FieldError("JobID", f"job id {job_id!r} is not a Slurm job id")
    return kind, step, array_job_id, array_task_id, array_pending, het_job_id, het_offset


# Reads the data lines of a dump for parse_sacct(steps=False): (parser, lines, header's line
# number) -> items; the default is _parse_lines_counting_steps.
LinesReader = Callable[["_LineParser", Iterator[str], int], Iterator[Any]]


@overload
def parse_sacct(
    lines: Iterable[str],
    *,
    tz: tzinfo = UTC,
    cluster: str | None = None,
    steps: Literal[True] = True,
    columns: str | None = None,
    delimiter: str | None = None,
    header: str | None = None,
    first_line_number: int = 1,
    reader: None = None,
) -> Iterator[SacctRecord | SacctLineError]: ...


@overload
def parse_sacct(
    lines: Iterable[str],
    *,
    tz: tzinfo = UTC,
    cluster: str | None = None,
    steps: Literal[False],
    columns: str | None = None,
    delimiter: str | None = None,
    header: str | None = None,
    first_line_number: int = 1,
    reader: LinesReader | None = None,
) -> Iterator[Any]: ...


def parse_sacct(
    lines: Iterable[str],
    *,
    tz: tzinfo = UTC,
    cluster: str | None = None,
    steps: bool = True,
    columns: str | None = None,
    delimiter: str | None = None,
    header: str | None = None,
    first_line_number: int = 1,
    reader: LinesReader | None = None,
) -> Iterator[Any]:
    """Parse ``sacct --parsable2`` output lazily, one line at a time.

    ``lines`` may be an open text file or any iterable of strings, one line per item
    (a trailing newline is stripped). ``tz`` is the time zone of the sacct process (a
    ``zoneinfo.ZoneInfo`` or ``datetime.timezone``); times come out in UTC. ``cluster`` is
    put on every record unless the input has a non-empty ``Cluster`` column.

    The header is read at once: the first non-blank line. :class:`SacctHeaderError` is raised
    by this call when there is none or it lacks required columns. Each later line then yields
    exactly one :class:`SacctRecord` or :class:`SacctLineError`; a bad line never raises.
    With ``steps=False`` a well-formed job-step line (a ``.`` in its JobIDRaw) yields a bare
    :class:`SacctStep` instead, for readers that only count steps: most lines of a full dump
    are steps, and this skips reading their fields.

    ``columns`` reads a ``--noheader`` dump: the column list given to sacct (``--format`` or
    Open XDMoD's documented list), comma- or ``|``-separated. Every line is then data and the
    first is line 1. ``delimiter`` is sacct's ``--delimiter`` (default: read from the header
    line, ``|`` with ``columns``).

    ``header`` reads lines that are a part of a dump whose header line it is (a range of a
    file, read by one of several processes): every line is data, and the first is line
    ``first_line_number`` of the file.

    ``reader`` (with ``steps=False``) reads the data lines in place of the line-by-line loop,
    given the parser, the lines and the header's line number: the columnar reader
    (``accounting.ledger.columnar.read_lines``) yields the same items and its own for lines
    it vouches for.
    """
    _check_time_zone(tz)
    iterator = iter(lines)
    if columns is not None and header is None:
        delimiter = delimiter or "|"
        header = columns_header(columns, delimiter)
    if header is not None:
        parser = _LineParser(_Layout(header, delimiter), tz, cluster)
        if not steps:
            read = reader or _parse_lines_counting_steps
            return read(parser, iterator, first_line_number - 1)
        return _parse_lines(parser, iterator, first_line_number - 1)
    for line_number, line in enumerate(iterator, start=1):
        header = line.rstrip("\r\n")
        if header.strip():
            parser = _LineParser(_Layout(header, delimiter), tz, cluster)
            if not steps:
                read = reader or _parse_lines_counting_steps
                return read(parser, iterator, line_number)
            return _parse_lines(parser, iterator, line_number)
    raise SacctHeaderError(
        f"empty input: no sacct header line (it needs {', '.join(REQUIRED_FIELDS)})",
        REQUIRED_FIELDS,
    )


def bounded_lines(stream: IO[str], limit: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of a text stream, each cut to ``limit`` + 1 characters (the rest of a longer
    line is read and dropped), so one endless line cannot fill memory."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith("\n"):
            rest = line
            while rest and not rest.endswith("\n"):
                rest = stream.readline(limit)
        yield line


def columns_header(columns: str, delimiter: str = "|") -> str:
    """The header line of a ``--noheader`` dump whose columns were given on the command line
    (``JobID,JobIDRaw,...`` or ``JobID|JobIDRaw|...``), joined with the dump's delimiter."""
    names = [name.strip() for name in columns.replace(",", "|").split("|")]
    if not all(names):
        raise SacctHeaderError(f"the column list {columns!r} has an empty name")
    return delimiter.join(names)


def _parse_lines(
    parser: _LineParser, lines: Iterator[str], header_line_number: int
) -> Iterator[SacctRecord | SacctLineError]:
    parse = parser.parse
    for line_number, line in enumerate(lines, start=header_line_number + 1):
        yield parse(line_number, line)


class SacctStep(NamedTuple):
    """A job-step line that was recognised but not read in full (``parse_sacct(steps=False)``):
    only, when the dump has usage columns, its job's JobIDRaw and what the step used. (A named
    tuple: one is made for every step line, most lines of a full dump.)"""

    line_number: int
    kind: str = "step"
    job_id_raw: str = ""  # the allocation's, without the step's suffix
    usage: JobUsage | None = None


def _parse_lines_counting_steps(
    parser: _LineParser, lines: Iterator[str], header_line_number: int
) -> Iterator[SacctRecord | SacctLineError | SacctStep]:
    for line_number, line in enumerate(lines, start=header_line_number + 1):
        yield line_item(parser, line_number, line)


def line_item(
    parser: _LineParser, line_number: int, line: str
) -> SacctRecord | SacctLineError | SacctStep:
    """What ``parse_sacct(steps=False)`` yields for one line: a bare step, or the line read."""
    layout = parser.layout
    position = layout.positions["JobIDRaw"]
    delimiter = layout.delimiter
    # Only a line with the header's shape is taken for a step; anything else is parsed
    # in full, so a broken step line still becomes a SacctLineError with its reason.
    # A line shorter than the JobIDRaw column (blank, truncated, junk) has no JobIDRaw to
    # look at: it is parsed in full and becomes a SacctLineError, never an IndexError.
    fields = line.split(delimiter, position + 1)
    if (
        len(fields) > position
        and "." in fields[position]
        and line.count(delimiter) == layout.field_count - 1
    ):
        if layout.has_usage:
            return parser.step(line_number, line, fields[position])
        return SacctStep(line_number)
    return parser.parse(line_number, line)

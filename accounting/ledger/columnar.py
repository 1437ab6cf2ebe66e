"""Columnar pricing of ``sacct --parsable2`` lines: per-row work in polars, Python rules once
per distinct value (docs/importing.md, "Columnar pricing").

Two halves, each exact against the per-line code it stands in for:

- :func:`read_lines` reads lines a chunk at a time. Polars splits the chunk into columns and
  checks, column by column, what the per-line parser would check (field count, job ids, times,
  whole numbers, limits); the columns whose values repeat (user, account, partition, state,
  node list, AllocTRES, ReqTRES, ReqMem, time limit, QOS, ExitCode) are parsed once per
  distinct value with the parser's own functions (``accounting.ledger.sacct``). A line that
  passes becomes a :class:`FastLine`; every other line (misshapen, a step, never ran, still
  running, requeued, an odd time, a DST gap, a warning, a usage value it warns about) is read
  by the parser, as before, and yields what it yields. A job line's usage columns are read with
  the parser's ``usage_from_columns``, per line. :func:`read_entries` does the same for the lines
  ``sacct --json``'s jobs convert to (``accounting.ledger.sacct_json``), between the steps and
  errors the JSON reader yields as they are.
- :class:`ShapePricer` turns a batch's fast lines into ledger rows: the import's lookups of
  project, partition, user and rate version (cached there), one
  :func:`~accounting.clusters.charging.charge_rate` per distinct (rate version, AllocTRES, node
  count), checked once against ``charge()``, and per row a half-even rounding of elapsed x
  rate in integers. A line whose account, partition, version or charge needs a decision
  (unknown, quarantined, beyond a column) gets None: the caller reads it with the per-line
  code.

What the fast path makes is exactly what ``pipeline._row_for`` makes of the same line
(``tests/accounting/test_columnar.py``).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import polars as pl

from accounting.clusters import charging
from accounting.clusters.efficiency import JobUsage
from accounting.ledger.limits import _bounds, account_check
from accounting.ledger.policy import booking_for
from accounting.ledger.sacct import (
    _NO_NODES,
    _NO_TIMELIMIT,
    ELAPSED_FIELDS,
    FINISHED_STATES,
    MAX_LINE_CHARS,
    REQUIRED_FIELDS,
    USAGE_FIELDS,
    SacctLineError,
    SacctRecord,
    SacctStep,
    _expand_nodes,
    _FieldError,
    _is_encodable,
    _LineParser,
    _Resources,
    usage_from_columns,
)
from accounting.ledger.sacct_json import PendingLine
from accounting.ledger.usage import USAGE_COLUMNS

logger = logging.getLogger(__name__)

# The most lines read into one polars frame (an import reads no further ahead than a batch).
CHUNK_LINES = 50_000
# Distinct-value caches are dropped past this size: memory stays bounded on hostile input.
_CACHE_LIMIT = 50_000
_TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$"
_UTC_SUFFIX = "+00:00"
_UTC_TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\+00:00$"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Years before this are left to the parser (Python's datetime starts at year 1).
_FIRST_SECOND = int((datetime(1000, 1, 1, tzinfo=UTC) - _EPOCH).total_seconds())
_DIGITS = r"^[0-9]{1,18}$"

# The columns whose reading the fast path knows; a dump with another column the parser reads
# (added to it later) goes line by line until the fast path learns it.
HANDLED_COLUMNS = frozenset(
    {
        *REQUIRED_FIELDS, *ELAPSED_FIELDS, *USAGE_FIELDS, "AllocTRES", "AllocGRES", "ReqGRES",
        "Cluster", "QOS", "ExitCode", "JobName", "NCPUS", "ReqTRES", "ReqMem",
        "ConsumedEnergyRaw", "TimelimitRaw",
    }
)  # fmt: skip
# The columns read once per distinct value.
STATIC_COLUMNS = (
    "User", "Account", "Partition", "State", "NodeList", "NNodes", "NCPUS", "AllocTRES",
    "ReqTRES", "ReqMem", "TimelimitRaw", "QOS", "ExitCode",
)  # fmt: skip


class Stages:
    """Seconds spent in each stage of an import (parse, price, write), logged at its end."""

    def __init__(self) -> None:
        self.seconds = {"parse": 0.0, "price": 0.0, "write": 0.0}
        self.fast = 0
        self.residue = 0

    def add(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[stage] += now - since
        return now

    def log(self, run_id: int) -> None:
        logger.info(
            "import run %s: parse %.2f s, price %.2f s, write %.2f s; %d lines priced by"
            " columns, %d by the per-line path",
            run_id, self.seconds["parse"], self.seconds["price"], self.seconds["write"],
            self.fast, self.residue,
        )  # fmt: skip


class _Chunk:
    """The lines of one chunk that the reader vouched for, as its polars table: a column is
    made a Python list when a line first reads it (a re-import reads four), and the chunk
    keeps the readings of its own repeating values (the reader's caches may be emptied
    meanwhile)."""

    __slots__ = (
        "allocs", "lists", "months", "nnodes", "parser", "states", "table", "timelimits",
    )  # fmt: skip

    def __init__(
        self, table: pl.DataFrame, parser: _LineParser, readings: dict[str, dict[str, Any]]
    ) -> None:
        self.table = table
        self.parser = parser
        self.lists: dict[str, list[Any]] = {}
        self.states = readings["State"]
        self.nnodes = readings["NNodes"]
        self.allocs = readings["AllocTRES"]
        self.timelimits = readings["TimelimitRaw"]
        self.months: set[date] | None = None

    def months_until(self, horizon: datetime) -> set[date]:
        """The UTC months its lines ended in (``ledger_storage.month_of``), of the ends at or
        before ``horizon`` (one horizon per import)."""
        if self.months is None:
            last = (horizon - _EPOCH) // timedelta(seconds=1)
            self.months = set(
                self.table.filter(pl.col("End") <= last)
                .select(pl.from_epoch("End", time_unit="s").dt.month_start().dt.date().unique())
                .to_series()
                .to_list()
            )
        return self.months

    def column(self, name: str) -> list[Any]:
        values = self.lists.get(name)
        if values is None:
            values = self.lists[name] = self.table.get_column(name).to_list()
        return values


def _text(column: str) -> property:
    def read(line: FastLine) -> Any:
        return line.chunk.column(column)[line.row]

    return property(read)


class FastLine:
    """A finished job's line that the columnar reader vouches for: the per-line parser would
    read it without error or warning. Stands in for a SacctRecord in a batch; its values are
    read from its chunk's columns when asked for."""

    __slots__ = ("chunk", "job_id_raw", "line_number", "raw", "row", "usage")

    # What the batch asks of a record: a finished job's only run, its cluster the dump's.
    run_key = ""
    is_finished = True

    def __init__(
        self,
        chunk: _Chunk,
        row: int,
        line_number: int,
        raw: str,
        job_id_raw: str,
        usage: JobUsage | None = None,
    ):
        self.chunk = chunk
        self.row = row
        self.line_number = line_number
        self.raw = raw
        self.job_id_raw = job_id_raw
        # What the line's own usage columns say (its steps' usage is the batch's).
        self.usage = usage

    job_id = _text("job_id")
    array_job_id = _text("array_job_id")
    array_task_id = _text("array_task_id")
    job_name = _text("job_name")
    # The times as Unix seconds, and as aware times.
    submit_s = _text("Submit")
    start_s = _text("Start")
    end_s = _text("End")
    # The repeating columns, each read once per distinct value by the reader.
    user = _text("s0")
    account = _text("s1")
    partition = _text("s2")
    state_raw = _text("s3")
    nodelist = _text("s4")
    qos = _text("s11")
    exit_code = _text("s12")

    @property
    def submit(self) -> datetime:
        return _EPOCH + timedelta(seconds=self.submit_s)

    @property
    def start(self) -> datetime:
        return _EPOCH + timedelta(seconds=self.start_s)

    @property
    def end(self) -> datetime:
        return _EPOCH + timedelta(seconds=self.end_s)

    @property
    def elapsed_seconds(self) -> int:
        return int(self.chunk.column("elapsed")[self.row])

    @property
    def consumed_energy_joules(self) -> int | None:
        energy = self.chunk.column("energy")[self.row]
        return int(energy) if energy else None

    @property
    def state(self) -> str:
        return self.chunk.states[self.state_raw]

    @property
    def nnodes(self) -> int:
        return self.chunk.nnodes[self.chunk.column("s5")[self.row]]

    @property
    def alloc(self) -> _Resources:
        return self.chunk.allocs[self.chunk.column("s7")[self.row]]

    @property
    def timelimit_minutes(self) -> int | None:
        return self.chunk.timelimits[self.chunk.column("s10")[self.row]]

    @property
    def parser(self) -> _LineParser:
        return self.chunk.parser

    @property
    def cluster(self) -> str | None:
        return self.chunk.parser.cluster

    def parsed(self) -> SacctRecord:
        """The line read by the per-line parser (for the lines the pricer leaves)."""
        record = self.parser.parse(self.line_number, self.raw)
        if not isinstance(record, SacctRecord):  # pragma: no cover - the reader vouched for it
            raise AssertionError(f"line {self.line_number}: {record}")
        return record


Item = SacctRecord | SacctLineError | SacctStep | FastLine


def read_lines(
    parser: _LineParser,
    lines: Iterator[str],
    header_line_number: int,
    *,
    step_item: Callable[[_LineParser, int, str], SacctRecord | SacctLineError | SacctStep],
    stages: Stages | None = None,
    chunk_lines: int = CHUNK_LINES,
) -> Iterator[Item]:
    """What ``parse_sacct(steps=False)`` yields, in line order, with a :class:`FastLine` for
    each line the columns vouch for. ``step_item`` is the parser's reading of one line."""
    reader = _ChunkReader(parser)
    numbered = enumerate(lines, start=header_line_number + 1)
    while True:
        chunk = list(itertools.islice(numbered, chunk_lines))
        if not chunk:
            return
        started = time.perf_counter()
        fast = reader.fast_lines(chunk) if reader.usable else {}
        items: list[Item] = []
        for line_number, line in chunk:
            item = fast.get(line_number)
            items.append(item if item is not None else step_item(parser, line_number, line))
        if stages is not None:
            stages.add("parse", started)
            stages.fast += len(fast)
            stages.residue += len(chunk) - len(fast)
        yield from items


def read_entries(
    parser: _LineParser,
    entries: Iterator[Any],
    *,
    stages: Stages | None = None,
    chunk_lines: int = CHUNK_LINES,
) -> Iterator[Item]:
    """What ``parse_sacct_json(steps=False)`` yields, in order, with a :class:`FastLine` for
    each converted line the columns vouch for; ``entries`` are the JSON reader's (a
    ``PendingLine`` for each line to read, steps and errors as they are)."""
    reader = _ChunkReader(parser)
    parse = parser.parse
    while True:
        chunk = list(itertools.islice(entries, chunk_lines))
        if not chunk:
            return
        started = time.perf_counter()
        lines = [(entry.line_number, entry.text) for entry in chunk if type(entry) is PendingLine]
        fast = reader.fast_lines(lines) if reader.usable and lines else {}
        items: list[Item] = []
        for entry in chunk:
            if type(entry) is PendingLine:
                item = fast.get(entry.line_number)
                items.append(item if item is not None else parse(entry.line_number, entry.text))
            else:
                items.append(entry)
        if stages is not None:
            stages.add("parse", started)
            stages.fast += len(fast)
            stages.residue += len(lines) - len(fast)
        yield from items


def _zone_name(tz: tzinfo) -> str | None:
    if tz is UTC:
        return "UTC"
    if isinstance(tz, ZoneInfo):
        return tz.key
    return None  # another tzinfo: every line goes to the parser


class _ChunkReader:
    """Columns of one chunk and the checks of the per-line parser, column by column."""

    def __init__(self, parser: _LineParser) -> None:
        self.parser = parser
        layout = parser.layout
        self.zone = _zone_name(parser.tz)
        positions = layout.positions
        # Dumps the fast path does not read (no ElapsedRaw, no AllocTRES) go line by line.
        self.usable = (
            set(positions) <= HANDLED_COLUMNS
            and self.zone is not None
            and "ElapsedRaw" in positions
            and layout.has_alloc_tres
            and parser.cluster is not None
        )
        # Per repeating column: each distinct value's reading (or _REFUSED).
        self.values: dict[str, dict[str, Any]] = {}

    def fast_lines(self, chunk: list[tuple[int, str]]) -> dict[int, FastLine]:
        parser, layout = self.parser, self.parser.layout
        positions, delimiter, count = layout.positions, layout.delimiter, layout.field_count
        # A lone surrogate (a JSON "\ud800") is no text polars holds: the parser reads it.
        chunk = [(number, line) for number, line in chunk if line.isascii() or _is_encodable(line)]
        frame = pl.DataFrame(
            {
                "line_number": [number for number, _ in chunk],
                "raw": [line.rstrip("\r\n") for _, line in chunk],
            },
            schema={"line_number": pl.Int64, "raw": pl.String},
        )
        raw = pl.col("raw")
        frame = frame.filter(
            (raw.str.count_matches(delimiter, literal=True) == count - 1)
            & (raw.str.len_chars() <= MAX_LINE_CHARS)
            & (raw != layout.header)
            & ~raw.str.contains("\x00", literal=True)
        )
        if frame.is_empty():
            return {}
        fields = frame.select(
            "line_number",
            "raw",
            raw.str.split_exact(delimiter, count - 1).struct.unnest(),
        )
        names = fields.columns[2:]

        def column(name: str) -> pl.Expr:
            at = positions.get(name)
            return pl.col(names[at]) if at is not None else pl.lit("", dtype=pl.String)

        job_id, job_id_raw = column("JobID"), column("JobIDRaw")
        array = job_id.str.extract_groups(r"^([0-9]+)_([0-9]+)$")
        bound = _text_bound
        checks = [
            job_id_raw.str.contains(_DIGITS),
            (job_id == job_id_raw) | array.struct.field("1").is_not_null(),
            job_id.str.len_chars() <= bound("job_id"),
            column("JobName").str.len_chars() <= bound("job_name"),
            column("ElapsedRaw").str.contains(_DIGITS),
            column("NNodes").str.contains(r"^[1-9][0-9]{0,8}$"),
            ~column("NodeList").is_in(list(_NO_NODES)),
            column("ConsumedEnergyRaw").str.contains(r"^([0-9]{0,18})$"),
            (column("Cluster") == "") | (column("Cluster") == parser.cluster),
        ]
        moments = []
        for name in ("Submit", "Start", "End"):
            text = column(name)
            # Local time as sacct prints it, or UTC with its offset (the lines sacct --json's
            # jobs convert to).
            in_utc = text.str.ends_with(_UTC_SUFFIX)
            checks.append(text.str.contains(_TIME_PATTERN) | text.str.contains(_UTC_TIME_PATTERN))
            naive = text.str.slice(0, 19).str.strptime(
                pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False
            )
            local = (
                naive.dt.replace_time_zone(self.zone, ambiguous="earliest", non_existent="null")
                .dt.convert_time_zone("UTC")
                .dt.epoch("s")
            )
            moment = pl.when(in_utc).then(naive.dt.replace_time_zone("UTC").dt.epoch("s"))
            moments.append(moment.otherwise(local).alias(name))
        table = fields.select(
            "line_number",
            "raw",
            job_id.alias("job_id"),
            job_id_raw.alias("job_id_raw"),
            array.struct.field("1").alias("array_job_id"),
            array.struct.field("2").alias("array_task_id"),
            column("JobName").alias("job_name"),
            *moments,
            column("ElapsedRaw").alias("elapsed"),
            column("ConsumedEnergyRaw").alias("energy"),
            *(column(name).alias(f"s{index}") for index, name in enumerate(STATIC_COLUMNS)),
            *(column(name).alias(f"u{index}") for index, name in enumerate(USAGE_FIELDS)),
            pl.all_horizontal(checks).alias("ok"),
        ).filter(
            pl.col("ok")
            & pl.col("Submit").is_not_null()
            & pl.col("Start").is_not_null()
            & pl.col("End").is_not_null()
            & (pl.min_horizontal("Submit", "Start", "End") >= _FIRST_SECOND)
            & (pl.col("Start") <= pl.col("End"))
        )
        if table.is_empty():
            return {}
        # Each repeating column: its distinct values read once, the lines with a value the
        # parser would refuse or warn about left to it.
        readings: list[dict[str, Any]] = []
        keep = []
        for index, name in enumerate(STATIC_COLUMNS):
            read = _READERS[name]
            cache = self.values.setdefault(name, {})
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            for value in table[f"s{index}"].unique().to_list():
                if value not in cache:
                    cache[value] = read(parser, value)
            good = [value for value, reading in cache.items() if reading is not _REFUSED]
            keep.append(pl.col(f"s{index}").is_in(good))
            readings.append(cache)
        table = table.filter(pl.all_horizontal(keep))
        usages: dict[int, JobUsage] = {}
        if layout.has_usage:
            table, usages = _usages_read(table)
        if table.is_empty():
            return {}
        # The chunk keeps the readings of its own values of the columns its lines read.
        wanted = {}
        for name in ("State", "NNodes", "AllocTRES", "TimelimitRaw"):
            index = STATIC_COLUMNS.index(name)
            cache = readings[index]
            wanted[name] = {
                value: cache[value] for value in table.get_column(f"s{index}").unique().to_list()
            }
        vouched = _Chunk(table, parser, wanted)
        columns = [
            table.get_column(name).to_list() for name in ("line_number", "raw", "job_id_raw")
        ]
        return {
            number: FastLine(vouched, row, number, line, job_id_raw, usages.get(number))
            for row, (number, line, job_id_raw) in enumerate(zip(*columns, strict=True))
        }


def _usages_read(table: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, JobUsage]]:
    """What the chunk's job lines say they used (TotalCPU, MaxRSS, TRESUsage*, NTasks), by
    line number, read with the parser's own ``usage_from_columns``; a line whose usage the
    parser would warn about is dropped from ``table``, left to the parser."""
    names = [f"u{index}" for index in range(len(USAGE_FIELDS))]
    # NTasks alone says nothing was used (``usage_from_columns`` answers None).
    said = [name for name, field in zip(names, USAGE_FIELDS, strict=True) if field != "NTasks"]
    measured = table.filter(pl.any_horizontal(pl.col(name) != "" for name in said))
    usages: dict[int, JobUsage] = {}
    refused: list[int] = []
    for number, *texts in measured.select("line_number", *names).iter_rows():
        try:
            usage = usage_from_columns(*texts)
        except Exception:  # a warning, or worse: the parser decides what it means
            refused.append(number)
            continue
        if usage is not None:
            usages[number] = usage
    if refused:
        table = table.filter(~pl.col("line_number").is_in(refused))
    return table, usages


_REFUSED: Any = object()  # a value the parser would refuse or warn about


def _reading(read: Callable[[_LineParser, str], Any]) -> Callable[[_LineParser, str], Any]:
    """A column reader whose parser errors mean "leave the line to the parser"."""

    def guarded(parser: _LineParser, text: str) -> Any:
        try:
            return read(parser, text)
        except (_FieldError, ValueError):
            return _REFUSED

    return guarded


def _fits_text(name: str) -> Callable[[_LineParser, str], Any]:
    return lambda _parser, text: text if len(text) <= _text_bound(name) else _REFUSED


def _read_state(parser: _LineParser, text: str) -> Any:
    state, _ = parser.states.get(text) or parser._state(text)
    # A requeued run has a run key of its own; a job not finished books no charge.
    if state not in FINISHED_STATES or state == "REQUEUED":
        return _REFUSED
    if len(state) > _text_bound("state") or len(text) > _text_bound("state_raw"):
        return _REFUSED
    return state


def _read_nodes(_parser: _LineParser, text: str) -> Any:
    return text if text not in _NO_NODES and _expand_nodes(text) else _REFUSED


def _read_count(_parser: _LineParser, text: str) -> Any:
    return int(text) if text.isdigit() and text.isascii() and len(text) <= 9 else _REFUSED


def _read_ncpus(_parser: _LineParser, text: str) -> Any:
    return text if not text or (text.isdigit() and text.isascii() and len(text) <= 18) else _REFUSED


def _read_alloc(parser: _LineParser, text: str) -> Any:
    alloc = parser.resources.get(text) or parser._resources(text, "AllocTRES")
    sizes = (("cpus", alloc.cpus), ("memory_mb", alloc.memory_mb), ("gpus", alloc.gpus),
             ("billing", alloc.billing))  # fmt: skip
    return alloc if all(_fits(name, value) for name, value in sizes) else _REFUSED


def _read_req_tres(parser: _LineParser, text: str) -> Any:
    if text:
        parser.resources.get(text) or parser._resources(text, "ReqTRES")
    return text


def _read_req_mem(parser: _LineParser, text: str) -> Any:
    if text:
        per_unit = parser.memories.get(text) or parser._req_mem(text)
        # Per CPU (before 21.08) may mean AllocTRES mem= is per CPU too: the parser decides.
        if per_unit.per == "c":
            return _REFUSED
    return text


def _read_timelimit(_parser: _LineParser, text: str) -> Any:
    if text in _NO_TIMELIMIT:
        return None
    if text.isdigit() and text.isascii() and len(text) <= 18:
        return int(text)
    return _REFUSED


def _read_exit_code(parser: _LineParser, text: str) -> Any:
    if text and text not in parser.exit_codes:
        parser._check_exit_code(text)
    return text if len(text) <= _text_bound("exit_code") else _REFUSED


_READERS: dict[str, Callable[[_LineParser, str], Any]] = {
    "User": _fits_text("username"),
    "Account": lambda _parser, text: text,
    "Partition": lambda _parser, text: text,
    "State": _reading(_read_state),
    "NodeList": _reading(_read_nodes),
    "NNodes": _read_count,
    "NCPUS": _read_ncpus,
    "AllocTRES": _reading(_read_alloc),
    "ReqTRES": _reading(_read_req_tres),
    "ReqMem": _reading(_read_req_mem),
    "TimelimitRaw": _read_timelimit,
    "QOS": _fits_text("qos"),
    "ExitCode": _reading(_read_exit_code),
}


def _text_bound(name: str) -> int:
    kind, bound = _bounds(name)
    assert kind == "text"
    return int(bound)


def _fits(name: str, value: int | Decimal | None) -> bool:
    if value is None:
        return True
    kind, bound = _bounds(name)
    if kind == "int":
        low, high = bound
        return (low is None or value >= low) and (high is None or value <= high)
    return bool(-bound < value < bound)


class Lookups(Protocol):
    """What the pricer asks of the import's lookups (``pipeline._Lookups``)."""

    cluster: Any
    pricer: Any
    horizon: datetime

    def project(self, account: str) -> Any: ...
    def partition(self, name: str) -> Any: ...
    def version(self, partition: Any, at: datetime) -> Any: ...
    def versions_of(self, partition: Any) -> list[Any]: ...
    def user_id(self, username: str) -> int | None: ...


_ROUND_BOUNDS: dict[str, int] = {}


def _quanta_bound(name: str) -> int:
    """A column's bound in millionths (the ledger's SU and Wh places)."""
    if name not in _ROUND_BOUNDS:
        _ROUND_BOUNDS[name] = int(_bounds(name)[1]) * 10**6
    return _ROUND_BOUNDS[name]


class ShapePricer:
    """Rows of fast lines, priced per distinct shape; one per import. Projects it looked up
    inside a batch that rolled back are dropped with :meth:`forget` (one it created is gone)."""

    def __init__(
        self,
        lookups: Lookups,
        *,
        time_problem: Callable[[Any], object | None],
        stages: Stages | None = None,
    ) -> None:
        self.lookups = lookups
        self.time_problem = time_problem
        self.stages = stages
        self.projects: dict[str, Any] = {}
        self.rates: dict[tuple[Any, ...], charging.ChargeRate | None] = {}

    def forget(self) -> None:
        """Drop what was read inside a batch that rolled back."""
        self.projects.clear()

    def rows(self, lines: Iterable[FastLine]) -> dict[tuple[str, str], dict[str, Any] | None]:
        """The ledger row of each fast line, keyed as the batch keys it, or None for a line
        the per-line code must read (unknown account or partition, a time it refuses, no rate
        version, a charge the engine refuses or the ledger cannot hold, a cost model)."""
        started = time.perf_counter()
        lookups = self.lookups
        refund = lookups.cluster.refund_node_failures
        su_bound, wh_bound = _quanta_bound("service_units"), _quanta_bound("energy_wh")
        time_problem, projects = self.time_problem, self.projects
        rows: dict[tuple[str, str], dict[str, Any] | None] = {}
        for line in lines:
            key = (line.job_id_raw, "")
            rows[key] = None
            if lookups.pricer is not None:
                continue
            # The per-line order: the project first (it may be created), then the partition.
            project = projects.get(line.account)
            if project is None:
                if account_check(line.account) is not None:
                    continue  # the per-line code quarantines it, creating no project
                project = projects[line.account] = lookups.project(line.account)
            if project is None:
                continue
            partition = lookups.partition(line.partition)
            if partition is None or time_problem(line):
                continue
            version = lookups.version(partition, line.start)
            if version is None:
                continue
            alloc = line.alloc
            rate = self._rate(version, line.nnodes, alloc)
            if rate is None:
                continue
            elapsed = line.elapsed_seconds
            su_quanta = _half_even(elapsed, rate.service_units_per_second)
            wh_quanta = _half_even(elapsed, rate.energy_wh_per_second)
            if su_quanta >= su_bound or wh_quanta >= wh_bound:
                continue
            booking = booking_for(
                finished=True,
                state=line.state,
                service_units=Decimal(su_quanta).scaleb(-6),
                refund_node_failures=refund,
            )
            rows[key] = {
                "job_id": line.job_id,
                "job_name": line.job_name,
                "array_job_id": line.array_job_id or "",
                "array_task_id": line.array_task_id or "",
                "het_job_id": "",
                "het_offset": None,
                "project_id": project.pk,
                "username": line.user,
                "user_id": lookups.user_id(line.user),
                "partition_id": partition.pk,
                "partition_version_id": version.pk,
                "qos": line.qos,
                "state": line.state,
                "state_raw": line.state_raw,
                "exit_code": line.exit_code,
                "submit": line.submit,
                "start": line.start,
                "end": line.end,
                "elapsed_seconds": elapsed,
                "timelimit_minutes": line.timelimit_minutes,
                "nnodes": line.nnodes,
                "cpus": alloc.cpus,
                "memory_mb": alloc.memory_mb,
                "gpus": alloc.gpus,
                "nodelist": line.nodelist,
                "billing": alloc.billing,
                "consumed_energy_joules": line.consumed_energy_joules,
                "charge_state": booking.outcome,
                "service_units": booking.service_units,
                "pending_service_units": booking.pending_service_units,
                "reserved_service_units": None,
                "weight": version.weight,
                "dominant_resource": rate.dominant_resource,
                "warnings": [],
                "energy_wh": Decimal(wh_quanta).scaleb(-6),
                "cost": None,
                "cost_model_version_id": None,
                **_NO_USAGE,
                "right_sized_service_units": None,
            }
        if self.stages is not None:
            self.stages.add("price", started)
        return rows

    def _rate(self, version: Any, nodes: int, alloc: _Resources) -> charging.ChargeRate | None:
        """The shape's rate, once per (rate version, AllocTRES, nodes)."""
        key = (version.pk, nodes, alloc.cpus, alloc.memory_mb, alloc.gpus)
        if key in self.rates:
            return self.rates[key]
        if len(self.rates) >= _CACHE_LIMIT:
            self.rates.clear()
        priced: charging.ChargeRate | None
        try:
            usage = charging.split_evenly(
                nodes=nodes, cores=alloc.cpus, memory_mb=alloc.memory_mb, gpus=alloc.gpus
            )
            rate = charging.charge_rate(version.spec, usage)
        except (charging.ChargeError, charging.SpecError):
            priced = None
        else:
            # Checked once per shape against the engine itself.
            check = charging.charge(version.spec, usage, elapsed_seconds=_CHECK_SECONDS)
            if rate.at(_CHECK_SECONDS) != (check.service_units, check.energy_wh):
                raise AssertionError(f"charge_rate disagrees with charge() for shape {key}")
            priced = rate
        self.rates[key] = priced
        return priced


_NO_USAGE = dict.fromkeys(USAGE_COLUMNS)
_CHECK_SECONDS = 86_399  # a day but a second: odd, so a rounding slip would show


def _half_even(elapsed_seconds: int, rate: tuple[int, int]) -> int:
    """elapsed x rate in millionths, rounded half-even (the engine's rounding), in integers."""
    numerator, denominator = rate
    quanta, remainder = divmod(elapsed_seconds * numerator * 10**6, denominator)
    twice = remainder + remainder
    if twice > denominator or (twice == denominator and quanta & 1):
        quanta += 1
    return quanta

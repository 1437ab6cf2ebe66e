"""Streaming reader for ``sacct --json`` output (Slurm's openapi/data_parser job dumps).

Pure module: no Django. :func:`parse_sacct_json` turns every job object of the ``jobs`` array
into the ``--parsable2`` lines sacct would have printed for it with :data:`JSON_COLUMNS` (one
line for the allocation, then one per step) and hands those lines to the text parser's own
line parser, so a record read from JSON is typed by exactly the code that types a record read
from text. Jobs are read one at a time (the standard library's C decoder over a buffer refilled
by chunks): memory does not grow with the file.

Formats: ``dbv0.0.37`` (Slurm 21.08), ``dbv0.0.38`` (22.05) and the data_parser versions
``v0.0.39`` (23.02) to ``v0.0.43`` (25.05). Values are read by shape rather than by a version
switch: a number may be a plain integer or ``{"set", "infinite", "number"}``, a state a string
or a list of flags, a step id an int, a name, an object or a ``"<job>.<step>"`` string.

Decisions an importer relies on:

* **Line numbers** are those of the synthesized text: the header (:data:`JSON_HEADER`) is
  line 1, and a record's ``raw`` is its synthesized line. A job object that cannot be
  converted yields one :class:`SacctLineError` and uses one line number.
* **Bad job objects** (not an object, a missing key, a value of the wrong type) yield a
  :class:`SacctLineError` whose reason names the job's position and the JSON field
  (``"JSON job #12: time.start is not a number"``) and whose ``raw`` is the object's
  compact JSON, cut to :data:`MAX_RAW_LENGTH`. The stream goes on.
* **Broken JSON syntax** after the ``jobs`` array has begun yields one SacctLineError
  (:data:`INVALID_JSON_REASON`) and ends the stream: nothing after a syntax error can be
  trusted. An input without a top-level ``jobs`` array, or that is not JSON before it, raises
  :class:`SacctHeaderError` when :func:`parse_sacct_json` is called.
* **``|`` inside a value** (a JobName, say) is replaced by ``¦`` (U+00A6): the line keeps its
  field count and the name still reads as the user wrote it.
* **Times** are written as ISO 8601 UTC with an explicit ``+00:00``; 0, unset and infinite
  are ``Unknown``. ``tz`` is therefore only checked, never used.
* **Who cancelled.** sacct prints ``CANCELLED by <uid>``, the JSON only a user name
  (``kill_request_user``). ``user_ids`` maps names to uids (``root`` is always 0); a name it
  does not know gives a plain ``CANCELLED`` and ``cancelled_by_uid`` None.
* **Memory** is written the way sacct writes it (``1914M``, ``239.25G``), except that a value
  is never rounded: where sacct would print an inexact ``1.00T`` for 1049088 MB, this writes
  ``1024.50G``, so the typed value always equals the JSON's count.

* **Unset numbers.** Slurm's NO_VAL and INFINITE (4294967294, 4294967295 and their 64-bit
  forms, :data:`UNSET_NUMBERS`) are unknown wherever a time or number holds them, bare or as
  ``{"set", "infinite", "number"}``: 24.11 writes ``"start": 4294967294`` for a job that never
  started; -2 and -1 are the 64-bit ones written signed (24.11's ``energy`` TRES count of -2).
* **dbv0.0.37** (Slurm 21.08, told by ``meta.plugin.type``, which Slurm writes before
  ``jobs``) writes the eligible time as
  ``time.start``: a finished job's start is taken as ``time.end - time.elapsed`` there.

Known losses, from Slurm itself: dbv0.0.37 to v0.0.39 write every normal exit as
``{"status": "SUCCESS", "return_code": 0}``, so a job that exited 1 reads as ``0:0`` (v0.0.40
fixed it); a dbv0.0.37 job still running shows its eligible time as its start.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from typing import IO, Any, Literal, NamedTuple, overload

from accounting.clusters.efficiency import MEMORY_SUMMED, JobUsage
from accounting.ledger.sacct import (
    SacctHeaderError,
    SacctLineError,
    SacctRecord,
    SacctStep,
    _check_time_zone,
    _Layout,
    _LineParser,
    _shorten,
)

__all__ = [
    "INVALID_JSON_REASON",
    "JSON_COLUMNS",
    "JSON_HEADER",
    "MAX_RAW_LENGTH",
    "EntriesReader",
    "PendingLine",
    "detect_format",
    "job_lines",
    "parse_sacct_json",
]

JSON_COLUMNS = (
    "Cluster",
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "ElapsedRaw",
    "NNodes",
    "NCPUS",
    "NodeList",
    "ReqTRES",
    "AllocTRES",
    "ReqMem",
    "ConsumedEnergyRaw",
    "TimelimitRaw",
)
JSON_HEADER = "|".join(JSON_COLUMNS)

INVALID_JSON_REASON = "invalid JSON: the rest of the input is not read"
# A bad job's raw JSON is cut to this many characters.
MAX_RAW_LENGTH = 2000

_UNKNOWN_TIME = "Unknown"
_SEPARATOR_STAND_IN = "\u00a6"
# job_state_string() prints the first of these flags that is set, else the base state.
_STATE_FLAG_ORDER = (
    "COMPLETING",
    "STAGE_OUT",
    "CONFIGURING",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "SPECIAL_EXIT",
    "STOPPED",
    "REVOKED",
    "RESV_DEL_HOLD",
    "SIGNALING",
)
_BASE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)
_MEMORY_UNITS = "\0KMGTP"
# Bound of the time-text cache (times repeat between a job and its steps); emptied when full.
_CACHE_LIMIT = 4096
_MEGA = 2


class _JobError(Exception):
    """Internal: a job object that cannot be converted; becomes a SacctLineError."""


def detect_format(first_chunk: bytes | str) -> Literal["json", "parsable"]:
    """Tell ``sacct --json`` from ``--parsable2`` output by its first bytes.

    JSON when the first non-whitespace character, after an optional UTF-8 byte-order mark,
    is ``{``: a parsable2 header starts with a column name.
    """
    if isinstance(first_chunk, bytes):
        text = first_chunk.removeprefix(b"\xef\xbb\xbf").lstrip()
        return "json" if text[:1] == b"{" else "parsable"
    return "json" if first_chunk.lstrip("\ufeff").lstrip()[:1] == "{" else "parsable"


# --------------------------------------------------------------------------------------
# Reading JSON values of every data_parser version


# Slurm's NO_VAL, INFINITE, NO_VAL64 and INFINITE64: "not set" and "no limit" written as
# numbers. 24.11 writes a job that never started as "start": 4294967294; read as a time it
# would be 2106, read as a count four billion.
UNSET_NUMBERS = frozenset({2**32 - 2, 2**32 - 1, 2**64 - 2, 2**64 - 1})
# The 64-bit ones written as signed numbers (24.11's "energy" TRES count is -2).
_SIGNED_UNSET = frozenset({-2, -1})


def _number(value: object, path: str) -> int | None:
    """An integer, or None when unset or infinite: plain (dbv0.0.37/38) or {set,number}, and
    Slurm's NO_VAL and INFINITE (:data:`UNSET_NUMBERS`) wherever they stand."""
    if type(value) is int:
        return None if value in UNSET_NUMBERS or value in _SIGNED_UNSET else value
    if value is None:
        return None
    if isinstance(value, dict):
        if value.get("set") is False or value.get("infinite") is True:
            return None
        return _number(value.get("number"), path)
    if isinstance(value, float) and value.is_integer():
        return _number(int(value), path)
    raise _JobError(f"{path} is not a number")


def _text(value: object, path: str) -> str:
    """A string field; null is the empty string (sacct prints nothing)."""
    if type(value) is str:
        return value.replace("|", _SEPARATOR_STAND_IN) if "|" in value else value
    if value is None:
        return ""
    raise _JobError(f"{path} is not a string")


def _get(job: Mapping[str, Any], key: str, path: str) -> Any:
    try:
        return job[key]
    except KeyError:
        raise _JobError(f"{path} is missing") from None


def _child(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = _get(parent, key, path)
    if not isinstance(value, dict):
        raise _JobError(f"{path} is not an object")
    return value


def _time(value: object, path: str, cache: dict[int, str]) -> str:
    seconds = _number(value, path)
    if not seconds:
        return _UNKNOWN_TIME
    text = cache.get(seconds)
    if text is None:
        try:
            text = datetime.fromtimestamp(seconds, UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            raise _JobError(f"{path} is not a time") from None
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[seconds] = text
    return text


def _state(value: object, path: str) -> tuple[str, bool]:
    """The state sacct prints, and whether its base state is CANCELLED."""
    if type(value) is str:
        return value, value == "CANCELLED"
    if isinstance(value, list) and value and all(type(flag) is str for flag in value):
        flags = set(value)
        base = next((flag for flag in value if flag in _BASE_STATES), value[0])
        shown = next((flag for flag in _STATE_FLAG_ORDER if flag in flags), base)
        return shown, base == "CANCELLED"
    raise _JobError(f"{path} is not a job state")


def _cancelled_by(
    state: str, cancelled: bool, user: object, user_ids: Mapping[str, int], path: str
) -> str:
    # sacct adds "by <uid>" to a CANCELLED base state when the canceller is known.
    if not cancelled or user is None:
        return state
    name = _text(user, path)
    uid = user_ids.get(name)
    if uid is None and name.isdigit() and name.isascii():
        uid = int(name)
    return state if uid is None else f"{state} by {uid}"


def _exit_code(value: object, path: str) -> str:
    """ExitCode as sacct prints it, ``status:signal``; empty while pending or absent."""
    if value is None:
        return ""
    if not isinstance(value, dict):
        raise _JobError(f"{path} is not an object")
    status = value.get("status")
    statuses = status if isinstance(status, list) else [status]
    if "PENDING" in statuses:
        return ""
    if "SIGNALED" in statuses or "CORE_DUMPED" in statuses:
        signal = value.get("signal")
        if not isinstance(signal, dict):
            return "0:0"
        number = signal.get("id", signal.get("signal_id"))
        return f"0:{_number(number, path + '.signal.id') or 0}"
    return_code = _number(value.get("return_code"), path + ".return_code") or 0
    # sacct subtracts 128 from a shell's "killed by signal" status.
    if return_code >= 128:
        return_code -= 128
    return f"{return_code}:0"


def _format_memory(count: int) -> str:
    """Write MB as sacct does (convert_num_unit, CONVERT_NUM_UNIT_EXACT), never rounding."""
    if count == 0:
        return "0"
    number = float(count)
    unit = _MEGA
    # Slurm divides while the integer part is a multiple of 512; testing the value itself
    # keeps every printed value exact at two decimals.
    while number >= 1024 and number % 512 == 0 and unit < len(_MEMORY_UNITS) - 1:
        number /= 1024
        unit += 1
    whole = int(number)
    if whole == number:
        return f"{whole}{_MEMORY_UNITS[unit]}"
    return f"{number:.2f}{_MEMORY_UNITS[unit]}"


class _Tres:
    """One TRES list read into sacct's string and the counts the other columns need."""

    __slots__ = ("counts", "text")

    def __init__(self, value: object, path: str) -> None:
        self.counts: dict[str, int | None] = {}
        if value is None:
            self.text = ""
            return
        if not isinstance(value, list):
            raise _JobError(f"{path} is not a list")
        items = []
        for item in value:
            if not isinstance(item, dict):
                raise _JobError(f"{path} has an item that is not an object")
            tres_type = _text(item.get("type"), path + ".type")
            if not tres_type:
                raise _JobError(f"{path} has an item without a type")
            name = item.get("name")
            key = f"{tres_type}/{name}" if name else tres_type
            count = _number(item.get("count"), path + ".count")
            self.counts[key] = count
            if count is None:
                # NO_VAL64: slurmdb_make_tres_string_from_simple leaves it out.
                continue
            if tres_type in {"mem", "bb"}:
                items.append(f"{key}={_format_memory(count)}")
            else:
                items.append(f"{key}={count}")
        # sacct's TRES strings are sorted by their "name=value" text.
        items.sort()
        self.text = ",".join(items)

    def count(self, key: str) -> int | None:
        return self.counts.get(key)


# --------------------------------------------------------------------------------------
# One job object -> the lines sacct prints for it


class _JobConverter:
    """Turn job objects into ``--parsable2`` lines in :data:`JSON_COLUMNS` order."""

    def __init__(self, user_ids: Mapping[str, int]) -> None:
        self.user_ids = {"root": 0, **user_ids}
        self.times: dict[int, str] = {}
        # dbv0.0.37 (Slurm 21.08) writes the job's eligible time as time.start: its start is
        # then its end less its elapsed time, so that utilisation and the charge agree.
        self.start_from_elapsed = False

    def lines(self, job: object, with_steps: bool = True) -> tuple[list[str], int]:
        """The allocation line, then one line per step (none when ``with_steps`` is false),
        and the number of steps the job has."""
        if not isinstance(job, dict):
            raise _JobError("the job is not an object")
        time = _child(job, "time", "time")
        job_id_raw = _number(_get(job, "job_id", "job_id"), "job_id")
        if job_id_raw is None:
            raise _JobError("job_id is not set")
        job_id = self._job_id(job, job_id_raw)
        cluster = _text(job.get("cluster"), "cluster")
        account = _text(_get(job, "account", "account"), "account")
        tres = _child(job, "tres", "tres")
        allocated = _Tres(_get(tres, "allocated", "tres.allocated"), "tres.allocated")
        requested = _Tres(tres.get("requested"), "tres.requested")
        counted = allocated if allocated.text else requested
        job_cpus = counted.count("cpu") or 0
        steps = job.get("steps") or []
        if not isinstance(steps, list):
            raise _JobError("steps is not a list")
        head = self._allocation_line(job, time, job_id, job_id_raw, cluster, account)
        tail = self._allocation_tail(job, time, allocated, requested, counted, job_cpus)
        result = [f"{head}|{'|'.join(tail)}"]
        if with_steps:
            for position, step in enumerate(steps):
                result.append(
                    self._step_line(step, position, job_id, job_id_raw, cluster, account, job_cpus)
                )
        return result, len(steps)

    def _job_id(self, job: Mapping[str, Any], job_id_raw: int) -> str:
        # slurmdb_get_job_id_str: array range, array task, het component, plain id.
        array = job.get("array")
        if isinstance(array, dict):
            array_job_id = _number(array.get("job_id"), "array.job_id")
            task_text = _text(array.get("task"), "array.task")
            if array_job_id and task_text:
                return f"{array_job_id}_[{task_text}]"
            task_id = _number(array.get("task_id"), "array.task_id")
            if array_job_id and task_id is not None:
                return f"{array_job_id}_{task_id}"
        het = job.get("het")
        if isinstance(het, dict):
            het_job_id = _number(het.get("job_id"), "het.job_id")
            het_offset = _number(het.get("job_offset"), "het.job_offset")
            if het_job_id and het_offset is not None:
                return f"{het_job_id}+{het_offset}"
        return str(job_id_raw)

    def _allocation_line(
        self,
        job: Mapping[str, Any],
        time: Mapping[str, Any],
        job_id: str,
        job_id_raw: int,
        cluster: str,
        account: str,
    ) -> str:
        state_value = _child(job, "state", "state").get("current")
        state, cancelled = _state(state_value, "state.current")
        state = _cancelled_by(
            state, cancelled, job.get("kill_request_user"), self.user_ids, "kill_request_user"
        )
        times = self.times
        return "|".join(
            (
                cluster,
                job_id,
                str(job_id_raw),
                _text(job.get("name"), "name"),
                _text(_get(job, "user", "user"), "user"),
                account,
                _text(_get(job, "partition", "partition"), "partition"),
                _text(job.get("qos"), "qos"),
                state,
                _exit_code(job.get("exit_code"), "exit_code"),
                _time(_get(time, "submission", "time.submission"), "time.submission", times),
                self._start(time),
                _time(_get(time, "end", "time.end"), "time.end", times),
            )
        )

    def _start(self, time: Mapping[str, Any]) -> str:
        start = _get(time, "start", "time.start")
        if self.start_from_elapsed:
            end = _number(_get(time, "end", "time.end"), "time.end")
            elapsed = _number(_get(time, "elapsed", "time.elapsed"), "time.elapsed") or 0
            # Without an end (still running) the eligible time is all the dump says.
            if end and _number(start, "time.start"):
                start = end - elapsed
        return _time(start, "time.start", self.times)

    def _allocation_tail(
        self,
        job: Mapping[str, Any],
        time: Mapping[str, Any],
        allocated: _Tres,
        requested: _Tres,
        counted: _Tres,
        job_cpus: int,
    ) -> tuple[str, ...]:
        elapsed = _number(_get(time, "elapsed", "time.elapsed"), "time.elapsed") or 0
        nnodes = _number(job.get("allocation_nodes"), "allocation_nodes") or 0
        if not nnodes:
            nnodes = counted.count("node") or 0
        req_mem = requested.count("mem")
        # ConsumedEnergyRaw of a job is the energy TRES it was allocated: absent is 0,
        # present but unset (NO_VAL64) is empty.
        if "energy" in allocated.counts:
            energy = allocated.counts["energy"]
            energy_text = "" if energy is None else str(energy)
        else:
            energy_text = "0"
        return (
            str(elapsed),
            str(nnodes),
            str(job_cpus),
            _text(_get(job, "nodes", "nodes"), "nodes"),
            requested.text,
            allocated.text,
            "" if req_mem is None else _format_memory(req_mem),
            energy_text,
            _timelimit(time.get("limit")),
        )

    def _step_line(
        self,
        step: object,
        position: int,
        job_id: str,
        job_id_raw: int,
        cluster: str,
        account: str,
        job_cpus: int,
    ) -> str:
        where = f"steps[{position}]"
        if not isinstance(step, dict):
            raise _JobError(f"{where} is not an object")
        step_id = _step_id(_child(step, "step", f"{where}.step"), f"{where}.step")
        time = _child(step, "time", f"{where}.time")
        start = _time(_get(time, "start", f"{where}.time.start"), f"{where}.time.start", self.times)
        state, cancelled = _state(_get(step, "state", f"{where}.state"), f"{where}.state")
        state = _cancelled_by(
            state,
            cancelled,
            step.get("kill_request_user"),
            self.user_ids,
            f"{where}.kill_request_user",
        )
        nodes = _child(step, "nodes", f"{where}.nodes")
        tres = step.get("tres")
        allocated = _Tres(
            tres.get("allocated") if isinstance(tres, dict) else None, f"{where}.tres.allocated"
        )
        nnodes = _number(nodes.get("count"), f"{where}.nodes.count") or allocated.count("node")
        cpus = allocated.count("cpu")
        return "|".join(
            (
                cluster,
                f"{job_id}.{step_id}",
                f"{job_id_raw}.{step_id}",
                _text(_child(step, "step", f"{where}.step").get("name"), f"{where}.step.name"),
                "",
                account,
                "",
                "",
                state,
                _exit_code(step.get("exit_code"), f"{where}.exit_code"),
                start,
                start,
                _time(_get(time, "end", f"{where}.time.end"), f"{where}.time.end", self.times),
                str(_number(time.get("elapsed"), f"{where}.time.elapsed") or 0),
                str(nnodes or 0),
                str(job_cpus if cpus is None else cpus),
                _text(nodes.get("range"), f"{where}.nodes.range"),
                "",
                allocated.text,
                "",
                _step_energy(step, where),
                "",
            )
        )


def step_usages(job: object, step_count: int) -> tuple[str, list[JobUsage | None]]:
    """A converted job's JobIDRaw and what each of its ``step_count`` steps used (None for a
    step that says nothing, or says it in a shape not understood: that step's usage is lost,
    never the job's charge). In JSON a job's own ``time.total`` is 0 (Slurm 22.05): its CPU time
    is the sum of its steps', which the importer makes."""
    assert isinstance(job, dict)
    steps = job.get("steps") or []
    usages: list[JobUsage | None] = []
    for step in steps:
        try:
            usages.append(_step_usage(step))
        except (_JobError, TypeError, ValueError, ArithmeticError):
            usages.append(None)
    return str(_number(_get(job, "job_id", "job_id"), "job_id")), usages[:step_count]


def _tres_counts(value: object) -> dict[str, int]:
    if not isinstance(value, list):
        return {}
    counts = {}
    for item in value:
        if isinstance(item, dict) and isinstance(item.get("type"), str):
            name = item.get("name")
            count = _number(item.get("count"), "tres.count")
            if count is not None:
                counts[f"{item['type']}/{name}" if name else item["type"]] = count
    return counts


def _step_usage(step: object) -> JobUsage | None:
    """One step's usage: ``time.total`` (``{seconds, microseconds}``, the microseconds not
    normalised) and the TRESUsageIn lists, which sacct's JSON calls ``tres.requested.total``,
    ``.max`` and ``.average`` (memory in bytes, GPU utilisation in percent)."""
    if not isinstance(step, dict):
        return None
    total = step.get("time", {}).get("total") if isinstance(step.get("time"), dict) else None
    cpu = None
    if isinstance(total, dict) and total.get("seconds") is not None:
        seconds = _number(total.get("seconds"), "time.total.seconds") or 0
        micro = _number(total.get("microseconds"), "time.total.microseconds") or 0
        cpu = Decimal(seconds) + Decimal(micro) / 1_000_000
    tres = step.get("tres")
    usage_in = tres.get("requested") if isinstance(tres, dict) else None
    usage_in = usage_in if isinstance(usage_in, dict) else {}
    summed = _tres_counts(usage_in.get("total"))
    peaks = _tres_counts(usage_in.get("max"))
    means = _tres_counts(usage_in.get("average"))
    memory = summed.get("mem")
    gpu_memory = peaks.get("gres/gpumem")
    gpu = means.get("gres/gpuutil")
    if cpu is None and memory is None and gpu is None and gpu_memory is None:
        return None
    return JobUsage(
        cpu_seconds=cpu,
        memory_peak_mb=None if memory is None else Decimal(memory) / _BYTES_PER_MIB,
        gpu_utilisation=None if gpu is None else Decimal(gpu),
        gpu_memory_peak_mb=None if gpu_memory is None else Decimal(gpu_memory) / _BYTES_PER_MIB,
        memory_basis=None if memory is None else MEMORY_SUMMED,
    )


_BYTES_PER_MIB = 1024 * 1024


def _timelimit(value: object) -> str:
    # TimelimitRaw: INFINITE is UNLIMITED, NO_VAL is Partition_Limit (both null before
    # v0.0.39, where the text parser reads all three as no limit).
    if isinstance(value, dict) and value.get("set") is False:
        return "UNLIMITED" if value.get("infinite") else "Partition_Limit"
    minutes = _number(value, "time.limit")
    return str(minutes) if minutes else ""


def _step_energy(step: Mapping[str, Any], where: str) -> str:
    statistics = step.get("statistics")
    if not isinstance(statistics, dict):
        return ""
    energy = statistics.get("energy")
    if not isinstance(energy, dict):
        return ""
    consumed = _number(energy.get("consumed"), f"{where}.statistics.energy.consumed")
    return "" if consumed is None else str(consumed)


def _step_id(step: Mapping[str, Any], path: str) -> str:
    """The step part of a JobID (``batch``, ``0``, ``1+1`` for a het component)."""
    value = _get(step, "id", f"{path}.id")
    if isinstance(value, dict):
        # v0.0.39: {"job_id", "step_het_component", "step_id"}.
        component = _number(value.get("step_het_component"), f"{path}.id.step_het_component")
        name = _step_name(value.get("step_id"), f"{path}.id.step_id")
    else:
        het = step.get("het")
        component = None
        if isinstance(het, dict):
            component = _number(het.get("component"), f"{path}.het.component")
        name = _step_name(value, f"{path}.id")
        # v0.0.40 on: "<job>.<step>[+<component>]" with the job id in front.
        _, dot, after = name.partition(".")
        if dot:
            name = after
    if not name:
        raise _JobError(f"{path}.id is empty")
    return name if component is None else f"{name}+{component}"


def _step_name(value: object, path: str) -> str:
    if type(value) is int:
        return str(value)
    if type(value) is str:
        return value
    raise _JobError(f"{path} is not a step id")


def job_lines(job: object, *, user_ids: Mapping[str, int] | None = None) -> list[str]:
    """The ``--parsable2`` lines (in :data:`JSON_COLUMNS` order) sacct prints for one job
    object. Raises ValueError with the reason when the object cannot be converted."""
    try:
        return _JobConverter(user_ids or {}).lines(job)[0]
    except _JobError as exc:
        raise ValueError(str(exc)) from None


# --------------------------------------------------------------------------------------
# Streaming


class _JsonSyntaxError(ValueError):
    """The input is not valid JSON at some point."""


class _JobsReader:
    """The items of the top-level ``jobs`` array, one at a time, from a stream.

    The standard library's C decoder reads each job with ``raw_decode`` from a buffer that is
    refilled by chunks and trimmed as jobs are consumed: memory holds one chunk and the job
    being read, whatever the file's size. (It reads 3 to 4 times faster than an event parser
    such as ijson, which matters: sacct's JSON is about twenty times the size of its text.)
    Top-level members before ``jobs`` (``meta``, ``errors``, ``warnings``) are read and dropped.
    ``jobs_seen`` tells an empty ``jobs`` array from none.
    """

    CHUNK = 1 << 20
    # No job object of sacct is near this size (a job with thousands of steps is a few MiB):
    # a longer value is junk, and reading on would hold it all.
    MAX_VALUE_CHARS = 64 << 20
    _decode = json.JSONDecoder().raw_decode

    def __init__(self, stream: IO[bytes] | IO[str]) -> None:
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buffer = ""
        self.position = 0
        self.at_end = False
        self.jobs_seen = False
        # meta.plugin.type (dbv0.0.37/38) or meta.plugin.data_parser (v0.0.39 on), when the
        # document gives it before its jobs (Slurm writes meta first).
        self.plugin = ""

    def _fill(self) -> bool:
        """Read one more chunk into the buffer; False at the end of the input."""
        if self.at_end:
            return False
        chunk = self.stream.read(self.CHUNK)
        if not chunk:
            self.at_end = True
            self.buffer += self.decoder.decode(b"", final=True)
            return False
        text = chunk if isinstance(chunk, str) else self.decoder.decode(chunk)
        if self.position > self.CHUNK:
            self.buffer, self.position = self.buffer[self.position :], 0
        if len(self.buffer) - self.position > self.MAX_VALUE_CHARS:
            raise _JsonSyntaxError(
                f"a JSON value longer than {self.MAX_VALUE_CHARS:,} characters: not sacct output"
            )
        if not self.buffer and text.startswith("\ufeff"):
            text = text[1:]
        self.buffer += text
        return True

    def _skip_space(self) -> str:
        """The next character that is not white space ("" at the end of the input)."""
        while True:
            buffer, position = self.buffer, self.position
            while position < len(buffer) and buffer[position] in " \t\r\n":
                position += 1
            self.position = position
            if position < len(buffer):
                return buffer[position]
            if not self._fill():
                return ""

    def _expect(self, characters: str, where: str) -> str:
        found = self._skip_space()
        if not found or found not in characters:
            shown = repr(found) if found else "the end of the input"
            raise _JsonSyntaxError(f"expected {' or '.join(characters)} {where}, found {shown}")
        self.position += 1
        return found

    def _value(self) -> object:
        """Decode the JSON value at the current position, reading more input as needed."""
        self._skip_space()
        while True:
            try:
                value, end = self._decode(self.buffer, self.position)
            except json.JSONDecodeError as exc:
                # Incomplete, or wrong: only the end of the input tells.
                if self._fill():
                    continue
                raise _JsonSyntaxError(f"{exc.msg} at character {exc.pos}") from None
            if end == len(self.buffer) and not self.at_end and self._fill():
                continue  # a number may go on in the next chunk
            self.position = end
            return value

    def jobs(self) -> Iterator[object]:
        """The job objects; raises _JsonSyntaxError where the input stops being JSON."""
        self._expect("{", "at the start")
        if self._skip_space() == "}":
            return
        while True:
            key = self._value()
            self._expect(":", "after a member name")
            if key == "jobs":
                self._expect("[", 'after "jobs"')
                self.jobs_seen = True
                break
            value = self._value()
            if key == "meta":
                self.plugin = _plugin_of(value)
            if self._expect(",}", "between members") == "}":
                return
        if self._skip_space() == "]":
            return
        while True:
            yield self._value()
            if self._expect(",]", "between jobs") == "]":
                return


def _plugin_of(meta: object) -> str:
    plugin = meta.get("plugin") if isinstance(meta, dict) else None
    if not isinstance(plugin, dict):
        return ""
    name = plugin.get("data_parser") or plugin.get("type") or ""
    return name.rpartition("/")[2] if isinstance(name, str) else ""


def _raw_json(job: object) -> str:
    try:
        text = json.dumps(job, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(job)
    return text if len(text) <= MAX_RAW_LENGTH else text[: MAX_RAW_LENGTH - 3] + "..."


@overload
def parse_sacct_json(
    stream: IO[bytes] | IO[str],
    *,
    tz: tzinfo = UTC,
    cluster: str | None = None,
    steps: Literal[True] = True,
    user_ids: Mapping[str, int] | None = None,
) -> Iterator[SacctRecord | SacctLineError]: ...


@overload
def parse_sacct_json(
    stream: IO[bytes] | IO[str],
    *,
    tz: tzinfo = UTC,
    cluster: str | None = None,
    steps: Literal[False],
    user_ids: Mapping[str, int] | None = None,
    reader: EntriesReader | None = None,
) -> Iterator[Any]: ...


def parse_sacct_json(
    stream: IO[bytes] | IO[str],
    *,
    tz: tzinfo = UTC,
    cluster: str | None = None,
    steps: bool = True,
    user_ids: Mapping[str, int] | None = None,
    reader: EntriesReader | None = None,
) -> Iterator[Any]:
    """Parse ``sacct --json`` output lazily, one job object at a time.

    ``stream`` is a binary (best) or text file object. Yields what :func:`parse_sacct`
    yields for the lines sacct would have printed (see the module docstring): a
    :class:`SacctRecord` or :class:`SacctLineError` per line, and with ``steps=False`` a bare
    :class:`SacctStep` for each step of a convertible job. ``cluster`` is used when the JSON
    has none. ``user_ids`` maps user names to uids for ``CANCELLED by <uid>``.

    ``reader`` (with ``steps=False``) reads the lines the jobs convert to in place of the
    line-by-line parse, given the parser and the entries in order (a :class:`PendingLine` for
    each line, the steps and the errors as they are): the columnar reader
    (``accounting.ledger.columnar.read_entries``) yields the same items and its own for lines
    it vouches for.

    Reads up to the first job at once, so :class:`SacctHeaderError` is raised by this call
    when the input is not JSON or has no ``jobs`` array.
    """
    _check_time_zone(tz)
    parser = _LineParser(_Layout(JSON_HEADER), tz, cluster)
    converter = _JobConverter(user_ids or {})
    jobs_reader = _JobsReader(stream)
    jobs = jobs_reader.jobs()
    try:
        first = next(jobs)
    except StopIteration:
        if not jobs_reader.jobs_seen:
            raise SacctHeaderError('not sacct --json output: no "jobs" array') from None
        return iter(())
    except _JsonSyntaxError as exc:
        if not jobs_reader.jobs_seen:
            raise SacctHeaderError(f"not sacct --json output: {exc}") from None
        return iter((SacctLineError(2, "", _shorten(f"{INVALID_JSON_REASON} ({exc})"), None),))
    converter.start_from_elapsed = jobs_reader.plugin == "dbv0.0.37"
    entries = _entries(converter, first, jobs, steps)
    if reader is not None and not steps:
        return reader(parser, entries)
    return _parse_entries(parser, entries)


class PendingLine(NamedTuple):
    """A line a job converts to, not read yet."""

    line_number: int
    text: str


EntriesReader = Callable[[_LineParser, Iterator[Any]], Iterator[Any]]


def _parse_entries(parser: _LineParser, entries: Iterator[Any]) -> Iterator[Any]:
    parse = parser.parse
    for entry in entries:
        yield parse(entry.line_number, entry.text) if type(entry) is PendingLine else entry


def _entries(
    converter: _JobConverter,
    first: object,
    jobs: Iterator[object],
    with_steps: bool,
) -> Iterator[PendingLine | SacctLineError | SacctStep]:
    """The lines the jobs convert to (to be read), with the errors and the bare steps."""
    lines_of = converter.lines
    line_number = 1
    position = 0
    job = first
    while True:
        position += 1
        try:
            lines, step_count = lines_of(job, with_steps)
        except _JobError as exc:
            line_number += 1
            reason = _shorten(f"JSON job #{position}: {exc}")
            yield SacctLineError(line_number, _raw_json(job), reason, None)
        else:
            for line in lines:
                line_number += 1
                yield PendingLine(line_number, line)
            if not with_steps:
                job_id_raw, usages = step_usages(job, step_count)
                for usage in usages:
                    line_number += 1
                    yield SacctStep(line_number, "step", job_id_raw, usage)
        try:
            job = next(jobs)
        except StopIteration:
            return
        except _JsonSyntaxError as exc:
            reason = _shorten(f"{INVALID_JSON_REASON} ({exc}), after JSON job #{position}")
            yield SacctLineError(line_number + 1, "", reason, None)
            return

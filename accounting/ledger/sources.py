"""Where sacct lines come from: the cluster's ``sacct`` command run for a time window, and files
staff upload. Both feed the one pipeline (``accounting.ledger.pipeline.jobs_import``).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import multiprocessing
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accounting.ledger.pipeline import (
    BUCKETS,
    ImportFatal,
    ImportSummary,
    jobs_import,
    run_interrupted,
    run_succeeded,
)
from accounting.ledger.range_process import range_import
from accounting.ledger.sacct import (
    MAX_LINE_CHARS,
    SacctHeaderError,
    bounded_lines,
    header_delimiter,
    parse_sacct,
)
from accounting.ledger.sacct_json import detect_format
from accounting.locks import cluster_row_lock, import_run_lock
from accounting.models import (
    Cluster,
    ImportRun,
)
from kit.queue import task_enqueue

SACCT_FORMAT = (
    "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Start,End,"
    "Elapsed,ElapsedRaw,NNodes,NCPUS,NodeList,ReqTRES,AllocTRES,ReqMem,ConsumedEnergyRaw,"
    "TimelimitRaw,TotalCPU,MaxRSS,TRESUsageInTot,TRESUsageInMax,TRESUsageInAve"
)


class SacctFailed(ImportFatal):
    """The configured sacct command could not run or exited with an error."""


class SlurmrestdFailed(ImportFatal):
    """The cluster's slurmrestd could not be reached, refused the token, or answered errors."""


def sacct_command(*, cluster: Cluster, since: datetime, until: datetime) -> list[str]:
    """The command line that dumps one window; times are given and printed in UTC."""
    utc_format = "%Y-%m-%dT%H:%M:%S"
    arguments = shlex.split(cluster.sacct_arguments)
    return [
        cluster.sacct_command,
        *arguments,
        *clusters_option(arguments, cluster=cluster),
        f"--starttime={since.astimezone(UTC).strftime(utc_format)}",
        f"--endtime={until.astimezone(UTC).strftime(utc_format)}",
        f"--format={SACCT_FORMAT}",
    ]


def clusters_option(arguments: list[str], *, cluster: Cluster) -> list[str]:
    """``--clusters=<Slurm's name>`` for sacct/sacctmgr, unless the configured arguments already
    choose clusters: on a site whose slurmdbd serves several clusters, sacct would otherwise
    print only the cluster of the host it runs on."""
    chosen = any(
        argument in ("-M", "--clusters") or argument.startswith(("-M", "--clusters="))
        for argument in arguments
    )
    return [] if chosen else [f"--clusters={cluster.slurm_name}"]


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
            yield bounded_lines(process.stdout)
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


# slurmrestd reads the window's times in its own zone, which the portal cannot choose (sacct it
# runs with TZ=UTC): the window asked for is this much wider on both sides, which is harmless,
# since jobs already known are left alone.
SLURMRESTD_ZONE_MARGIN = timedelta(hours=14)
SLURMRESTD_TIMEOUT_SECONDS = 300
SLURMRESTD_SPOOL_BYTES = 16 * 1024**2  # answers up to this size are checked for errors first


def slurmrestd_token(cluster: Cluster) -> str:
    """The JWT from the cluster's token file (``scontrol token``'s output or the bare token)."""
    path = Path(cluster.slurmrestd_token_file)
    if not cluster.slurmrestd_token_file:
        raise SlurmrestdFailed(f"{cluster.name}: no slurmrestd token file is configured")
    try:
        text = path.read_text().strip()
    except OSError as error:
        raise SlurmrestdFailed(
            f"cannot read the slurmrestd token {path}: {error.strerror}"
        ) from None
    token = text.removeprefix("SLURM_JWT=").strip()
    if not token:
        raise SlurmrestdFailed(f"the slurmrestd token file {path} is empty")
    return token


def slurmrestd_request(
    *, cluster: Cluster, since: datetime, until: datetime
) -> urllib.request.Request:
    """GET ``/slurmdb/<api>/jobs`` for one window, as ``sacct --json`` would print it."""
    utc_format = "%Y-%m-%dT%H:%M:%S"
    query = urllib.parse.urlencode(
        {
            "start_time": (since - SLURMRESTD_ZONE_MARGIN).astimezone(UTC).strftime(utc_format),
            "end_time": (until + SLURMRESTD_ZONE_MARGIN).astimezone(UTC).strftime(utc_format),
        }
    )
    base = cluster.slurmrestd_url.rstrip("/")
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise SlurmrestdFailed(f"{cluster.name}: slurmrestd's URL must be http:// or https://")
    return urllib.request.Request(  # noqa: S310 - the scheme is checked just above
        f"{base}/slurmdb/{cluster.slurmrestd_api}/jobs?{query}",
        headers={
            "X-SLURM-USER-NAME": cluster.slurmrestd_user,
            "X-SLURM-USER-TOKEN": slurmrestd_token(cluster),
            "Accept": "application/json",
        },
    )


def _slurmrestd_errors(body: bytes) -> str:
    """slurmrestd's own words from an answer's ``errors`` list, or the start of the body."""
    try:
        errors = json.loads(body).get("errors") or []
        return "; ".join(
            " ".join(
                str(error.get(key)) for key in ("source", "description", "error") if error.get(key)
            )
            for error in errors
        )
    except (ValueError, AttributeError):
        return body[:300].decode("utf-8", "replace").strip()


@contextmanager
def slurmrestd_jobs(*, cluster: Cluster, since: datetime, until: datetime) -> Iterator[IO[bytes]]:
    """The window's jobs from the cluster's slurmrestd, as a ``sacct --json`` stream for the
    same parser. Spooled first (to disk past SLURMRESTD_SPOOL_BYTES), so that an answer that
    carries errors instead of jobs is reported in slurmrestd's words, never half-imported."""
    request = slurmrestd_request(cluster=cluster, since=since, until=until)
    where = f"slurmrestd at {cluster.slurmrestd_url}"
    with tempfile.SpooledTemporaryFile(max_size=SLURMRESTD_SPOOL_BYTES) as spool:
        try:
            opened = urllib.request.urlopen(request, timeout=SLURMRESTD_TIMEOUT_SECONDS)  # noqa: S310
            with opened as answer:
                shutil.copyfileobj(answer, spool)
        except urllib.error.HTTPError as error:
            raise SlurmrestdFailed(
                f"{where} answered {error.code}: {_slurmrestd_errors(error.read())}"
            ) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise SlurmrestdFailed(f"cannot reach {where}: {reason}") from None
        size = spool.tell()
        spool.seek(0)
        if size <= SLURMRESTD_SPOOL_BYTES:
            body = spool.read()
            spool.seek(0)
            problem = _slurmrestd_errors(body) if b'"errors"' in body else ""
            if problem or b'"jobs"' not in body:
                raise SlurmrestdFailed(f"{where} answered errors: {problem or 'no jobs array'}")
        yield spool


def window_reader(cluster: Cluster) -> str:
    """What reads the cluster's windows: ``slurmrestd`` when it has one, else ``sacct``."""
    return "slurmrestd" if cluster.slurmrestd_url else "sacct"


@contextmanager
def window_source(
    *, cluster: Cluster, since: datetime, until: datetime
) -> Iterator[dict[str, Any]]:
    """What ``jobs_import`` reads for one window, from where the cluster is read: its
    slurmrestd when one is configured, else sacct run on this host (the one rule for both)."""
    if window_reader(cluster) == "slurmrestd":
        with slurmrestd_jobs(cluster=cluster, since=since, until=until) as stream:
            yield {"json_stream": stream}
    else:
        with sacct_lines(cluster=cluster, since=since, until=until) as lines:
            yield {"lines": lines}


def sacct_window_import(
    *,
    cluster: Cluster,
    until: datetime | None = None,
    since: datetime | None = None,
    advance: bool = True,
    attempts: int = 1,
) -> tuple[ImportRun, ImportSummary]:
    """Import the next window of ``cluster``: from the previous window's end less the overlap
    (or ``since``) to ``until`` (now). Overlaps are harmless: known jobs are left alone.

    ``advance`` moves the cluster's ``last_imported_until`` to ``until``; a backfill window
    (below) leaves it where the schedule put it. ``attempts`` counts the window's earlier
    runs that stopped (``accounting.ledger.recovery``): the recovery gives up at the limit.
    """
    until = until or timezone.now()
    if since is None:
        last = cluster.last_imported_until or (until - timedelta(days=1))
        since = last - timedelta(minutes=cluster.import_overlap_minutes)
    reader = window_reader(cluster)
    kind = reader if advance else f"backfill {reader}"
    run = ImportRun.objects.create(
        cluster=cluster,
        source=f"{kind} {since.isoformat()} .. {until.isoformat()}",
        window_start=since,
        window_end=until,
        attempts=attempts,
    )
    with (
        import_run_lock(run.pk),
        window_source(cluster=cluster, since=since, until=until) as source,
    ):
        result = jobs_import(cluster=cluster, **source, source=run.source, run=run, tz=UTC)
    if advance:
        Cluster.objects.filter(pk=cluster.pk).update(last_imported_until=until)
    return result


def backfill_windows(
    *, since: datetime, until: datetime, window: timedelta
) -> list[tuple[datetime, datetime]]:
    """Split ``[since, until)`` into consecutive windows of ``window`` (the last one shorter).

    sacct selects the jobs that ran at any time in a window, so a job that spans two windows
    is read by both: the second read finds it in the ledger as read, and it is charged once.
    """
    if until <= since:
        raise ValueError("the end of a backfill must be after its start")
    if window <= timedelta(0):
        raise ValueError("a backfill window must be longer than zero")
    windows = []
    start = since
    while start < until:
        end = min(start + window, until)
        windows.append((start, end))
        start = end
    return windows


def backfill_serial(
    *, cluster: Cluster, since: datetime, until: datetime, window: timedelta
) -> tuple[int, ImportSummary]:
    """Import the windows of ``[since, until)`` here, one after the other (a site without
    workers, or the reference a parallel backfill is checked against); the number of windows
    and the summed summary. ``ImportFatal`` names the window that failed."""
    windows = backfill_windows(since=since, until=until, window=window)
    total = ImportSummary()
    for start, end in windows:
        try:
            _, summary = sacct_window_import(cluster=cluster, since=start, until=end, advance=False)
        except ImportFatal as error:
            raise ImportFatal(f"window {start} .. {end}: {error}") from None
        total.add(summary)
    return len(windows), total


def backfill_enqueue(
    *, cluster: Cluster, since: datetime, until: datetime, window: timedelta
) -> list[tuple[datetime, datetime]]:
    """Enqueue one import task per window of ``[since, until)``: workers import them at once,
    each window under its own lock (how a centre backfills years of jobs)."""
    windows = backfill_windows(since=since, until=until, window=window)
    for start, end in windows:
        task_enqueue(
            name="accounting.tasks.import_sacct_backfill_window",
            args=(cluster.pk, start.isoformat(), end.isoformat()),
        )
    return windows


class AlreadyImported(Exception):
    """The uploaded content was imported before (same checksum); nothing was started."""

    def __init__(self, earlier: ImportRun) -> None:
        super().__init__(
            f"this file was already imported as run {earlier.pk} on"
            f" {earlier.started_at:%Y-%m-%d %H:%M} UTC (same sha256 checksum); import it again"
            " on purpose to read it once more"
        )
        self.earlier = earlier


def uploads_dir() -> Path:
    """Where uploads are kept, for the web that saves them and the worker that imports them:
    ``PORTAL_VAR_DIR/uploads``, one directory both must see (docker-compose.yml's ``uploads``
    volume, mounted at the same path in both)."""
    return Path(settings.VAR_DIR) / "uploads"


def upload_path(name: str) -> Path:
    """The kept upload ``name`` under this process's :func:`uploads_dir`. An absolute path (a
    task queued before uploads were named relative to the directory) is kept as it is."""
    path = Path(name)
    return path if path.is_absolute() else uploads_dir() / path


def import_upload_start(
    *,
    cluster: Cluster,
    name: str,
    chunks: Iterable[bytes],
    started_by: Any = None,
    create_projects: bool = False,
    columns: str = "",
    delimiter: str = "",
    again: bool = False,
) -> ImportRun:
    """Keep an uploaded sacct file in :func:`uploads_dir` and enqueue its import (after the
    commit). The task is given the file's name, not the web's path: the worker finds it in its
    own uploads directory, which must be the same directory.

    Raises :class:`AlreadyImported` when a run of this cluster already read the same content
    and ``again`` is not set: uploading a file twice by mistake must not look like new data.
    """
    upload_dir = uploads_dir()
    upload_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=upload_dir, prefix="upload-", delete=False) as out:
        for chunk in chunks:
            digest.update(chunk)
            out.write(chunk)
    kept = Path(out.name)
    checksum = digest.hexdigest()
    try:
        run = _upload_run_create(
            cluster=cluster, name=name, checksum=checksum, started_by=started_by, again=again
        )
    except BaseException:
        kept.unlink(missing_ok=True)
        raise
    path = kept.rename(upload_dir / f"import-{run.pk}{_suffix(name)}")
    options = {
        "path": path.name,
        "create_projects": create_projects,
        "columns": columns or None,
        "delimiter": delimiter or None,
    }
    ImportRun.objects.filter(pk=run.pk).update(task_options=options)
    upload_task_send(run, options)
    run.refresh_from_db()
    return run


def upload_task_send(run: ImportRun, options: dict[str, Any]) -> None:
    """Queue the import of an uploaded file (``options``: the kept file's name and the upload's
    choices). When the broker does not take the task, the run fails at once saying so, and is
    marked to be queued again by the recovery task once the broker answers."""
    path, rest = options["path"], {k: v for k, v in options.items() if k != "path"}

    def unsent(error: Exception) -> None:
        ImportRun.objects.filter(pk=run.pk).update(
            status=ImportRun.Status.FAILED,
            finished_at=timezone.now(),
            task_unsent=True,
            error=(
                f"the import could not be queued: {error}. The file is kept; the import is"
                " queued again automatically once the task queue answers"
            ),
        )

    task_enqueue(
        name="accounting.tasks.import_sacct_file", args=(run.pk, path), kwargs=rest,
        on_unsent=unsent,
    )  # fmt: skip


@transaction.atomic
def _upload_run_create(
    *, cluster: Cluster, name: str, checksum: str, started_by: Any, again: bool
) -> ImportRun:
    # The cluster row lock makes two uploads of one file at once see each other.
    cluster_row_lock(cluster, exclusive=True)
    earlier = (
        ImportRun.objects.filter(cluster=cluster, checksum=checksum)
        .exclude(status=ImportRun.Status.FAILED)
        .order_by("-started_at")
        .first()
    )
    if earlier is not None and not again:
        raise AlreadyImported(earlier)
    return ImportRun.objects.create(
        cluster=cluster,
        source=f"upload {Path(name).name}"[:500],
        started_by=started_by,
        checksum=checksum,
    )


def _suffix(name: str) -> str:
    return ".json" if name.lower().endswith(".json") else ".psv"


def uploads_expire(
    *, upload_dir: Path, older_than: timedelta, now: datetime, limit: int
) -> list[ImportRun]:
    """Delete the kept files of uploads whose run finished more than ``older_than`` before
    ``now``, at most ``limit`` runs a call, oldest first, and note it on each run
    (``upload_deleted_at``). A running run's file is never touched: its import may still be
    reading it. Idempotent: a run already noted is not looked at again, and a file already gone
    is noted all the same."""
    runs = list(
        ImportRun.objects.filter(
            checksum__gt="",  # only uploads have one
            upload_deleted_at__isnull=True,
            finished_at__lt=now - older_than,
        )
        .exclude(status=ImportRun.Status.RUNNING)
        .order_by("finished_at", "pk")[:limit]
    )
    for run in runs:
        for suffix in (".psv", ".json"):
            (upload_dir / f"import-{run.pk}{suffix}").unlink(missing_ok=True)
        run.upload_deleted_at = now
        run.save(update_fields=["upload_deleted_at"])
    return runs


FORMATS = ("auto", "parsable", "json")


def sacct_stream_import(
    stream: io.BufferedReader | io.BytesIO,
    *,
    format: str = "auto",
    on_text: Callable[[Iterable[str]], Iterable[str]] = lambda lines: lines,
    **options: Any,
) -> tuple[ImportRun, ImportSummary]:
    """Import a binary stream of sacct output, ``--parsable2`` text or ``--json``: ``auto``
    tells them apart by the first character (``{`` is JSON). ``on_text`` wraps the text lines
    (a progress bar); ``options`` go to :func:`jobs_import`."""
    if not hasattr(stream, "peek"):
        stream = io.BufferedReader(stream)
    if format == "auto":
        format = detect_format(stream.peek(4096)[:4096])
    if format == "json":
        return jobs_import(json_stream=stream, **options)
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
    return jobs_import(lines=on_text(bounded_lines(text)), **options)


def _file_ranges(path: Path, parts: int) -> tuple[str, list[tuple[int, int, int]]]:
    """The header line of a text dump and up to ``parts`` byte ranges of its data lines, cut at
    line ends, each with the file's line number of its first line. A cut never falls between a
    job and the step lines after it: what the steps used belongs to the job's row."""
    with path.open("rb") as stream:
        number = 0
        while True:
            raw = stream.readline(MAX_LINE_CHARS + 1)
            if not raw:
                raise ImportFatal("empty input: no sacct header line")
            number += 1
            if raw.strip():
                break
        header = raw.decode("utf-8", errors="replace").lstrip("\ufeff").rstrip("\r\n")
        start, size = stream.tell(), path.stat().st_size
        delimiter = header_delimiter(header).encode()
        names = [name.strip().lower() for name in header.split(delimiter.decode())]
        job_id_raw = names.index("jobidraw") if "jobidraw" in names else None
        cuts = [start]
        for part in range(1, parts):
            stream.seek(max(start + (size - start) * part // parts, cuts[-1]))
            stream.readline()  # on to the start of the next line
            while job_id_raw is not None:  # and past the steps of the job before it
                mark = stream.tell()
                fields = stream.readline(MAX_LINE_CHARS + 1).split(delimiter, job_id_raw + 1)
                if len(fields) <= job_id_raw or b"." not in fields[job_id_raw]:
                    stream.seek(mark)
                    break
            cuts.append(min(stream.tell(), size))
        cuts.append(size)
        ranges = []
        number += 1
        for begin, end in itertools.pairwise(cuts):
            if end > begin:
                ranges.append((begin, end, number))
            stream.seek(begin)
            remaining = end - begin
            while remaining:
                chunk = stream.read(min(remaining, 1 << 24))
                number += chunk.count(b"\n")
                remaining -= len(chunk)
    return header, ranges


def file_import_parallel(
    *,
    cluster: Cluster,
    path: Path,
    workers: int,
    source: str,
    create_projects: bool = False,
    delimiter: str | None = None,
    format: str = "auto",
) -> tuple[ImportRun, ImportSummary]:
    """Import a ``--parsable2`` file with ``workers`` processes, each reading one range of its
    lines (both cores of a machine, not only one). JSON cannot be cut at line ends: it is
    refused (``ImportFatal``), to be imported by one process.

    Each process writes its batches as a single import would: same keys, same fingerprints,
    same atomic batches, so a killed process loses only its batch in flight, a rerun completes
    the ledger, and a job read by two processes at once is booked once (the unique key and the
    batch retry). The processes share one import run and add to its counters. What a single
    process keeps and this does not: the order of two lines of the same job that fall in two
    ranges (concatenated, overlapping dumps); import such files with one worker.
    """
    with path.open("rb") as stream:
        head = stream.read(4096)
    if format == "json" or (format == "auto" and detect_format(head) == "json"):
        raise ImportFatal("several processes read sacct --parsable2 text; import JSON with one")
    header, ranges = _file_ranges(path, workers)
    try:
        list(parse_sacct([header], delimiter=delimiter))  # the header must be usable
    except SacctHeaderError as error:
        raise ImportFatal(str(error)) from None
    run = ImportRun.objects.create(cluster=cluster, source=source[:500], header=header)
    options = {"create_projects": create_projects, "delimiter": delimiter}
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(
            target=range_import,
            kwargs={
                "settings_module": os.environ.get("DJANGO_SETTINGS_MODULE", "portal.settings"),
                "database_name": connection.settings_dict["NAME"],
                "arguments": {
                    "run_id": run.pk,
                    "path": str(path),
                    "begin": begin,
                    "end": end,
                    "first_line": first_line,
                    "header": header,
                    "options": options,
                },
            },
        )
        for begin, end, first_line in ranges
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    failed = [process.exitcode for process in processes if process.exitcode != 0]
    if failed:
        message = f"{len(failed)} of {len(processes)} import processes failed (exit {failed})"
        ImportRun.objects.filter(pk=run.pk).update(
            status=ImportRun.Status.FAILED, finished_at=timezone.now(), error=message
        )
        raise ImportFatal(message)
    run.refresh_from_db()
    run_succeeded(run, charged=run.charged)
    run.refresh_from_db()
    summary = ImportSummary(**{name: getattr(run, name) for name in ("lines", *BUCKETS)})
    return run, summary


def import_file(
    *,
    run: ImportRun,
    path: Path,
    create_projects: bool = False,
    columns: str | None = None,
    delimiter: str | None = None,
    progress: Callable[[ImportSummary], None] | None = None,
) -> tuple[ImportRun, ImportSummary | None]:
    """Import a kept file (text or JSON) into ``run``. A file that cannot be imported at all (no
    header, not sacct output) ends the run as failed with the reason and gives no summary: the
    caller (a worker, or the in-process worker of the demo) reports it rather than failing.

    A file that is not there fails the run too, saying where it was looked for: a worker that
    does not share the web's uploads directory must not leave the run running forever."""
    if run.status != ImportRun.Status.RUNNING:
        # A redelivered task whose run was finished meanwhile (by an earlier delivery, or
        # failed by the recovery task): nothing to do.
        return run, None
    if not path.is_file():
        message = (
            f"the uploaded file {path.name} is not in {path.parent} on the importing worker"
            f" ({socket.gethostname()}): the web and the worker must share the uploads"
            " directory (PORTAL_VAR_DIR/uploads; docker-compose.yml's uploads volume)"
        )
        ImportRun.objects.filter(pk=run.pk).update(
            status=ImportRun.Status.FAILED, finished_at=timezone.now(), error=message
        )
        run.refresh_from_db()
        return run, None
    # A redelivered or requeued task resumes after the lines the run has committed (its
    # counters are written in each batch's transaction), so each line is counted once.
    committed = ImportRun.objects.filter(pk=run.pk).values_list("lines", flat=True).get()
    ImportRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
    if committed:
        run_interrupted(run, f"resumed after the {committed} lines already committed")
    try:
        with path.open("rb") as stream:
            return sacct_stream_import(
                stream,
                cluster=run.cluster,
                source=run.source,
                run=run,
                create_projects=create_projects,
                columns=columns,
                delimiter=delimiter,
                progress=progress,
                resume_after=committed,
            )
    except ImportFatal:
        run.refresh_from_db()
        return run, None

"""Where sacct lines come from: the cluster's ``sacct`` command run for a time window, and files
staff upload. Both feed the one pipeline (``accounting.ledger.pipeline.jobs_import``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounting.ledger.pipeline import ImportFatal, ImportSummary, jobs_import
from accounting.models import (
    Cluster,
    ImportRun,
)
from portal.queue import task_enqueue

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


@transaction.atomic
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

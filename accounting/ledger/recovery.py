"""Import runs that finish themselves (docs/importing.md, "Runs that finish themselves").

An import run gives a sign of life with each committed batch (``ImportRun.heartbeat_at``,
written in the batch's transaction) and when its task starts. A run still "running" without
one for a while has lost its process: a worker killed with ``kill -9``, a machine that went
down, a database restart that the process did not outlive. The recovery task
(``accounting.tasks.import_runs_recover``, on the beat) finds such runs and, for each:

- an upload whose file is still there is queued again; its task resumes after the lines the
  run committed (the counters are committed with each batch), so no line is counted twice;
- a sacct window is failed with the reason, and its window imported again by a new run (sacct's
  output is not kept, and reading it again is harmless: known jobs are left alone);
- an upload whose file is gone, and a command-line import (nothing can start it again), are
  failed with the reason;
- a run started ``max_attempts`` times is failed, saying so.

An upload whose task could not be sent (the broker was down) failed at once with the reason;
it is sent again here once the broker answers. A run whose task still holds the run's lock is
alive, however long its batch takes, and is left alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounting.ledger.pipeline import run_interrupted
from accounting.ledger.sources import upload_path, upload_task_send
from accounting.locks import ImportLockBusy, import_run_lock
from accounting.models import ImportRun
from kit.queue import task_enqueue


def import_runs_recover(
    *, now: datetime, stale_after: timedelta, max_attempts: int, limit: int
) -> dict[int, str]:
    """Queue again or fail the runs without a sign of life since ``now - stale_after``, and send
    again the uploads whose task could not be sent; at most ``limit`` runs, oldest first.
    Returns what was done to each run: ``requeued``, ``resent``, ``failed`` or ``alive``."""
    runs = (
        ImportRun.objects.alias(last_sign=Coalesce("heartbeat_at", "started_at"))
        .filter(
            Q(status=ImportRun.Status.RUNNING, last_sign__lt=now - stale_after)
            | Q(status=ImportRun.Status.FAILED, task_unsent=True)
        )
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )
    return {
        pk: import_run_recover(
            run_id=pk, now=now, stale_after=stale_after, max_attempts=max_attempts
        )
        for pk in list(runs)
    }


def import_run_recover(
    *, run_id: int, now: datetime, stale_after: timedelta, max_attempts: int
) -> str:
    """Recover one run (see :func:`import_runs_recover`); what was done to it."""
    try:
        with import_run_lock(run_id):
            pass  # free: no live task imports it
    except ImportLockBusy:
        return "alive"
    with transaction.atomic():
        run = ImportRun.objects.select_for_update().select_related("cluster").get(pk=run_id)
        if run.status == ImportRun.Status.FAILED and run.task_unsent:
            return _unsent_resend(run)
        last_sign = run.heartbeat_at or run.started_at
        if run.status != ImportRun.Status.RUNNING or last_sign >= now - stale_after:
            return "alive"  # finished, or a batch committed, since the list was read
        stopped = f"no sign of life since {last_sign:%Y-%m-%d %H:%M:%S} UTC after {run.lines} lines"
        if run.attempts >= max_attempts:
            return _failed(
                run,
                f"the import stopped {run.attempts} times ({stopped}); given up after"
                f" {max_attempts} attempts: see the worker's log, then import it again",
            )
        options = _upload_options(run)
        if options is not None:
            return _upload_requeue(run, options, stopped=stopped)
        if run.window_start is not None and run.window_end is not None:
            task_enqueue(
                name="accounting.tasks.import_sacct_backfill_window",
                args=(run.cluster_id, run.window_start.isoformat(), run.window_end.isoformat()),
                kwargs={"attempts": run.attempts + 1},
            )
            return _failed(
                run,
                f"the import stopped ({stopped}); its window is imported again by a new run"
                f" (attempt {run.attempts + 1})",
            )
        return _failed(
            run,
            f"the importing process stopped ({stopped}); nothing can start it again: run the"
            " command again (the ledger keeps every committed batch, and a rerun completes it)",
        )


def _upload_options(run: ImportRun) -> dict[str, Any] | None:
    """The import task's arguments of an upload, or None for a run that is not one. An upload
    queued before the arguments were kept (migration 0023) has only its checksum and its kept
    file, ``import-<run>.psv`` or ``.json``: the defaults are its options."""
    if "path" in run.task_options:
        return dict(run.task_options)
    if not run.checksum:
        return None
    for suffix in (".json", ".psv"):
        if upload_path(f"import-{run.pk}{suffix}").is_file():
            return {"path": f"import-{run.pk}{suffix}"}
    return {"path": f"import-{run.pk}.psv"}


def _upload_requeue(run: ImportRun, options: dict[str, Any], *, stopped: str) -> str:
    path = upload_path(options["path"])
    if not path.is_file():
        return _failed(
            run,
            f"the import stopped ({stopped}) and its uploaded file {path.name} is gone from"
            f" {path.parent}: upload the file again",
        )
    attempt = run.attempts + 1
    ImportRun.objects.filter(pk=run.pk).update(attempts=attempt, heartbeat_at=timezone.now())
    run_interrupted(
        run, f"{stopped}: queued again (attempt {attempt}), resuming after line {run.lines}"
    )
    upload_task_send(run, options)
    return "requeued"


def _unsent_resend(run: ImportRun) -> str:
    options: dict[str, Any] = run.task_options
    if "path" not in options or not upload_path(options["path"]).is_file():
        ImportRun.objects.filter(pk=run.pk).update(task_unsent=False)
        return "failed"
    ImportRun.objects.filter(pk=run.pk).update(
        status=ImportRun.Status.RUNNING,
        finished_at=None,
        error="",
        task_unsent=False,
        heartbeat_at=timezone.now(),
    )
    run_interrupted(run, f"{run.error} -- the task queue answers again: the import is queued")
    upload_task_send(run, options)
    return "resent"


def _failed(run: ImportRun, message: str) -> str:
    ImportRun.objects.filter(pk=run.pk).update(
        status=ImportRun.Status.FAILED, finished_at=timezone.now(), error=message
    )
    run_interrupted(run, message)
    return "failed"

"""Celery tasks of the accounting app. Thin: load by id, call a service, own retries and limits.

Imports go to the ``imports`` queue (settings.CELERY_TASK_ROUTES).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.utils import timezone

from accounting.ledger.pipeline import ImportSummary, quarantine_retry
from accounting.ledger.recovery import import_runs_recover
from accounting.ledger.sources import (
    import_file,
    sacct_window_import,
    upload_path,
    uploads_dir,
    uploads_expire,
)
from accounting.ledger_storage import partitions_ahead
from accounting.locks import (
    ImportLockBusy,
    cluster_import_lock,
    import_run_lock,
    named_lock,
    window_import_lock,
)
from accounting.models import Cluster, ImportRun, OverheadRun


def _progress(task: Task, run_id: int) -> Any:
    def report(summary: ImportSummary) -> None:
        if task.request.id and not task.request.is_eager:
            task.update_state(state="PROGRESS", meta={"import_run": run_id, **summary.as_dict()})

    return report


@shared_task(
    bind=True, name="accounting.tasks.import_sacct_window", soft_time_limit=3300, time_limit=3600
)
def import_sacct_window(self: Task, cluster_id: int) -> dict[str, Any]:
    """Run the cluster's sacct over the next (overlapping) window and import it.

    Runs of one cluster never overlap: a second one finds the lock taken and stands down.
    """
    cluster = Cluster.objects.get(pk=cluster_id)
    try:
        with cluster_import_lock(cluster):
            run, summary = sacct_window_import(cluster=cluster)
    except ImportLockBusy:
        return {"skipped": f"an import of {cluster.name} is already running"}
    return {"import_run": run.pk, **summary.as_dict()}


@shared_task(
    bind=True,
    name="accounting.tasks.import_sacct_backfill_window",
    soft_time_limit=3300,
    time_limit=3600,
)
def import_sacct_backfill_window(
    self: Task, cluster_id: int, since: str, until: str, attempts: int = 1
) -> dict[str, Any]:
    """Import one window of a backfill (``accounting.ledger.sources.backfill_enqueue``), or
    again the window of a run that stopped (``attempts`` > 1, from the recovery task).

    Windows of one cluster run at once on several workers, each under its own lock; the
    schedule's ``last_imported_until`` is left alone.
    """
    cluster = Cluster.objects.get(pk=cluster_id)
    start, end = datetime.fromisoformat(since), datetime.fromisoformat(until)
    try:
        with window_import_lock(cluster, start, end):
            run, summary = sacct_window_import(
                cluster=cluster, since=start, until=end, advance=False, attempts=attempts
            )
    except ImportLockBusy:
        return {"skipped": f"the window {since} .. {until} is being imported"}
    return {"import_run": run.pk, "worker": self.request.hostname, **summary.as_dict()}


@shared_task(
    bind=True, name="accounting.tasks.import_sacct_file", soft_time_limit=3300, time_limit=3600
)
def import_sacct_file(
    self: Task,
    run_id: int,
    path: str,
    create_projects: bool = False,
    columns: str | None = None,
    delimiter: str | None = None,
) -> dict[str, Any]:
    """Import a sacct file already on disk (a staff upload, named relative to the uploads
    directory) into the run ``run_id``. A file that is not sacct output, or is not there,
    fails its run with the reason, not the task. Delivered again (its worker was killed) or
    queued again by the recovery task, it resumes after the lines the run committed; a
    delivery whose run is being imported or is finished stands down."""
    try:
        with import_run_lock(run_id):
            run = ImportRun.objects.select_related("cluster").get(pk=run_id)
            run, summary = import_file(
                run=run,
                path=upload_path(path),
                create_projects=create_projects,
                columns=columns,
                delimiter=delimiter,
                progress=_progress(self, run.pk),
            )
    except ImportLockBusy:
        return {"import_run": run_id, "skipped": f"run {run_id} is being imported"}
    if summary is None:
        return {"import_run": run.pk, "error": run.error}
    return {"import_run": run.pk, **summary.as_dict()}


@shared_task(name="accounting.tasks.quarantine_retry", soft_time_limit=1700, time_limit=1800)
def quarantine_retry_task(cluster_id: int) -> dict[str, int]:
    """Charge quarantined lines whose cause has been fixed (enqueued by the fixing service)."""
    return quarantine_retry(cluster=Cluster.objects.get(pk=cluster_id)).as_dict()


@shared_task(name="accounting.tasks.cost_recompute", soft_time_limit=3300, time_limit=3600)
def cost_recompute_task(version_id: int) -> dict[str, Any]:
    """Price again the jobs that ended since a new cost model version took effect, and fix
    their days' roll-ups (``accounting.costs.services.job_costs_recompute``: idempotent, consistent
    at every commit, safe beside running imports)."""
    from accounting.costs.services import job_costs_recompute
    from accounting.models import CostModelVersion

    version = CostModelVersion.objects.select_related("cluster").get(pk=version_id)
    result = job_costs_recompute(cluster=version.cluster, since=version.effective_from)
    return {"version": version.pk, **result.__dict__}


@shared_task(name="accounting.tasks.overhead_compute", soft_time_limit=3300, time_limit=3600)
def overhead_compute(
    cluster_id: int, start: str, end: str, step: str = "hour", run_id: int | None = None
) -> dict[str, Any]:
    """True overhead and fair shares of a cluster over ``[start, end)`` (ISO 8601 times).

    Two computations of the same cluster and window never overlap (the service's lock): the
    second stands down and its run is marked failed with the reason.
    """
    from accounting.utilisation.overhead import overhead_run_compute

    cluster = Cluster.objects.get(pk=cluster_id)
    run = OverheadRun.objects.get(pk=run_id) if run_id is not None else None
    run = overhead_run_compute(
        cluster=cluster,
        start=datetime.fromisoformat(start),
        end=datetime.fromisoformat(end),
        step=step,
        run=run,
    )
    return {"overhead_run": run.pk, "status": run.status}


@shared_task(name="accounting.tasks.overhead_compute_daily", soft_time_limit=3300, time_limit=3600)
def overhead_compute_daily_task() -> dict[str, Any]:
    """Beat, hourly: yesterday's true overhead of each cluster, once (idempotent, no overlap)."""
    from accounting.utilisation.overhead import overhead_compute_daily

    try:
        with named_lock("overhead daily"):
            runs = overhead_compute_daily()
    except ImportLockBusy:
        return {"skipped": "the daily overhead computation is already running"}
    return {"overhead_runs": [run.pk for run in runs]}


@shared_task(name="accounting.tasks.ledger_partitions_ahead", soft_time_limit=540, time_limit=600)
def ledger_partitions_ahead() -> dict[str, list[str]]:
    """This month's ledger partition and the next two, ready before their first job ends
    (docs/importing.md); nothing on SQLite."""
    return {"created": partitions_ahead(today=timezone.now().date())}


# Runs whose uploads one call deletes at most: a backlog (the first run after upgrading) is
# worked off over the hourly runs instead of in one long task.
UPLOADS_EXPIRED_PER_RUN = 500


@shared_task(name="accounting.tasks.uploads_expire", soft_time_limit=540, time_limit=600)
def uploads_expire_task() -> dict[str, Any]:
    """Beat, hourly: delete staff uploads whose run finished more than
    ``PORTAL_UPLOAD_RETENTION_DAYS`` ago (0 keeps them); idempotent, bounded, no overlap."""
    days = settings.PORTAL_UPLOAD_RETENTION_DAYS
    if days == 0:
        return {"skipped": "PORTAL_UPLOAD_RETENTION_DAYS is 0: uploads are kept"}
    try:
        with named_lock("uploads expire"):
            runs = uploads_expire(
                upload_dir=uploads_dir(),
                older_than=timedelta(days=days),
                now=timezone.now(),
                limit=UPLOADS_EXPIRED_PER_RUN,
            )
    except ImportLockBusy:
        return {"skipped": "uploads are being expired already"}
    return {"import_runs": [run.pk for run in runs]}


# Stale runs one call looks at at most: bounded, like every periodic task.
IMPORT_RUNS_RECOVERED_PER_RUN = 100


@shared_task(name="accounting.tasks.import_runs_recover", soft_time_limit=240, time_limit=300)
def import_runs_recover_task() -> dict[str, Any]:
    """Beat, every five minutes: import runs without a sign of life for
    ``PORTAL_IMPORT_STALE_MINUTES`` are queued again from their last committed batch, or failed
    with the reason (``accounting.ledger.recovery``); idempotent, bounded, no overlap."""
    try:
        with named_lock("import runs recover"):
            outcomes = import_runs_recover(
                now=timezone.now(),
                stale_after=timedelta(minutes=settings.IMPORT_STALE_MINUTES),
                max_attempts=settings.IMPORT_MAX_ATTEMPTS,
                limit=IMPORT_RUNS_RECOVERED_PER_RUN,
            )
    except ImportLockBusy:
        return {"skipped": "stale import runs are being recovered already"}
    return {"import_runs": {str(pk): outcome for pk, outcome in outcomes.items()}}

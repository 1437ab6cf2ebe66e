"""Celery tasks of the allocations app: thin, idempotent, never overlapping."""

from __future__ import annotations

from celery import shared_task

from accounting.locks import ImportLockBusy, named_lock
from allocations.enforcement import enforcement_run_proposed, thresholds_check


@shared_task(name="allocations.tasks.thresholds_check", soft_time_limit=600, time_limit=900)
def thresholds_check_task() -> dict[str, int | str]:
    """Notify projects crossing their thresholds, propose Slurm actions and run those that
    their cluster allows. Beat runs it every 15 minutes; runs never overlap."""
    try:
        with named_lock("thresholds check"):
            report = thresholds_check()
            executed = enforcement_run_proposed()
    except ImportLockBusy:
        return {"skipped": "a thresholds check is already running"}
    return {
        "notices": len(report.notices),
        "proposed": len(report.actions),
        "executed": len(executed),
    }


@shared_task(name="allocations.tasks.priority_proposals", soft_time_limit=300, time_limit=600)
def priority_proposals_task() -> dict[str, dict[str, int] | str]:
    """Propose the Slurm commands of dynamic priorities that changed, on every cluster with a
    priority policy. Staff review and run them; beat runs this hourly, never overlapping."""
    from allocations.priorities import priority_proposals_run

    try:
        with named_lock("priority proposals"):
            return {"proposed": priority_proposals_run()}
    except ImportLockBusy:
        return {"skipped": "priority proposals are already running"}

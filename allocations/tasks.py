"""Celery tasks of the allocations app: thin, idempotent, never overlapping."""

from __future__ import annotations

from celery import Task, shared_task

from accounting.locks import ImportLockBusy, named_lock
from allocations.slurm.enforcement import enforcement_run_proposed, thresholds_check


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


@shared_task(name="allocations.tasks.efficiency_summaries", soft_time_limit=600, time_limit=900)
def efficiency_summaries_task(month: str | None = None) -> dict[str, int | str]:
    """Mail each PI last month's efficiency summary of their projects (``month``: an ISO day
    in the month to summarise instead). Beat runs it on the 1st of each month; a PI is mailed
    once per month however often it runs, and runs never overlap."""
    from datetime import UTC, date, datetime

    from allocations.grants.efficiency_mail import efficiency_summaries_send, month_before

    summarised = (
        date.fromisoformat(month).replace(day=1)
        if month
        else month_before(datetime.now(UTC).date())
    )
    try:
        with named_lock("efficiency summaries"):
            sent = efficiency_summaries_send(month=summarised)
    except ImportLockBusy:
        return {"skipped": "efficiency summaries are already being sent"}
    return {"month": summarised.isoformat(), "mailed": sent}


@shared_task(name="allocations.tasks.grant_endings", soft_time_limit=600, time_limit=900)
def grant_endings_task(today: str | None = None) -> dict[str, object]:
    """Mail the notices of grants ending (30, 14, 7 days before), expire the projects whose
    last grant ended (a final summary to the PI), revive those granted again, and archive those
    expired long enough (``today``: an ISO day to run as of instead). Beat runs it daily; it is
    idempotent (a second run mails no one twice) and runs never overlap."""
    from datetime import date

    from allocations.grants.expiry import grant_expiry_notices_send, project_statuses_follow

    day = date.fromisoformat(today) if today else None
    try:
        with named_lock("grant endings"):
            notices = grant_expiry_notices_send(today=day)
            report = project_statuses_follow(today=day)
    except ImportLockBusy:
        return {"skipped": "grant endings are already being handled"}
    return {
        "notices": len(notices),
        "expired": report.expired,
        "archived": report.archived,
        "revived": report.revived,
    }


@shared_task(name="allocations.tasks.priority_proposals", soft_time_limit=300, time_limit=600)
def priority_proposals_task() -> dict[str, dict[str, int] | str]:
    """Propose the Slurm commands of dynamic priorities that changed, on every cluster with a
    priority policy. Staff review and run them; beat runs this hourly, never overlapping."""
    from allocations.priorities.services import priority_proposals_run

    try:
        with named_lock("priority proposals"):
            return {"proposed": priority_proposals_run()}
    except ImportLockBusy:
        return {"skipped": "priority proposals are already running"}


@shared_task(
    name="allocations.tasks.slurm_sync_apply",
    bind=True,
    max_retries=24,
    default_retry_delay=300,
    soft_time_limit=300,
    time_limit=400,
)
def slurm_sync_apply_task(self: Task, plan_id: int) -> dict[str, str]:
    """Apply an approved Slurm plan (one sacctmgr run). When Slurm cannot be read the plan stays
    approved and the task tries again in 5 minutes, for two hours; one apply per cluster at once."""
    from allocations.models import SlurmSyncPlan
    from allocations.slurm.sync import slurm_sync_apply

    plan = SlurmSyncPlan.objects.select_related("cluster").get(pk=plan_id)
    try:
        with named_lock(f"slurm sync {plan.cluster_id}"):
            plan = slurm_sync_apply(plan=plan)
    except ImportLockBusy as busy:
        raise self.retry(countdown=30) from busy
    if plan.status == SlurmSyncPlan.Status.APPROVED:
        raise self.retry()
    return {"plan": str(plan.pk), "status": plan.status}


@shared_task(name="allocations.tasks.slurm_sync_check", soft_time_limit=300, time_limit=400)
def slurm_sync_check_task(
    cluster_id: int | None = None, request_id: int | None = None
) -> dict[str, str]:
    """Compare the portal with Slurm on ``cluster_id``, or on every cluster that has resource
    pools, and record the drift (the staff page shows the last check). Beat runs it hourly for
    every cluster; runs never overlap. ``request_id``: the staff request it answers."""
    from accounting.models import Cluster
    from allocations.models import SlurmSyncRequest
    from allocations.slurm.sync import slurm_sync_check, slurm_sync_request_end

    Outcome = SlurmSyncRequest.Outcome
    clusters = Cluster.objects.filter(resource_pools__isnull=False).distinct().order_by("name")
    if cluster_id is not None:
        clusters = clusters.filter(pk=cluster_id)
    try:
        with named_lock("slurm sync check"):
            checks = [slurm_sync_check(cluster=cluster) for cluster in clusters]
            # A budget period that began since the last run changes limits with no other
            # event: the hourly check sets them where the pools allow it.
            for check in checks:
                if not check.error:
                    slurm_limits_refresh_task.delay(check.cluster_id)
    except ImportLockBusy:
        slurm_sync_request_end(request_id, outcome=Outcome.BUSY)
        return {"skipped": "a check is already running"}
    except Exception as error:
        slurm_sync_request_end(request_id, outcome=Outcome.FAILED, error=_sentence(error))
        raise
    for check in checks:
        if check.error:
            slurm_sync_request_end(
                request_id, outcome=Outcome.FAILED, error=f"Slurm could not be read: {check.error}"
            )
        else:
            slurm_sync_request_end(request_id, outcome=Outcome.CHECKED)
    return {
        check.cluster.name: check.error or f"{len(check.drift)} differences" for check in checks
    }


@shared_task(name="allocations.tasks.slurm_sync_plan", soft_time_limit=300, time_limit=400)
def slurm_sync_plan_task(
    cluster_id: int, actor_id: int | None = None, request_id: int | None = None
) -> dict[str, str]:
    """Plan the changes that would bring the cluster's Slurm in line with the portal (what the
    staff page's "Plan now" asks for); the plan waits for review. ``request_id``: the staff
    request it answers, told how it ended."""
    from django.contrib.auth.models import User

    from accounting.models import Cluster
    from allocations.models import SlurmSyncRequest
    from allocations.slurm.sync import SlurmUnavailable, slurm_sync_plan, slurm_sync_request_end

    Outcome = SlurmSyncRequest.Outcome
    cluster = Cluster.objects.get(pk=cluster_id)
    actor = User.objects.filter(pk=actor_id).first() if actor_id is not None else None
    try:
        with named_lock(f"slurm sync {cluster_id}"):
            outcome = slurm_sync_plan(cluster=cluster, actor=actor)
    except ImportLockBusy:
        slurm_sync_request_end(request_id, outcome=Outcome.BUSY)
        return {"skipped": f"a plan or an apply of {cluster.name} is running"}
    except SlurmUnavailable as error:
        slurm_sync_request_end(
            request_id, outcome=Outcome.FAILED, error=f"Slurm could not be read: {error}"
        )
        return {"error": f"Slurm could not be read: {error}"}
    except Exception as error:
        slurm_sync_request_end(request_id, outcome=Outcome.FAILED, error=_sentence(error))
        raise
    if outcome.plan is None:
        slurm_sync_request_end(request_id, outcome=Outcome.NOTHING)
        return {"plan": "nothing to do"}
    slurm_sync_request_end(request_id, outcome=Outcome.PLANNED, plan=outcome.plan)
    return {"plan": str(outcome.plan.pk)}


def _sentence(error: BaseException) -> str:
    return f"it stopped with an error the portal did not expect ({type(error).__name__}: {error})"


@shared_task(name="allocations.tasks.slurm_limits_refresh", soft_time_limit=300, time_limit=400)
def slurm_limits_refresh_task(cluster_id: int) -> dict[str, str]:
    """Set the cluster's GrpTRESMins limits again after balances moved, where its pools allow
    it without review; other changes are left as a pending plan. One per cluster at a time."""
    from accounting.models import Cluster
    from allocations.slurm.sync import SlurmUnavailable, slurm_limits_refresh

    cluster = Cluster.objects.get(pk=cluster_id)
    try:
        with named_lock(f"slurm sync {cluster_id}"):
            plan = slurm_limits_refresh(cluster=cluster)
    except ImportLockBusy:
        return {"skipped": f"a plan or an apply of {cluster.name} is running"}
    except SlurmUnavailable as error:
        return {"error": f"Slurm could not be read: {error}"}
    return {"plan": f"{plan.pk} {plan.status}" if plan else "no limit changed"}

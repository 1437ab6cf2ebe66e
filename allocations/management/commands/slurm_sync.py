"""python manage.py slurm_sync --cluster NAME [--dry-run] [--json] [--check] [--apply]"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.locks import ImportLockBusy, named_lock
from allocations.slurm.plan import Action
from allocations.slurm.sync import (
    SlurmUnavailable,
    actions_json,
    slurm_sync_apply,
    slurm_sync_approve,
    slurm_sync_check,
    slurm_sync_plan,
)


class Command(BaseCommand):
    help = (
        "Plan Slurm accounts, user associations and GrpTRESMins limits from the portal "
        "(kept for review), apply a plan, or check for drift."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="the portal's cluster")
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--dry-run", action="store_true", help="print the plan, keep nothing")
        mode.add_argument(
            "--check", action="store_true", help="record and print the drift, plan nothing"
        )
        mode.add_argument(
            "--apply", action="store_true", help="plan, approve and apply now (one sacctmgr run)"
        )
        parser.add_argument(
            "--delete-unmanaged",
            action="store_true",
            help="also delete accounts and users in Slurm that the portal did not create",
        )
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        if options["check"]:
            check = slurm_sync_check(cluster=cluster, delete_unmanaged=options["delete_unmanaged"])
            if check.error:
                raise CommandError(f"Slurm could not be read: {check.error}")
            self._print(
                options, cluster=cluster.name, status="checked", plan=None,
                actions=[Action.from_json(item) for item in check.drift], skipped=[],
            )  # fmt: skip
            return
        try:
            outcome = slurm_sync_plan(
                cluster=cluster, dry_run=options["dry_run"],
                delete_unmanaged=options["delete_unmanaged"],
            )  # fmt: skip
        except SlurmUnavailable as error:
            raise CommandError(f"Slurm could not be read, nothing planned: {error}") from None
        plan = outcome.plan
        if plan is not None and options["apply"]:
            try:
                with named_lock(f"slurm sync {cluster.pk}"):  # as the tasks: one at a time
                    approved = slurm_sync_approve(plan=plan, actor=None, enqueue=False)
                    plan = slurm_sync_apply(plan=approved)
            except ImportLockBusy:
                raise CommandError(
                    f"another plan of {cluster.name} is being applied; plan {plan.pk} waits"
                    " for review (/allocations/slurm/) or another --apply"
                ) from None
        status = "dry run" if options["dry_run"] else plan.status if plan else "nothing to do"
        self._print(
            options, cluster=cluster.name, status=status, plan=plan.pk if plan else None,
            actions=outcome.actions, skipped=outcome.skipped,
        )  # fmt: skip
        if plan is not None and plan.error:
            raise CommandError(plan.error)

    def _print(
        self,
        options: dict[str, Any],
        *,
        cluster: str,
        status: str,
        plan: int | None,
        actions: list[Action],
        skipped: list[str],
    ) -> None:
        slurm_name = cluster_get(name=cluster).slurm_name
        if options["json"]:
            payload = {
                "cluster": cluster, "slurm_cluster": slurm_name, "plan": plan, "status": status,
                "actions": actions_json(actions, cluster=slurm_name), "skipped": skipped,
            }  # fmt: skip
            self.stdout.write(json.dumps(payload, indent=2))
            return
        applied = [action for action in actions if action.applied]
        left = [action for action in actions if not action.applied]
        heading = f"plan {plan}" if plan else "plan"
        self.stdout.write(
            f"{heading} for {cluster} (Slurm {slurm_name}): {len(applied)} actions, {status}"
        )
        for action in applied:
            self.stdout.write(f"  {_describe(action)}")
        if left:
            self.stdout.write(
                f"{len(left)} differences left alone (not created by the portal; "
                "--delete-unmanaged would delete them):"
            )
            for action in left:
                self.stdout.write(f"  {_describe(action)}")
        for reason in skipped:
            self.stderr.write(f"skipped: {reason}")


def _describe(action: Action) -> str:
    changes = ", ".join(
        f"{key} {action.before.get(key) or '-'} -> {action.after.get(key) or '-'}"
        for key in sorted({*action.before, *action.after})
    )
    return f"{action.verb} {action.target}" + (f": {changes}" if changes else "")

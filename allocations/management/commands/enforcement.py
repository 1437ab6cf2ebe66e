"""python manage.py enforcement [--dry-run]

Checks every current budget period against its pool's thresholds (notices by e-mail, Slurm
actions proposed), then runs the proposed actions of clusters that enable enforcement.
With --dry-run nothing is recorded, sent or run: it lists what would happen.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from allocations.models import EnforcementAction
from allocations.slurm.enforcement import enforcement_run_proposed, thresholds_check


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Check budget thresholds, list and run Slurm enforcement actions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="record, send and run nothing")
        parser.add_argument("--on", type=date.fromisoformat, help="check as of this date (ISO)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            try:
                with transaction.atomic():
                    report = thresholds_check(on=options["on"])
                    self._list(report.notices, report.actions)
                    self._list_proposed()
                    raise _Rollback
            except _Rollback:
                self.stdout.write("dry run: nothing recorded, sent or run")
            return
        report = thresholds_check(on=options["on"])
        self._list(report.notices, report.actions)
        for action in enforcement_run_proposed():
            self.stdout.write(f"ran [{action.status}, exit {action.exit_code}] {action.command}")
        self._list_proposed()

    def _list(self, notices: list[Any], actions: list[Any]) -> None:
        for notice in notices:
            allocation = notice.budget_period.allocation
            self.stdout.write(
                f"notice: {allocation.project} used {notice.percent_used}% of {allocation.pool} "
                f"(threshold {notice.threshold}%) -> {notice.recipients or 'no e-mail address'}"
            )
        for action in actions:
            self.stdout.write(f"proposed {action.kind}: {action.command}")

    def _list_proposed(self) -> None:
        waiting = EnforcementAction.objects.filter(status=EnforcementAction.Status.PROPOSED)
        for action in waiting.select_related("pool__cluster", "project"):
            state = "enabled" if action.pool.cluster.enforcement_enabled else "not enabled"
            self.stdout.write(
                f"waiting ({action.pool.cluster.name}: enforcement {state}): {action.command}"
            )

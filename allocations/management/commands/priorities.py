"""python manage.py priorities --cluster NAME [--propose] [--execute --as USER] [--json]

Prints each project's profiling coefficient K, its dynamic priority (eq 14) and the Slurm
command that applies it. --propose records the commands of the priorities that changed (for
review on /allocations/priorities/); --execute then runs the proposed ones, which the
cluster's policy must enable.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get
from allocations.priorities.services import (
    PriorityError,
    priority_actions_execute_proposed,
    priority_actions_propose,
    priority_policy_get,
    project_priorities_get,
)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class Command(BaseCommand):
    help = "List dynamic priorities of a cluster's projects; propose and run their commands."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="the cluster's name")
        parser.add_argument("--propose", action="store_true", help="record changed commands")
        parser.add_argument(
            "--execute", action="store_true", help="run proposed commands (policy must allow)"
        )
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument(
            "--as", dest="username", default=None, help="staff user recorded as the reviewer"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        try:
            proposed = priority_actions_propose(cluster=cluster) if options["propose"] else []
        except PriorityError as error:
            raise CommandError(str(error)) from None
        ran = self._execute(cluster, options["username"]) if options["execute"] else []
        if options["json"]:
            self._json(cluster)
            return
        self._table(cluster)
        for action in proposed:
            self.stdout.write(f"proposed: {action.command}")
        for line in ran:
            self.stdout.write(line)

    def _execute(self, cluster: Any, username: str | None) -> list[str]:
        from django.contrib.auth import get_user_model

        if not username:
            raise CommandError("--execute needs --as USERNAME: the staff member who reviewed them")
        reviewer = get_user_model().objects.filter(username=username, is_active=True).first()
        if reviewer is None:
            raise CommandError(f"no active user {username!r}")
        try:
            results = priority_actions_execute_proposed(cluster=cluster, reviewed_by=reviewer)
        except PriorityError as error:
            raise CommandError(str(error)) from None
        lines = []
        for action, refusal in results:
            if refusal is not None:
                lines.append(f"not run: {action.command} ({refusal})")
            else:
                lines.append(f"ran [{action.status}, exit {action.exit_code}] {action.command}")
        return lines

    def _table(self, cluster: Any) -> None:
        policy = priority_policy_get(cluster=cluster)
        if policy is None:
            self.stdout.write(f"{cluster.name}: no priority policy (K is listed without Pr_dyn)")
        else:
            state = "enabled" if policy.execution_enabled else "not enabled"
            self.stdout.write(
                f"{cluster.name}: Pr_base={policy.base_priority} K1={policy.k1} K2={policy.k2} "
                f"C0={policy.c0} C1={policy.c1} C2={policy.c2}; execution {state}"
            )
        self.stdout.write(f"{'project':<16} {'K':>12} {'Pr_dyn':>18}  command")
        for row in project_priorities_get(cluster=cluster):
            pr_dyn = "-" if row.pr_dyn is None else str(row.pr_dyn)
            self.stdout.write(
                f"{row.project.code:<16} {row.k.k_prof!s:>12} {pr_dyn:>18}  {row.command or '-'}"
            )

    def _json(self, cluster: Any) -> None:
        policy = priority_policy_get(cluster=cluster)
        data = {
            "cluster": cluster.name,
            "policy": None
            if policy is None
            else {
                "base_priority": str(policy.base_priority),
                **{name: str(getattr(policy, name)) for name in ("k1", "k2", "c0", "c1", "c2")},
                "command_template": policy.command_template,
                "execution_enabled": policy.execution_enabled,
            },
            "projects": [
                {
                    "project": row.project.code,
                    "k_prof": str(row.k.k_prof),
                    "k_source": row.k.source,
                    "jobs": row.k.jobs,
                    "priority": _text(row.pr_dyn),
                    "slurm_priority": row.slurm_priority,
                    "command": row.command,
                    "last_action": None
                    if row.last_action is None
                    else {"status": row.last_action.status, "command": row.last_action.command},
                }
                for row in project_priorities_get(cluster=cluster)
            ],
        }
        self.stdout.write(json.dumps(data, indent=2))

"""python manage.py slurm_accounts_sync --cluster NAME (--file FILE | --run-sacctmgr)"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.models import Cluster
from allocations.slurm.accounts import AssociationsError
from allocations.slurm.services import slurm_accounts_sync


class Command(BaseCommand):
    help = "Create projects and memberships from Slurm's account associations."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--cluster",
            required=True,
            help="the portal cluster (its slurm_cluster_name selects the rows), or Slurm's name",
        )
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--file", type=Path, help="saved sacctmgr --parsable2 output")
        source.add_argument("--run-sacctmgr", action="store_true", help="run sacctmgr here")
        parser.add_argument("--sacctmgr", default="sacctmgr", help="path of sacctmgr")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["file"]:
            try:
                lines = options["file"].read_text(encoding="utf-8").splitlines()
            except OSError as error:
                raise CommandError(
                    f"{options['file']}: cannot be read ({error.strerror})"
                ) from None
        cluster = self._cluster(options["cluster"])
        if not options["file"]:
            slurm_name = cluster.slurm_name if isinstance(cluster, Cluster) else cluster
            lines = self._run_sacctmgr(options["sacctmgr"], slurm_name)
        try:
            result = slurm_accounts_sync(lines=lines, cluster=cluster)
        except AssociationsError as error:
            raise CommandError(str(error)) from None
        for name, rows in sorted(result.other_clusters.items()):
            self.stdout.write(f"rows of other clusters skipped: {name}: {rows}")
        self.stdout.write(
            f"projects created: {len(result.projects_created)} {result.projects_created}"
        )
        self.stdout.write(f"users created: {len(result.users_created)} {result.users_created}")
        self.stdout.write(f"memberships created: {len(result.memberships_created)}")
        for number, why in result.skipped_lines:
            self.stderr.write(f"line {number} skipped: {why}")

    def _cluster(self, name: str) -> Cluster | str:
        """The portal cluster ``name``; a name the portal does not know is taken as Slurm's
        own ClusterName (its accounts are then project codes: no pool of it names them)."""
        try:
            return cluster_get(name=name)
        except NotFound:
            return name

    def _run_sacctmgr(self, binary: str, cluster: str) -> list[str]:
        command = [
            binary, "--parsable2", "show", "associations", f"cluster={cluster}",
            "format=Cluster,Account,User,ParentName",
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        except OSError as error:
            raise CommandError(f"cannot run {binary!r}: {error.strerror}") from None
        if done.returncode != 0:
            raise CommandError(f"{binary} exited with {done.returncode}: {done.stderr.strip()}")
        return done.stdout.splitlines()

"""python manage.py slurm_billing_config --cluster NAME: slurm.conf lines for Slurm's billing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get, partition_versions_current
from accounting.clusters.slurmconf import slurm_conf_lines


class Command(BaseCommand):
    help = "Print PriorityFlags and TRESBillingWeights that make Slurm's billing follow the portal."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        versions = partition_versions_current(cluster=cluster)
        self.stdout.write(
            slurm_conf_lines([(version.partition.name, version.spec) for version in versions]),
            ending="",
        )

"""python manage.py quote --cluster C --partition P --nodes N --hours H [...] [--json]"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from accounting.clusters.charging import MODELS, ChargeError, SpecError
from accounting.clusters.quotes import QuoteError, QuoteRequest, quote_payload, weight_explanation
from accounting.clusters.selectors import NotFound, cluster_get, partition_get, quote_get
from accounting.clusters.units import parse_memory_mb


def _decimal(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise CommandError(f"not a number: {text!r}") from None
    if not value.is_finite():
        raise CommandError(f"not a finite number: {text!r}")
    return value


class Command(BaseCommand):
    help = "Quote a planned job in SU: breakdown, dominant resource and energy estimate."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True)
        parser.add_argument("--partition", required=True)
        parser.add_argument("--nodes", type=int, default=1)
        parser.add_argument("--hours", required=True, help="wall-clock hours, e.g. 1.5")
        parser.add_argument("--cores-per-node", help="default: whole node, or the GPUs' share")
        parser.add_argument("--gpus-per-node", type=int)
        parser.add_argument("--memory-per-node", help="e.g. 60G, 1914M (default: cores' share)")
        parser.add_argument("--model", default="energy", choices=sorted(MODELS))
        parser.add_argument("--at", help="price with the rates in effect at this ISO 8601 time")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        memory = None
        if options["memory_per_node"]:
            try:
                memory = parse_memory_mb(options["memory_per_node"])
            except ValueError as error:
                raise CommandError(f"--memory-per-node: {error}") from None
        at = None
        if options["at"]:
            at = parse_datetime(options["at"])
            if at is None or at.tzinfo is None:
                raise CommandError("--at must be an ISO 8601 time with a zone")
        request = QuoteRequest(
            nodes=options["nodes"],
            hours=_decimal(options["hours"]),
            cores_per_node=_decimal(options["cores_per_node"])
            if options["cores_per_node"]
            else None,
            gpus_per_node=options["gpus_per_node"],
            memory_per_node_mb=memory,
            model=options["model"],
        )
        try:
            cluster = cluster_get(name=options["cluster"])
            partition = partition_get(cluster=cluster, name=options["partition"])
            version, charge = quote_get(partition=partition, request=request, at=at)
        except (NotFound, QuoteError, ChargeError, SpecError) as error:
            raise CommandError(str(error)) from None

        if options["json"]:
            payload = quote_payload(
                cluster_name=cluster.name,
                partition_name=partition.name,
                version_number=version.number,
                request=request,
                charge=charge,
            )
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(f"{partition} (rate version {version.number})")
        self.stdout.write(f"weight: {weight_explanation(version.spec)}")
        self.stdout.write(f"model: {charge.model}, {request.nodes} node(s) x {charge.hours} h")
        for index, node in enumerate(charge.nodes, start=1):
            self.stdout.write(
                f"  node {index}: cores {node.cores:.4f}  memory {node.memory:.4f}  "
                f"gpus {node.gpus:.4f}  -> {node.share:.4f} ({node.dominant})"
            )
        self.stdout.write(f"service units: {charge.service_units} SU")
        self.stdout.write(f"dominant resource: {charge.dominant_resource}")
        self.stdout.write(f"energy estimate: {charge.energy_wh:.1f} Wh")

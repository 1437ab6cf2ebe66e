"""python manage.py cost_ratio --cluster NAME [--model energy|sm|peak|all] [--json]

Prints the CPU-vs-GPU comparison of the energy paper's section V (Tables II-IV and Figure 1)
for a cluster's CPU and GPU partitions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.charging import SpecError
from accounting.clusters.cost_ratio import cost_ratio_report, load_benchmarks
from accounting.clusters.selectors import NotFound, cluster_get, partition_versions_current

_TITLES = {
    "sm": "SM-based accounting (Titan, eq 17)",
    "peak": "Peak-performance accounting (eq 22)",
    "energy": "Energy-based accounting (eq 15)",
}


class Command(BaseCommand):
    help = "CPU-vs-GPU cost ratios (Tables II-IV) and Figure 1 data for a cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True)
        parser.add_argument("--model", default="all", choices=["all", "energy", "sm", "peak"])
        parser.add_argument("--cpu-partition", help="default: the first partition without GPUs")
        parser.add_argument("--gpu-partition", help="default: the first partition with GPUs")
        parser.add_argument(
            "--benchmarks", type=Path, help="JSON list of applications and performance ratios"
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        versions = partition_versions_current(cluster=cluster)
        cpu = self._pick(versions, options["cpu_partition"], gpu=False, cluster=cluster.name)
        gpu = self._pick(versions, options["gpu_partition"], gpu=True, cluster=cluster.name)
        models = ("sm", "peak", "energy") if options["model"] == "all" else (options["model"],)
        try:
            benchmarks = load_benchmarks(options["benchmarks"]) if options["benchmarks"] else None
            report = cost_ratio_report(cpu=cpu, gpu=gpu, models=models, benchmarks=benchmarks)
        except (SpecError, ValueError, OSError) as error:
            raise CommandError(str(error)) from None
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
            return
        self._print(report, cluster.name)

    def _pick(self, versions: list[Any], name: str | None, *, gpu: bool, cluster: str) -> Any:
        kind = "GPU" if gpu else "CPU"
        for version in versions:
            if (name is None and version.is_gpu == gpu) or version.partition.name == name:
                return version.spec
        raise CommandError(f"cluster {cluster!r} has no {kind} partition {name or ''}".rstrip())

    def _print(self, report: dict[str, Any], cluster: str) -> None:
        write = self.stdout.write
        for model, table in report["models"].items():
            write(f"\n{_TITLES.get(model, model)} on {cluster}")
            write(
                f"CPU node: {table['cpu_node_weight']} SU/h   "
                f"GPU node: {table['gpu_node_weight']} SU/h   "
                f"GPU cheaper above speedup {table['switch_speedup']:.2f}"
            )
            headings = ("Perf. ratio", "CPU charge", "GPU charge", "Cost ratio")
            write(f"{'Application':<18}" + "".join(f"{heading:>12}" for heading in headings))
            for row in table["rows"]:
                write(
                    f"{row['application']:<18}{row['perf_ratio']:>12}{row['cpu_charge']:>12,}"
                    f"{row['gpu_charge']:>12,}{row['cost_ratio']:>12.2f}"
                )
        write(f"\nEnergy-optimal switch: speedup > {report['energy_optimal_switch_speedup']:.2f}")
        write("\nFigure 1: energy (Wh) of the SU-minimising choice against speedup")
        names = list(report["models"])
        write(f"{'speedup':>8}" + "".join(f"{name:>10}" for name in names))
        for point in report["figure1"]:
            write(
                f"{point['speedup']:>8}"
                + "".join(f"{point['energy_wh'][name]:>10.1f}" for name in names)
            )

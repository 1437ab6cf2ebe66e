"""python manage.py jobcost --model FILE (--job ID --cluster NAME | --nodes HOSTLIST --runtime
SECONDS [--energy JOULES] [--share FRACTION]) [--verbose | --short | --quiet | --json]

The job cost meter of the PeCoH report (ch. 5.1): a job's money cost under a cost model, in one
of four forms -- the block of Listing 5 (default), ``job cost estimate: 0.43 Euro``, ``0.43``, or
JSON. It writes to standard output only, opens no file but the model, and with ``--nodes`` needs
no database, so a Slurm epilogue can run it unprivileged (docs/costs.md). Under a model whose
nodes are shared, a ledger job pays its share of each node (derived from its shape) and
``--share`` gives the share of a job given by ``--nodes``.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.costs.costmodels import (
    CostModel,
    CostModelError,
    JobCost,
    NodelistError,
    cost_model_load,
    expand_nodelist,
    job_cost,
    job_cost_json,
    job_cost_quiet,
    job_cost_short,
    job_cost_verbose,
)
from accounting.costs.services import JobNotFinished, cost_job_get, job_cost_get

FORMS = {
    "verbose": job_cost_verbose,
    "short": job_cost_short,
    "quiet": job_cost_quiet,
    "json": job_cost_json,
}


_SHARE = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:/[0-9]+)?", re.ASCII)


def _share(text: str | None) -> Fraction | None:
    if text is None:
        return None
    if not _SHARE.fullmatch(text) or text.endswith("/0"):
        raise CommandError(f"--share: expected a part of a node such as 1/8 or 0.125, got {text!r}")
    share = Fraction(text)
    if not 0 < share <= 1:
        raise CommandError(
            f"--share: a job's share of a node is more than 0 and at most 1, got {text}"
        )
    return share


def _whole_number(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise CommandError(f"{option}: expected a whole number, got {text!r}")
    return int(text)


class Command(BaseCommand):
    help = "Estimate the money cost of one job with a cost model (PeCoH job cost meter)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, help="cost model file (docs/costs.md)")
        parser.add_argument("--job", help="JobID or JobIDRaw of a finished job in the ledger")
        parser.add_argument("--cluster", help="the job's cluster (with --job)")
        parser.add_argument("--nodes", help="the job's Slurm hostlist, e.g. m[10000-10009]")
        parser.add_argument("--runtime", help="elapsed seconds (with --nodes)")
        parser.add_argument("--energy", help="consumed energy in joules (with --nodes)")
        parser.add_argument(
            "--share",
            help="the job's share of each node, e.g. 1/8 (with --nodes, under a model whose "
            "nodes are shared; default: whole nodes)",
        )
        form = parser.add_mutually_exclusive_group()
        for name, text in (
            ("verbose", "the block of Listing 5 (default)"),
            ("short", "one line: job cost estimate: TOTAL CURRENCY"),
            ("quiet", "the bare total, for scripts"),
            ("json", "one JSON object"),
        ):
            form.add_argument(f"--{name}", dest="form", action="store_const", const=name, help=text)
        parser.set_defaults(form="verbose")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            model = cost_model_load(options["model"])
        except CostModelError as error:
            raise CommandError(str(error)) from None
        if options["job"] is not None:
            cost = self._ledger_job(model, options)
        elif options["nodes"] is not None:
            cost = self._given_job(model, options)
        else:
            raise CommandError(
                "give --job ID --cluster NAME, or --nodes HOSTLIST --runtime SECONDS"
            )
        self.stdout.write(FORMS[options["form"]](cost))
        if cost.unknown_nodes and options["form"] in ("short", "quiet"):
            # The other forms list them; here stdout stays one figure for scripts.
            self.stderr.write(
                f"{len(cost.unknown_nodes)} of the job's nodes are in no node set and cost nothing"
            )

    def _ledger_job(self, model: CostModel, options: dict[str, Any]) -> JobCost:
        if options["nodes"] is not None or options["runtime"] is not None:
            raise CommandError(
                "--job reads nodes and runtime from the ledger: drop --nodes/--runtime"
            )
        if options["energy"] is not None:
            raise CommandError("--job reads the energy from the ledger: drop --energy")
        if options["share"] is not None:
            raise CommandError("--job derives its share of each node from the ledger: drop --share")
        if not options["cluster"]:
            raise CommandError("--job needs --cluster NAME")
        try:
            cluster = cluster_get(name=options["cluster"])
            job = cost_job_get(cluster=cluster, job_id=options["job"])
            return job_cost_get(model=model, job=job)
        except (NotFound, JobNotFinished, NodelistError) as error:
            raise CommandError(str(error)) from None

    def _given_job(self, model: CostModel, options: dict[str, Any]) -> JobCost:
        if options["cluster"] is not None:
            raise CommandError("--cluster goes with --job; --nodes prices the given nodes")
        runtime = _whole_number(options["runtime"], "--runtime")
        if runtime is None:
            raise CommandError("--nodes needs --runtime SECONDS")
        share = _share(options["share"])
        if share is not None and model.nodes_are == "exclusive":
            raise CommandError(
                "--share: the model's nodes are exclusive (a job pays whole nodes); "
                "a share applies under 'nodes-are shared'"
            )
        try:
            nodes = expand_nodelist(options["nodes"])
        except NodelistError as error:
            raise CommandError(f"--nodes: {error}") from None
        return job_cost(
            model,
            nodes=nodes,
            runtime_seconds=runtime,
            energy_joules=_whole_number(options["energy"], "--energy"),
            node_share=share,
        )

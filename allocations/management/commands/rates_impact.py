"""python manage.py rates_impact --cluster NAME --draft FILE.json [--cost-model FILE]
[--months 12] [--json]"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.clusters.selectors import NotFound, cluster_get
from accounting.clusters.specs import spec_document_decode
from accounting.ledger.rate_drafts import rate_draft_check
from allocations.grants.rates_impact import rates_impact_get, rates_impact_payload
from kit.errors import ApplicationError


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"{path}: the {what} cannot be read ({error})") from None


class Command(BaseCommand):
    help = (
        "What a draft of a cluster's rates (a spec file, and optionally a cost model) would "
        "have done to each project's last months, which budget periods would run out earlier, "
        "and the TRESBillingWeights lines it changes. Reads the draft; writes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="the portal's cluster")
        parser.add_argument(
            "--draft", required=True, help="a cluster spec file (examples/clusters/*.json)"
        )
        parser.add_argument("--cost-model", help="a draft cost model file (docs/costs.md)")
        parser.add_argument("--months", type=int, default=12, help="months re-priced (12)")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = cluster_get(name=options["cluster"])
        except NotFound as error:
            raise CommandError(str(error)) from None
        path = options["draft"]
        cost_model = options["cost_model"]
        try:
            rates = rate_draft_check(
                cluster=cluster,
                spec=spec_document_decode(_read(path, "draft"), source=path),
                cost_model_text=_read(cost_model, "cost model") if cost_model else "",
                source=path,
            )
            payload = rates_impact_payload(rates_impact_get(rates=rates, months=options["months"]))
        except ApplicationError as error:
            raise CommandError(str(error)) from None
        if options["json"]:
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(_table(payload))


def _table(payload: dict[str, Any]) -> str:
    currency = payload["currency"]
    lines = [
        f"{payload['cluster']}: the draft re-prices {payload['start']} to {payload['end']} "
        f"(end exclusive, {payload['months']} months)",
        "",
    ]
    header = ["project", "pool", "jobs", "charged SU", "draft SU", "change %"]
    if currency:
        header += [f"money now ({currency})", f"money draft ({currency})"]
    rows = []
    for row in payload["projects"]:
        cells = [
            row["project"], row["pool"], str(row["jobs"]), row["charged_su"], row["draft_su"],
            row["change_percent"] or "-",
        ]  # fmt: skip
        if currency:
            cells += [row["current_money"], row["draft_money"]]
        if row["unpriced_jobs"]:
            cells[-1] += f"  ({row['unpriced_jobs']} jobs unpriced: {'; '.join(row['problems'])})"
        rows.append(cells)
    lines += _columns([header, *rows]) if rows else ["No charged jobs in the period."]
    if currency:
        lines += ["", f"Money: {payload['money_note']}."]
    lines += ["", "Budget periods that would run out earlier:"]
    earlier = payload["earlier_exhaustion"]
    if earlier:
        lines += _columns(
            [["project", "pool", "remaining SU", "runs out", "under the draft", "days earlier"]]
            + [
                [
                    item["project"], item["pool"], item["remaining_su"],
                    item["exhaustion"] or f"after {item['period_end']}",
                    item["draft_exhaustion"], str(item["days_earlier"]),
                ]
                for item in earlier
            ]
        )  # fmt: skip
    else:
        lines.append("  none")
    lines += ["", "TRESBillingWeights lines in slurm.conf that change:"]
    for line in payload["tres_billing_weights"]:
        lines += [f"- {line['before']}" if line["before"] else "- (new partition)"]
        lines += [f"+ {line['after']}"]
    if not payload["tres_billing_weights"]:
        lines.append("  none")
    return "\n".join(lines) + "\n"


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[index]) for row in rows) for index in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]  # fmt: skip

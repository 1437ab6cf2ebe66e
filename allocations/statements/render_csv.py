"""A statement as CSV (docs/costs.md, "Statements"): one table, a record per row, amounts as
the ledger keeps them (six places of SU, money unrounded), so a spreadsheet sums to the ledger.
Pure; written through ``kit.csv_export`` like every CSV of the portal."""

from __future__ import annotations

import io
from typing import Any

from allocations.statements.assembly import Statement
from kit.csv_export import csv_writer

COLUMNS = (
    "record", "project", "pool", "date", "kind", "description",
    "jobs", "node_hours", "energy_kwh", "service_units", "cost", "currency",
)  # fmt: skip


def _row(record: str, **cells: Any) -> list[Any]:
    return [record, *(cells.get(name, "") for name in COLUMNS[1:])]


def statement_csv(statement: Statement) -> bytes:
    """The statement's rows: ``statement`` (title and status), per pool ``opening``, each
    ``line`` and ``closing``; per cost model ``money``; then the ``total`` rows."""
    figures = statement.figures
    out = io.StringIO()
    writer = csv_writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerow(
        _row("statement", date=figures.issued_on.isoformat(), kind=statement.status,
             description=f"{figures.centre_name}: {statement.title}")
    )  # fmt: skip
    for project in statement.projects:
        code = project.figures.code
        for pool in project.pools:
            first, last = figures.month.isoformat(), statement.month_last_day.isoformat()
            writer.writerow(
                _row("opening", project=code, pool=pool.pool, date=first,
                     description="opening balance", service_units=pool.opening_su)
            )  # fmt: skip
            for line in pool.lines:
                writer.writerow(
                    _row("line", project=code, pool=pool.pool, date=line.day.isoformat(),
                         kind=line.kind.value, description=line.description,
                         jobs="" if line.jobs is None else line.jobs,
                         service_units=line.amount_su)
                )  # fmt: skip
            writer.writerow(
                _row("closing", project=code, pool=pool.pool, date=last,
                     description="closing balance", service_units=pool.closing_su)
            )  # fmt: skip
        for money in project.money:
            writer.writerow(
                _row("money", project=code, kind=money.cost_model or "no cost model",
                     jobs=money.jobs, node_hours=money.node_hours, energy_kwh=money.energy_kwh,
                     cost=money.cost if money.currency else "", currency=money.currency)
            )  # fmt: skip
    totals = [
        ("opening", statement.opening_su), ("adjustments", statement.adjustments_su),
        ("charged", statement.charged_su), ("closing", statement.closing_su),
    ]  # fmt: skip
    for kind, amount in totals:
        writer.writerow(_row("total", kind=kind, service_units=amount))
    writer.writerow(_row("total", kind="jobs", jobs=statement.jobs_count))
    for currency, cost in statement.cost_by_currency().items():
        writer.writerow(_row("total", kind="cost", cost=cost, currency=currency))
    return out.getvalue().encode()

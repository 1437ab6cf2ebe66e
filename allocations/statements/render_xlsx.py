"""A statement as XLSX (docs/costs.md, "Statements"), with openpyxl: a ``Summary`` sheet (the
header, per project and pool the opening balance, every line and the closing balance, the
money by cost model, the totals) and a ``Jobs`` sheet (one row per job of the month). Amounts
are numeric cells holding the ledger's figures (shown to two places), days and times are date
cells, so a finance office can sum and filter them. Pure."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from openpyxl import Workbook
from openpyxl.styles import Font
from openpyxl.worksheet.worksheet import Worksheet

from allocations.statements.assembly import Statement

_AMOUNT = "#,##0.00"
_COUNT = "#,##0"
_DAY = "yyyy-mm-dd"
_TIME = "yyyy-mm-dd hh:mm:ss"
_BOLD = Font(bold=True)

JOB_COLUMNS = (
    "Job", "Project", "Cluster", "Partition", "User", "State", "Charge", "Start (UTC)",
    "End (UTC)", "Nodes", "Node-hours", "SU", "Energy kWh", "Cost", "Currency", "Cost model",
)  # fmt: skip


def _utc(moment: datetime | None) -> datetime | None:
    """A spreadsheet's date cell has no time zone: UTC, as the column's heading says."""
    return None if moment is None else moment.astimezone(UTC).replace(tzinfo=None)


def _append(sheet: Worksheet, row: list[Any], formats: dict[int, str] | None = None) -> None:
    sheet.append(row)
    for column, number_format in (formats or {}).items():
        sheet.cell(row=sheet.max_row, column=column).number_format = number_format


def _heading(sheet: Worksheet, row: list[str]) -> None:
    sheet.append(row)
    for cell in sheet[sheet.max_row]:
        cell.font = _BOLD


def _summary(sheet: Worksheet, statement: Statement) -> None:
    figures = statement.figures
    sheet.append([figures.centre_name])
    sheet["A1"].font = _BOLD
    sheet.append([figures.centre_address.replace("\n", ", ")])
    sheet.append([statement.title])
    _append(sheet, ["Month", figures.month], {2: "yyyy-mm"})
    _append(sheet, ["Issued", figures.issued_on], {2: _DAY})
    sheet.append(["Status", statement.status])
    sheet.append([])
    _heading(sheet, ["Project", "Pool", "Date", "Kind", "Description", "Jobs", "SU"])
    amounts = {3: _DAY, 6: _COUNT, 7: _AMOUNT}
    for project in statement.projects:
        code = project.figures.code
        for pool in project.pools:
            _append(
                sheet,
                [code, pool.pool, figures.month, "opening", "opening balance", None,
                 pool.opening_su],
                amounts,
            )  # fmt: skip
            for line in pool.lines:
                _append(
                    sheet,
                    [code, pool.pool, line.day, line.kind.value, line.description, line.jobs,
                     line.amount_su],
                    amounts,
                )  # fmt: skip
            _append(
                sheet,
                [code, pool.pool, statement.month_last_day, "closing", "closing balance", None,
                 pool.closing_su],
                amounts,
            )  # fmt: skip
    sheet.append([])
    _heading(
        sheet, ["Project", "Cost model", "Jobs", "Node-hours", "Energy kWh", "Cost", "Currency"]
    )
    for project in statement.projects:
        for money in project.money:
            _append(
                sheet,
                [project.figures.code, money.cost_model or "not priced (no cost model)",
                 money.jobs, money.node_hours, money.energy_kwh,
                 money.cost if money.currency else None, money.currency],
                {3: _COUNT, 4: _AMOUNT, 5: _AMOUNT, 6: _AMOUNT},
            )  # fmt: skip
    sheet.append([])
    _heading(sheet, ["Total", "Amount", "Unit"])
    totals: list[tuple[str, Decimal | int, str]] = [
        ("Opening balance", statement.opening_su, "SU"),
        ("Adjustments", statement.adjustments_su, "SU"),
        ("Charged", statement.charged_su, "SU"),
        ("Closing balance", statement.closing_su, "SU"),
        ("Jobs", statement.jobs_count, "jobs"),
    ]
    totals += [("Cost", cost, currency) for currency, cost in statement.cost_by_currency().items()]
    for label, amount, unit in totals:
        _append(sheet, [label, amount, unit], {2: _COUNT if unit == "jobs" else _AMOUNT})
    sheet.column_dimensions["A"].width = 18
    sheet.column_dimensions["E"].width = 60


def _jobs(sheet: Worksheet, statement: Statement) -> None:
    _heading(sheet, list(JOB_COLUMNS))
    formats = {8: _TIME, 9: _TIME, 10: _COUNT, 11: _AMOUNT, 12: _AMOUNT, 13: _AMOUNT, 14: _AMOUNT}
    for project in statement.projects:
        for job in project.jobs:
            _append(
                sheet,
                [job.job_id, project.figures.code, job.cluster, job.partition, job.username,
                 job.state, job.charge_state, _utc(job.start), _utc(job.end), job.nodes,
                 job.node_hours, job.service_units, job.energy_wh / 1000, job.cost,
                 job.currency, job.cost_model],
                formats,
            )  # fmt: skip
    sheet.freeze_panes = "A2"


def statement_xlsx(statement: Statement) -> bytes:
    """The statement as an XLSX workbook's bytes."""
    workbook = Workbook()
    summary = workbook.active
    assert summary is not None  # a new workbook has its one sheet
    summary.title = "Summary"
    _summary(summary, statement)
    _jobs(workbook.create_sheet("Jobs"), statement)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()

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


class _Rows:
    """Appends rows to a sheet, each cell with its number format. Counts its rows itself:
    openpyxl's ``max_row`` walks every cell, which made a sheet of n rows cost n²."""

    def __init__(self, sheet: Worksheet) -> None:
        self.sheet = sheet
        self.row = 0

    def add(self, values: list[Any], formats: dict[int, str] | None = None) -> None:
        self.row += 1
        for column, value in enumerate(values, start=1):
            if value is None:
                continue
            cell = self.sheet.cell(row=self.row, column=column, value=value)
            if isinstance(value, str) and value.startswith("="):
                cell.data_type = "s"  # text, never a formula (a Slurm user, a reason)
            if formats and column in formats:
                cell.number_format = formats[column]

    def heading(self, values: list[str]) -> None:
        self.add(values)
        for column in range(1, len(values) + 1):
            self.sheet.cell(row=self.row, column=column).font = _BOLD


def _summary(sheet: Worksheet, statement: Statement) -> None:
    figures = statement.figures
    rows = _Rows(sheet)
    rows.heading([figures.centre_name])
    rows.add([figures.centre_address.replace("\n", ", ")])
    rows.add([statement.title])
    rows.add(["Month", figures.month], {2: "yyyy-mm"})
    rows.add(["Issued", figures.issued_on], {2: _DAY})
    rows.add(["Status", statement.status])
    rows.add([])
    rows.heading(["Project", "Pool", "Date", "Kind", "Description", "Jobs", "SU"])
    amounts = {3: _DAY, 6: _COUNT, 7: _AMOUNT}
    for project in statement.projects:
        code = project.figures.code
        for pool in project.pools:
            rows.add(
                [code, pool.pool, figures.month, "opening", "opening balance", None,
                 pool.opening_su],
                amounts,
            )  # fmt: skip
            for line in pool.lines:
                rows.add(
                    [code, pool.pool, line.day, line.kind.value, line.description, line.jobs,
                     line.amount_su],
                    amounts,
                )  # fmt: skip
            rows.add(
                [code, pool.pool, statement.month_last_day, "closing", "closing balance", None,
                 pool.closing_su],
                amounts,
            )  # fmt: skip
    rows.add([])
    rows.heading(["Project", "Cost model", "Jobs", "Node-hours", "Energy kWh", "Cost", "Currency"])
    for project in statement.projects:
        for money in project.money:
            rows.add(
                [project.figures.code, money.cost_model or "not priced (no cost model)",
                 money.jobs, money.node_hours, money.energy_kwh,
                 money.cost if money.currency else None, money.currency],
                {3: _COUNT, 4: _AMOUNT, 5: _AMOUNT, 6: _AMOUNT},
            )  # fmt: skip
    rows.add([])
    rows.heading(["Total", "Amount", "Unit"])
    totals: list[tuple[str, Decimal | int, str]] = [
        ("Opening balance", statement.opening_su, "SU"),
        ("Adjustments", statement.adjustments_su, "SU"),
        ("Charged", statement.charged_su, "SU"),
        ("Closing balance", statement.closing_su, "SU"),
        ("Jobs", statement.jobs_count, "jobs"),
    ]
    totals += [("Cost", cost, currency) for currency, cost in statement.cost_by_currency().items()]
    for label, amount, unit in totals:
        rows.add([label, amount, unit], {2: _COUNT if unit == "jobs" else _AMOUNT})
    sheet.column_dimensions["A"].width = 18
    sheet.column_dimensions["E"].width = 60


def _jobs(sheet: Worksheet, statement: Statement) -> None:
    rows = _Rows(sheet)
    rows.heading(list(JOB_COLUMNS))
    formats = {8: _TIME, 9: _TIME, 10: _COUNT, 11: _AMOUNT, 12: _AMOUNT, 13: _AMOUNT, 14: _AMOUNT}
    for project in statement.projects:
        for job in project.jobs:
            rows.add(
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

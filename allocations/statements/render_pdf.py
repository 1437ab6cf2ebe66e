"""A statement as PDF (docs/costs.md, "Statements"), with ReportLab like the decision letters
(``allocations.rounds.letters``): the centre's name and address, the statement's status, per
project and pool the opening balance, every line and the closing balance, the money by cost
model and the totals. Pure; the same statement gives the same bytes (``invariant``)."""

from __future__ import annotations

import io
from decimal import Decimal
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import Flowable, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from allocations.statements.assembly import ProjectStatement, Statement, cents, su_display


def su_text(amount: Decimal) -> str:
    """SU as the statement prints them: two places, thousands separated."""
    return f"{su_display(amount):,.2f}"


def money_text(amount: Decimal) -> str:
    return f"{cents(amount):,.2f}"


def _text(value: str) -> str:
    return escape(value).replace("\n", "<br/>")


_GRID = TableStyle(
    [
        ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
        ("FONTNAME", (0, -1), (-1, -1), "Helvetica-Bold"),
        ("FONTSIZE", (0, 0), (-1, -1), 8),
        ("ALIGN", (-2, 0), (-1, -1), "RIGHT"),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
        ("LINEABOVE", (0, -1), (-1, -1), 0.5, colors.black),
    ]
)


_MONEY_GRID = TableStyle(
    [
        ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
        ("FONTSIZE", (0, 0), (-1, -1), 8),
        ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
    ]
)


def _project_flowables(project: ProjectStatement, statement: Statement) -> list[Flowable]:
    styles = getSampleStyleSheet()
    cell = ParagraphStyle("cell", parent=styles["BodyText"], fontSize=8, leading=10)
    figures = project.figures
    story: list[Flowable] = [
        Paragraph(
            _text(f"Project {figures.code}: {figures.title}".rstrip(": ")), styles["Heading3"]
        ),
        Paragraph(
            _text(f"PI: {figures.pi_name or '-'} · Finance code: {figures.finance_code or '-'}"),
            cell,
        ),
    ]
    if not project.pools:
        story.append(Paragraph("No grant and no charges in the month.", cell))
    for pool in project.pools:
        rows: list[list[str | Paragraph]] = [
            ["Date", "Pool " + pool.pool + " (" + pool.cluster + ")", "Jobs", "SU"]
        ]
        rows.append(
            [f"{statement.figures.month:%Y-%m-%d}", "Opening balance", "", su_text(pool.opening_su)]
        )
        rows += [
            [
                f"{line.day:%Y-%m-%d}",
                Paragraph(_text(line.description), cell),
                "" if line.jobs is None else f"{line.jobs:,}",
                su_text(line.amount_su),
            ]
            for line in pool.lines
        ]
        rows.append(
            [
                f"{statement.month_last_day:%Y-%m-%d}",
                "Closing balance",
                "",
                su_text(pool.closing_su),
            ]
        )
        story += [
            Spacer(1, 2 * mm),
            Table(
                rows, colWidths=[22 * mm, 105 * mm, 15 * mm, 28 * mm], hAlign="LEFT", style=_GRID
            ),
        ]
    money: list[list[str | Paragraph]] = [
        ["Cost model", "Jobs", "Node-hours", "Energy kWh", "Cost"]
    ]
    money += [
        [
            Paragraph(_text(line.cost_model or "not priced (no cost model)"), cell),
            f"{line.jobs:,}",
            f"{line.node_hours:,.2f}",
            f"{line.energy_kwh:,.2f}",
            f"{money_text(line.cost)} {line.currency}" if line.currency else "-",
        ]
        for line in project.money
    ]
    if project.money:
        story += [
            Spacer(1, 3 * mm),
            Paragraph("<b>Money by cost model</b>", cell),
            Table(
                money,
                colWidths=[70 * mm, 15 * mm, 25 * mm, 25 * mm, 35 * mm],
                hAlign="LEFT",
                style=_MONEY_GRID,
            ),
        ]
    return story


def statement_pdf(statement: Statement) -> bytes:
    """The statement as PDF bytes (A4)."""
    figures = statement.figures
    styles = getSampleStyleSheet()
    body = styles["BodyText"]
    small = ParagraphStyle("small", parent=body, fontSize=8, textColor=colors.grey)
    warning = ParagraphStyle("warning", parent=body, textColor=colors.darkred)
    story: list[Flowable] = [
        Paragraph(f"<b>{_text(figures.centre_name)}</b>", body),
        Paragraph(_text(figures.centre_address), small),
        Spacer(1, 6 * mm),
        Paragraph(_text(statement.title), styles["Heading2"]),
        Paragraph(
            _text(
                f"Period {figures.month:%Y-%m-%d} to {statement.month_last_day:%Y-%m-%d}; "
                f"issued {figures.issued_on:%Y-%m-%d}"
            ),
            body,
        ),
        Paragraph(
            f"<b>Status: {_text(statement.status)}</b>", warning if figures.provisional else body
        ),
    ]
    for project in statement.projects:
        story += _project_flowables(project, statement)
    totals = [
        ["Total", "", ""],
        ["Opening balance", "SU", su_text(statement.opening_su)],
        ["Adjustments", "SU", su_text(statement.adjustments_su)],
        ["Charged", "SU", su_text(statement.charged_su)],
        ["Closing balance", "SU", su_text(statement.closing_su)],
        ["Jobs", "", f"{statement.jobs_count:,}"],
    ]
    totals += [
        ["Cost", currency, money_text(cost)]
        for currency, cost in statement.cost_by_currency().items()
    ]
    totals_style = TableStyle(
        [
            ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
            ("FONTSIZE", (0, 0), (-1, -1), 9),
            ("ALIGN", (2, 0), (2, -1), "RIGHT"),
            ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
        ]
    )
    story += [
        Spacer(1, 6 * mm),
        Table(totals, colWidths=[50 * mm, 25 * mm, 40 * mm], hAlign="LEFT", style=totals_style),
        Spacer(1, 6 * mm),
        Paragraph(
            _text(
                "SU are rounded to two places and money to the cent for print; the CSV and XLSX "
                "formats carry the ledger's figures."
            ),
            small,
        ),
    ]
    buffer = io.BytesIO()
    document = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        title=statement.title,
        author=figures.centre_name,
        invariant=True,
        leftMargin=18 * mm,
        rightMargin=18 * mm,
        topMargin=18 * mm,
        bottomMargin=18 * mm,
    )
    document.build(story)
    return buffer.getvalue()

"""The decision letter: one page of PDF saying what was decided on a request (docs/allocations.md,
"Decision letters").

Pure: ``letter_pdf`` turns a ``DecisionLetter`` (plain values, built by
``allocations.rounds.selectors.decision_letter_of``) into PDF bytes with ReportLab, a pure
Python library that needs no system libraries. The same letter gives the same bytes
(ReportLab's ``invariant`` mode: no creation time or random document id in the file).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle


@dataclass(frozen=True)
class LetterPool:
    """SU asked for and granted on one pool."""

    pool: str
    requested_su: Decimal
    granted_su: Decimal


@dataclass(frozen=True)
class DecisionLetter:
    centre_name: str
    centre_address: str  # lines separated by newlines
    decided_on: date  # the day of the decision
    request_id: int
    kind: str  # in words: "application", "renewal", "top-up", ...
    outcome: str  # in words: "granted", "partially granted", "rejected"
    project_code: str
    project_title: str
    pi_name: str
    round_name: str  # "" outside rounds
    pools: tuple[LetterPool, ...]
    period_first_day: date | None
    period_last_day: date | None
    reason: str  # the chair's reason; "" when granted as requested
    appealable: bool
    request_url: str  # the request's page, where an appeal starts
    final_because: str = ""  # why no appeal: "an appeal's decision is final", ...


def su_text(value: Decimal) -> str:
    """SU as the portal's pages show them: whole units with thousands separators."""
    return f"{value:,.0f}"


def letter_filename(*, project_code: str, request_id: int) -> str:
    return f"decision-{project_code}-{request_id}.pdf"


def _text(value: str) -> str:
    """Plain text for a ReportLab paragraph: its markup escaped, line breaks kept."""
    return escape(value).replace("\n", "<br/>")


def _appeal_text(letter: DecisionLetter) -> str:
    if letter.appealable:
        return (
            "You may appeal this decision once. The project's PI or a manager opens the "
            f'request in the portal, {letter.request_url}, chooses "Appeal this decision" and '
            "says what the committee should look at again."
        )
    why = f" ({letter.final_because})" if letter.final_because else ""
    return f"This decision cannot be appealed{why}."


def _period_text(letter: DecisionLetter) -> str:
    if letter.period_first_day is None or letter.period_last_day is None:
        return "-"
    return f"{letter.period_first_day:%Y-%m-%d} to {letter.period_last_day:%Y-%m-%d}"


def letter_pdf(letter: DecisionLetter) -> bytes:
    """The letter as PDF bytes (A4, one page for any ordinary request)."""
    styles = getSampleStyleSheet()
    body = styles["BodyText"]
    small = ParagraphStyle("small", parent=body, fontSize=8, textColor=colors.grey)
    title = ParagraphStyle("letter-title", parent=styles["Heading2"], spaceBefore=6 * mm)
    what = f"{letter.kind} {letter.request_id}"
    if letter.round_name:
        what += f" in {letter.round_name}"
    facts = [
        ["Project", f"{letter.project_code}: {letter.project_title}".rstrip(": ")],
        ["PI", letter.pi_name],
        ["Request", what],
        ["Decision", letter.outcome],
        ["Period", _period_text(letter)],
    ]
    grants = [["Pool", "Requested SU", "Granted SU"]] + [
        [item.pool, su_text(item.requested_su), su_text(item.granted_su)] for item in letter.pools
    ]
    grants.append(
        [
            "Total",
            su_text(sum((item.requested_su for item in letter.pools), Decimal(0))),
            su_text(sum((item.granted_su for item in letter.pools), Decimal(0))),
        ]
    )
    grid = TableStyle(
        [
            ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
            ("FONTNAME", (0, -1), (-1, -1), "Helvetica-Bold"),
            ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
            ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
            ("LINEABOVE", (0, -1), (-1, -1), 0.5, colors.black),
        ]
    )
    reason = letter.reason.strip() or "Granted as requested."
    story = [
        Paragraph(f"<b>{_text(letter.centre_name)}</b>", body),
        Paragraph(_text(letter.centre_address), small),
        Spacer(1, 8 * mm),
        Paragraph(f"{letter.decided_on:%Y-%m-%d}", body),
        Paragraph(
            _text(f"Decision on the {letter.kind} of {letter.project_code}: {letter.outcome}"),
            title,
        ),
        Table(
            [[Paragraph(f"<b>{_text(k)}</b>", body), Paragraph(_text(v), body)] for k, v in facts],
            colWidths=[30 * mm, 140 * mm],
            hAlign="LEFT",
        ),
        Spacer(1, 6 * mm),
        Table(grants, colWidths=[70 * mm, 50 * mm, 50 * mm], hAlign="LEFT", style=grid),
        Spacer(1, 6 * mm),
        Paragraph("<b>Reason</b>", body),
        Paragraph(_text(reason), body),
        Spacer(1, 4 * mm),
        Paragraph("<b>Appeal</b>", body),
        Paragraph(_text(_appeal_text(letter)), body),
        Spacer(1, 10 * mm),
        Paragraph(_text(f"{letter.centre_name}, allocation committee"), small),
    ]
    buffer = io.BytesIO()
    document = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        title=f"Decision on request {letter.request_id} of {letter.project_code}",
        author=letter.centre_name,
        invariant=True,
        leftMargin=20 * mm,
        rightMargin=20 * mm,
        topMargin=20 * mm,
        bottomMargin=20 * mm,
    )
    document.build(story)
    return buffer.getvalue()

"""A project's monthly statement, assembled from its figures (docs/costs.md, "Statements").

Pure: plain values in (``StatementFigures``, gathered by ``allocations.statements.selectors``),
a ``Statement`` out, which the three renderers (``render_pdf``, ``render_xlsx``,
``render_csv``) only lay out. Every total they print is computed here, once, so the three
formats cannot disagree.

Per pool, a statement reads like a bank statement: the opening balance on the month's first
day, every movement of the month as its own line (a budget period beginning, each refund,
top-up, transfer and correction, the SU charged per partition, the unused SU of a budget period
that ended), and the closing balance on its last day. ``opening + sum(lines) = closing`` holds
exactly (Decimal); the balances come from the one balance (``allocations.grants.selectors``),
so a statement that does not add up is refused rather than printed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum

from accounting.ledger.month import MonthJob
from kit.calendar import add_months, last_day
from kit.errors import ApplicationError

ZERO = Decimal(0)
CENT = Decimal("0.01")
QUANTUM = Decimal("0.000001")  # the ledger's six places of SU
_KWH = Decimal(1000)
_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")  # of a file name
FIRST_YEAR = 1970  # Slurm's clock starts at the epoch


class StatementError(ApplicationError):
    """A statement cannot be made as asked (a month in the future, an unknown finance code):
    the sentence says why; nothing is written."""


def month_parse(text: str, *, today: date) -> date:
    """``YYYY-MM`` as the first day of that month; a month that has not begun on ``today`` is
    refused (a month under way gives a provisional statement)."""
    found = _MONTH.fullmatch(text.strip())
    if found is None or not 1 <= int(found[2]) <= 12:
        raise StatementError(f"{text!r} is not a month: write it as YYYY-MM, e.g. 2026-10")
    if int(found[1]) < FIRST_YEAR:
        raise StatementError(f"{text} is before {FIRST_YEAR}: no ledger holds jobs that old")
    first = date(int(found[1]), int(found[2]), 1)
    if first > today:
        raise StatementError(
            f"{first:%Y-%m} has not begun yet: a statement covers a month that has begun"
        )
    return first


def recent_months(*, today: date, count: int = 6) -> list[date]:
    """The first days of the month of ``today`` and the ``count - 1`` before it, newest first:
    the statements the project page offers."""
    this_month = today.replace(day=1)
    return [add_months(this_month, -back) for back in range(count)]


class LineKind(StrEnum):
    BUDGET = "budget"  # a budget period begins: its budget and the SU carried into it
    REFUND = "refund"
    TOP_UP = "top_up"
    TRANSFER_IN = "transfer_in"
    TRANSFER_OUT = "transfer_out"
    CORRECTION = "correction"
    CHARGE = "charge"  # SU charged on a partition
    UNBUDGETED = "unbudgeted"  # charges on days no budget period covers: no balance pays them
    LAPSE = "lapse"  # a budget period ended: its unused SU lapse (or carry into the next)


ADJUSTMENT_KINDS = frozenset(
    {
        LineKind.REFUND,
        LineKind.TOP_UP,
        LineKind.TRANSFER_IN,
        LineKind.TRANSFER_OUT,
        LineKind.CORRECTION,
    }
)


@dataclass(frozen=True)
class Line:
    """One movement of a pool's SU in the month: positive adds SU, negative takes them."""

    day: date
    kind: LineKind
    description: str
    amount_su: Decimal
    jobs: int | None = None  # charge lines: how many jobs


@dataclass(frozen=True)
class PeriodSpan:
    """What the one balance says of a budget period that overlaps the month, cut at the
    month's edges: its SU available at the month's start (or at its own start, within the
    month) and at the month's end (or at its own end, within the month)."""

    start: date
    end: date  # the day after its last day
    at_start_su: Decimal
    at_end_su: Decimal
    used_in_month_su: Decimal
    carries_over: bool


@dataclass(frozen=True)
class PartitionCharge:
    partition: str
    cluster: str
    jobs: int
    service_units: Decimal


@dataclass(frozen=True)
class PoolFigures:
    pool: str
    cluster: str
    periods: tuple[PeriodSpan, ...]
    adjustments: tuple[Line, ...]
    charges: tuple[PartitionCharge, ...]


# The ledger's record of a job of the month (pure), held as it comes.
StatementJob = MonthJob


@dataclass(frozen=True)
class ProjectFigures:
    code: str
    title: str
    pi_name: str
    finance_code: str
    pools: tuple[PoolFigures, ...]
    jobs: tuple[StatementJob, ...]


@dataclass(frozen=True)
class StatementFigures:
    """A statement of one project, or of every project billed to one finance code."""

    centre_name: str
    centre_address: str  # lines separated by newlines
    month: date  # its first day
    issued_on: date
    provisional: bool
    projects: tuple[ProjectFigures, ...]
    finance_code: str = ""  # set for a statement of a finance code

    @property
    def subject(self) -> str:
        """Whose statement it is: the finance code's, else the one project's code."""
        if self.finance_code:
            return self.finance_code
        return self.projects[0].code if self.projects else ""


@dataclass(frozen=True)
class PoolStatement:
    pool: str
    cluster: str
    opening_su: Decimal
    lines: tuple[Line, ...]
    closing_su: Decimal

    @property
    def charged_su(self) -> Decimal:
        """The SU charged on the pool's partitions in the month (a positive figure)."""
        return -sum((line.amount_su for line in self.lines if line.kind == LineKind.CHARGE), ZERO)

    @property
    def adjustments_su(self) -> Decimal:
        return sum((line.amount_su for line in self.lines if line.kind in ADJUSTMENT_KINDS), ZERO)


@dataclass(frozen=True)
class MoneyLine:
    """The money of the month's jobs priced by one cost model version (or by none)."""

    cost_model: str  # "" for jobs no cost model priced
    currency: str
    jobs: int
    node_hours: Decimal
    energy_kwh: Decimal
    cost: Decimal


@dataclass(frozen=True)
class ProjectStatement:
    figures: ProjectFigures
    pools: tuple[PoolStatement, ...]
    money: tuple[MoneyLine, ...]

    @property
    def jobs(self) -> tuple[StatementJob, ...]:
        return self.figures.jobs


def _sum_su(amounts: list[Decimal]) -> Decimal:
    return sum(amounts, ZERO)


@dataclass(frozen=True)
class Statement:
    figures: StatementFigures
    projects: tuple[ProjectStatement, ...]

    @property
    def month_last_day(self) -> date:
        return last_day(add_months(self.figures.month, 1))

    @property
    def title(self) -> str:
        whose = "finance code" if self.figures.finance_code else "project"
        return f"Statement of {whose} {self.figures.subject} for {self.figures.month:%B %Y}"

    @property
    def status(self) -> str:
        """What every format says of the month: provisional while it may still change."""
        if self.figures.provisional:
            return (
                "PROVISIONAL: the month has not ended or its import may still change; "
                "the figures may change"
            )
        return "final"

    @property
    def pools(self) -> list[PoolStatement]:
        return [pool for project in self.projects for pool in project.pools]

    @property
    def money(self) -> list[MoneyLine]:
        return [line for project in self.projects for line in project.money]

    @property
    def jobs(self) -> list[StatementJob]:
        return [job for project in self.projects for job in project.jobs]

    @property
    def opening_su(self) -> Decimal:
        return _sum_su([pool.opening_su for pool in self.pools])

    @property
    def closing_su(self) -> Decimal:
        return _sum_su([pool.closing_su for pool in self.pools])

    @property
    def charged_su(self) -> Decimal:
        return _sum_su([pool.charged_su for pool in self.pools])

    @property
    def adjustments_su(self) -> Decimal:
        return _sum_su([pool.adjustments_su for pool in self.pools])

    @property
    def jobs_count(self) -> int:
        return sum(line.jobs for line in self.money)

    def cost_by_currency(self) -> dict[str, Decimal]:
        """The month's money per currency (jobs without a cost model carry none)."""
        totals: dict[str, Decimal] = defaultdict(Decimal)
        for line in self.money:
            if line.currency:
                totals[line.currency] += line.cost
        return dict(sorted(totals.items()))


def cents(amount: Decimal) -> Decimal:
    """Money as printed: to the cent, half up (the job cost meter's rounding)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def su_display(amount: Decimal) -> Decimal:
    """SU as printed: two places, half up (the ledger keeps six)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def _pool_statement(pool: PoolFigures, *, month: date, next_month: date) -> PoolStatement:
    """One pool's month: the opening balance, the movements in order of their day, and the
    closing balance, which must equal what the one balance says (else ``ValueError``)."""
    opening = ZERO
    closing = ZERO
    events: list[Line] = list(pool.adjustments)
    for span in pool.periods:
        if span.start <= month:
            opening += span.at_start_su
        else:
            events.append(
                Line(
                    span.start,
                    LineKind.BUDGET,
                    f"budget period from {span.start:%Y-%m-%d} begins (budget and SU carried in)",
                    span.at_start_su,
                )
            )
        if span.end >= next_month:
            closing += span.at_end_su
        else:
            fate = "carried over" if span.carries_over else "lapse"
            events.append(
                Line(
                    last_day(span.end),
                    LineKind.LAPSE,
                    f"budget period to {last_day(span.end):%Y-%m-%d} ends: unused SU {fate}",
                    -span.at_end_su,
                )
            )
    charged = sum((charge.service_units for charge in pool.charges), ZERO)
    unbudgeted = charged - sum((span.used_in_month_su for span in pool.periods), ZERO)
    if unbudgeted:
        events.append(
            Line(
                last_day(next_month),
                LineKind.UNBUDGETED,
                "charged on days no budget period covers (no balance pays them)",
                unbudgeted,
            )
        )
    charges = [
        Line(
            last_day(next_month),
            LineKind.CHARGE,
            f"charged on {charge.cluster}/{charge.partition}",
            -charge.service_units,
            jobs=charge.jobs,
        )
        for charge in pool.charges
    ]
    lines = tuple(sorted(events, key=lambda line: line.day)) + tuple(charges)
    if opening + sum((line.amount_su for line in lines), ZERO) != closing:
        raise ValueError(f"the statement of pool {pool.pool} does not balance")
    return PoolStatement(pool.pool, pool.cluster, opening, lines, closing)


def _money(jobs: tuple[StatementJob, ...]) -> tuple[MoneyLine, ...]:
    """The month's jobs summed per cost model version: jobs, node-hours, kWh and money."""
    groups: dict[tuple[str, str], list[StatementJob]] = defaultdict(list)
    for job in jobs:
        groups[(job.cost_model, job.currency)].append(job)
    return tuple(
        MoneyLine(
            cost_model=model,
            currency=currency,
            jobs=len(group),
            # node-seconds and Wh are summed exactly, then shown to the ledger's six places
            node_hours=sum((job.node_hours for job in group), ZERO).quantize(QUANTUM),
            energy_kwh=(sum((job.energy_wh for job in group), ZERO) / _KWH).quantize(QUANTUM),
            cost=sum((job.cost or ZERO for job in group), ZERO),
        )
        for (model, currency), group in sorted(groups.items(), key=lambda item: item[0])
    )


def statement_assemble(figures: StatementFigures) -> Statement:
    """The statement of ``figures``: per project, each pool's lines and balances and the money
    by cost model."""
    next_month = add_months(figures.month, 1)
    return Statement(
        figures=figures,
        projects=tuple(
            ProjectStatement(
                figures=project,
                pools=tuple(
                    _pool_statement(pool, month=figures.month, next_month=next_month)
                    for pool in project.pools
                ),
                money=_money(project.jobs),
            )
            for project in figures.projects
        ),
    )


def statement_filename(*, code: str, month: date, extension: str) -> str:
    """``statement-<code>-<YYYY-MM>.<extension>``; ``code`` is a project's or a finance code,
    any character but letters, digits, '.', '_' and '-' written '_' (a finance code's '/')."""
    return f"statement-{_UNSAFE.sub('_', code).lstrip('.')}-{month:%Y-%m}.{extension}"

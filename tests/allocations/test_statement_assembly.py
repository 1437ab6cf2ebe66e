"""The pure assembly of statements (allocations/statements/assembly.py): no database."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from openpyxl import load_workbook

from allocations.statements.assembly import (
    Line,
    LineKind,
    PartitionCharge,
    PeriodSpan,
    PoolFigures,
    ProjectFigures,
    StatementFigures,
    StatementJob,
    recent_months,
    statement_assemble,
    statement_filename,
)
from allocations.statements.render_xlsx import statement_xlsx

OCTOBER = date(2026, 10, 1)


def _figures(pool: PoolFigures, jobs: tuple[StatementJob, ...] = ()) -> StatementFigures:
    return StatementFigures(
        centre_name="C", centre_address="A", month=OCTOBER, issued_on=date(2026, 11, 2),
        provisional=False,
        projects=(ProjectFigures("p1", "T", "PI", "", (pool,), jobs),),
    )  # fmt: skip


def _pool(closing: Decimal) -> PoolFigures:
    return PoolFigures(
        pool="cpu", cluster="c",
        periods=(PeriodSpan(date(2026, 7, 1), date(2027, 1, 1), Decimal(80), closing,
                            Decimal(30), carries_over=False),),
        adjustments=(Line(date(2026, 10, 5), LineKind.TOP_UP, "top-up", Decimal(10)),),
        charges=(PartitionCharge("work", "c", 4, Decimal(30)),),
    )  # fmt: skip


def test_a_pool_closes_on_its_opening_plus_every_line():
    statement = statement_assemble(_figures(_pool(Decimal(60))))
    (pool,) = statement.pools
    assert (pool.opening_su, pool.charged_su, pool.adjustments_su) == (80, 30, 10)
    assert pool.closing_su == 60
    assert statement.title == "Statement of project p1 for October 2026"
    assert statement.status == "final"


def test_a_statement_that_does_not_add_up_is_refused_rather_than_printed():
    with pytest.raises(ValueError, match="pool cpu does not balance"):
        statement_assemble(_figures(_pool(Decimal(61))))


def test_money_is_grouped_per_cost_model_and_summed_per_currency():
    def job(number: int, model: str, currency: str, cost: str | None) -> StatementJob:
        end = datetime(2026, 10, 3, tzinfo=UTC)
        return StatementJob(
            str(number), "c", "work", "u", "COMPLETED", "charged", None, end, 7200, 2,
            Decimal(1), Decimal(500), None if cost is None else Decimal(cost), model, currency,
        )  # fmt: skip

    jobs = (job(1, "c v1 a", "Euro", "1.5"), job(2, "c v1 a", "Euro", "2.25"), job(3, "", "", None))
    statement = statement_assemble(_figures(_pool(Decimal(60)), jobs))
    priced, unpriced = sorted(statement.money, key=lambda line: line.cost_model, reverse=True)
    assert (priced.jobs, priced.node_hours, priced.energy_kwh, priced.cost) == (
        2,
        8,
        1,
        Decimal("3.75"),
    )
    assert (unpriced.cost_model, unpriced.jobs) == ("", 1)
    assert statement.cost_by_currency() == {"Euro": Decimal("3.75")}
    assert statement.jobs_count == 3


def test_text_that_looks_like_a_formula_stays_text_in_the_xlsx():
    end = datetime(2026, 10, 3, tzinfo=UTC)
    job = StatementJob(
        "1", "c", "work", '=HYPERLINK("http://x","y")', "COMPLETED", "charged", end, end, 60, 1,
        Decimal(1), Decimal(5), Decimal("0.5"), "c v1 a", "Euro",
    )  # fmt: skip
    book = load_workbook(
        io.BytesIO(statement_xlsx(statement_assemble(_figures(_pool(Decimal(60)), (job,)))))
    )
    user = book["Jobs"]["E2"]
    assert user.data_type == "s"
    assert user.value == '=HYPERLINK("http://x","y")'
    assert book["Jobs"]["H2"].is_date
    assert book["Jobs"]["L2"].data_type == "n"


def test_the_page_offers_this_month_and_the_five_before():
    assert recent_months(today=date(2026, 2, 14))[:3] == [
        date(2026, 2, 1), date(2026, 1, 1), date(2025, 12, 1),
    ]  # fmt: skip
    assert len(recent_months(today=date(2026, 2, 14))) == 6


def test_a_finance_codes_slash_is_kept_out_of_the_file_name():
    assert statement_filename(code="FIN/7", month=OCTOBER, extension="pdf") == (
        "statement-FIN_7-2026-10.pdf"
    )
    assert statement_filename(code="../x y", month=OCTOBER, extension="csv") == (
        "statement-_x_y-2026-10.csv"
    )

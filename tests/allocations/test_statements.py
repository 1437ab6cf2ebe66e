"""Monthly statements (docs/costs.md, "Statements"): the three formats give the ledger's totals
to the cent and the SU (the PDF read back with pypdf, the XLSX with openpyxl, the CSV parsed),
opening + lines = closing per pool, a finance code's statement covers exactly its projects,
who may read them, and bad input refused with nothing written."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum
from django.test import Client
from openpyxl import load_workbook
from pypdf import PdfReader
from rest_framework.test import APIClient

from accounting.costs.services import cost_model_version_create
from accounting.ledger.pipeline import jobs_import
from accounting.models import ImportRun, Job
from allocations.grants.selectors import balance_for_period, balance_get
from allocations.grants.services import (
    adjustment_refund,
    adjustment_top_up,
    adjustment_transfer,
    allocation_grant,
)
from allocations.models import Adjustment, BudgetPeriod
from allocations.statements.assembly import (
    LineKind,
    StatementError,
    cents,
    month_parse,
    su_display,
)
from allocations.statements.render_csv import statement_csv
from allocations.statements.render_pdf import money_text, statement_pdf, su_text
from allocations.statements.render_xlsx import statement_xlsx
from allocations.statements.selectors import finance_statement_get, statement_get
from projects.models import Project, ResourcePool
from tests.allocations.conftest import ROOT, SAMPLE
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

OCTOBER = date(2026, 10, 1)
HEADER = (SAMPLE / "sacct_all_duplicates.psv").read_text().splitlines()[0]


def _line(
    job_id: int, account: str, end: str, *, seconds: int, cpus: int, joules: int = 0,
    partition: str = "work", node: str = "nid1001",
) -> str:  # fmt: skip
    """A finished job of ``cpus`` cores on ``node`` ending at ``end`` (UTC, the cluster's zone)."""
    ends = datetime.fromisoformat(end)
    start = datetime.fromtimestamp(ends.timestamp() - seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    hours, rest = divmod(seconds, 3600)
    tres = f"billing={cpus},cpu={cpus},mem=1914M,node=1"
    return (
        f"{job_id}|{job_id}|job{job_id}|alice|{account}|{partition}|normal|COMPLETED|0:0|{start}|"
        f"{start}|{end}|{hours:02d}:{rest // 60:02d}:{rest % 60:02d}|{seconds}|1|{cpus}|{node}|"
        f"{tres}|{tres}|1914M|{joules}|600"
    )


def _at(day: date, adjustment: Adjustment | Iterable[Adjustment]) -> None:
    """Record an adjustment as made on ``day`` (the service stamps it now)."""
    items = [adjustment] if isinstance(adjustment, Adjustment) else list(adjustment)
    Adjustment.objects.filter(pk__in=[item.pk for item in items]).update(
        created_at=datetime.combine(day, datetime.min.time(), tzinfo=UTC).replace(hour=12)
    )


@dataclass
class Ledger:
    centre: object
    p1: Project
    p2: Project
    p3: Project


@pytest.fixture
def ledger(centre) -> Ledger:
    """Three projects with grants, jobs before, in and after October 2026, and every kind of
    adjustment: p1 a grant over the month (a top-up, a refund, a transfer out, a correction in
    October, a top-up in November); p3 a grant that ends on 9 October and another that begins
    on 15 October, with a job on a day between them; p2 the transfer's other side."""
    text = (ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text()
    cost_model_version_create(cluster=centre.cluster, name="demo", text=text)
    staff, cpu = centre.staff, centre.cpu
    for project, start, end, amount in [
        (centre.p1, date(2026, 10, 1), date(2027, 10, 1), 400),
        (centre.p2, date(2026, 10, 1), date(2027, 10, 1), 400),
        (centre.p3, date(2026, 8, 10), date(2026, 10, 10), 100),
        (centre.p3, date(2026, 10, 15), date(2027, 4, 15), 200),
    ]:
        allocation_grant(
            project=project, pool=cpu, amount=Decimal(amount), period_start=start,
            period_end=end, actor=staff,
        )  # fmt: skip
    lines = [
        HEADER,
        _line(9001, "pawsey0001", "2026-09-30T23:30:00", seconds=1800, cpus=8),
        _line(9002, "pawsey0001", "2026-10-01T00:10:00", seconds=3000, cpus=4, joules=720000),
        _line(9003, "pawsey0001", "2026-10-15T10:00:00", seconds=7200, cpus=16),
        _line(9004, "pawsey0001", "2026-10-31T23:59:00", seconds=600, cpus=2),
        _line(9005, "pawsey0001", "2026-11-02T08:00:00", seconds=3600, cpus=8),
        _line(9006, "pawsey0002", "2026-10-20T08:00:00", seconds=3600, cpus=3),
        _line(9007, "pawsey0003", "2026-10-03T08:00:00", seconds=3600, cpus=4),
        _line(9008, "pawsey0003", "2026-10-12T08:00:00", seconds=1800, cpus=6),
        _line(9009, "pawsey0003", "2026-10-20T08:00:00", seconds=5400, cpus=10),
    ]
    jobs_import(cluster=centre.cluster, lines=lines, source="statements")
    p1, p2, p3 = centre.p1, centre.p2, centre.p3
    _at(date(2026, 10, 5), adjustment_top_up(
        project=p1, pool=cpu, amount=Decimal(10), actor=staff, reason="campaign",
        on=date(2026, 10, 5),
    ))  # fmt: skip
    _at(date(2026, 10, 20), adjustment_refund(
        project=p1, pool=cpu, job=Job.objects.get(job_id="9003"), actor=staff,
        reason="node fault", on=date(2026, 10, 20),
    ))  # fmt: skip
    _at(date(2026, 10, 25), adjustment_transfer(
        source=p1, target=p2, pool=cpu, amount=Decimal("5.5"), actor=staff, reason="shared",
        on=date(2026, 10, 25),
    ))  # fmt: skip
    period = BudgetPeriod.objects.get(allocation__project=p1, start=date(2026, 10, 1))
    _at(date(2026, 10, 28), Adjustment.objects.create(
        project=p1, budget_period=period, kind=Adjustment.Kind.CORRECTION,
        amount_su=Decimal("-2.25"), actor=staff, reason="double-booked top-up",
    ))  # fmt: skip
    _at(date(2026, 11, 3), adjustment_top_up(
        project=p1, pool=cpu, amount=Decimal(7), actor=staff, reason="later", on=date(2026, 11, 3)
    ))  # fmt: skip
    for project, code in ((p1, "FIN-7/A"), (p3, "FIN-7/A"), (p2, "FIN-9")):
        Project.objects.filter(pk=project.pk).update(finance_code=code)
    return Ledger(centre, *(Project.objects.get(pk=p.pk) for p in (p1, p2, p3)))


def _october_jobs(project: Project):
    return Job.objects.filter(
        project=project,
        end__gte=datetime(2026, 10, 1, tzinfo=UTC),
        end__lt=datetime(2026, 11, 1, tzinfo=UTC),
    )


def _ledger_su(project: Project) -> Decimal:
    return _october_jobs(project).aggregate(total=Sum("service_units"))["total"]


def _ledger_cost(project: Project) -> Decimal:
    return _october_jobs(project).aggregate(total=Sum("cost"))["total"]


def _adjusted(project: Project, since: date, until: date) -> Decimal:
    return Adjustment.objects.filter(
        project=project, created_at__date__gte=since, created_at__date__lt=until
    ).aggregate(total=Sum("amount_su"))["total"]


# --- What a statement says ----------------------------------------------------------------


def test_opening_plus_adjustments_minus_charges_is_the_closing_balance(ledger):
    statement = statement_get(project=ledger.p1, month=OCTOBER)
    (pool,) = statement.pools
    assert pool.opening_su == Decimal(100)  # the quarter's budget: its period began on the 1st
    assert pool.charged_su == _ledger_su(ledger.p1)
    adjusted = _adjusted(ledger.p1, OCTOBER, date(2026, 11, 1))
    assert (
        pool.adjustments_su
        == adjusted
        == Decimal("10")
        + Job.objects.get(job_id="9003").service_units
        - Decimal("5.5")
        - Decimal("2.25")
    )
    assert pool.closing_su == pool.opening_su + adjusted - pool.charged_su
    assert pool.closing_su == pool.opening_su + sum(line.amount_su for line in pool.lines)
    kinds = [line.kind for line in pool.lines]
    assert kinds == [
        LineKind.TOP_UP, LineKind.REFUND, LineKind.TRANSFER_OUT, LineKind.CORRECTION,
        LineKind.CHARGE,
    ]  # fmt: skip
    (charge,) = [line for line in pool.lines if line.kind == LineKind.CHARGE]
    assert charge.jobs == 3
    assert "slurm-testbed/work" in charge.description


def test_the_closing_balance_of_the_month_under_way_is_the_balance_of_today(ledger):
    november = statement_get(project=ledger.p1, month=date(2026, 11, 1))
    balance = balance_get(project=ledger.p1, pool=ledger.centre.cpu)
    assert november.figures.provisional
    assert november.pools[0].closing_su == balance.remaining_su
    october = statement_get(project=ledger.p1, month=OCTOBER)
    assert november.pools[0].opening_su == october.pools[0].closing_su


def test_budget_periods_that_end_and_begin_in_the_month_are_lines_of_their_own(ledger):
    statement = statement_get(project=ledger.p3, month=OCTOBER)
    (pool,) = statement.pools
    lines = {line.kind: line for line in pool.lines}
    first = Job.objects.get(job_id="9007").service_units
    between = Job.objects.get(job_id="9008").service_units
    assert pool.opening_su == Decimal(100)  # the grant of August: one period, nothing used yet
    assert lines[LineKind.LAPSE].amount_su == -(Decimal(100) - first)
    assert lines[LineKind.LAPSE].day == date(2026, 10, 9)
    assert lines[LineKind.BUDGET].amount_su == Decimal(100)  # 200 SU over two quarters
    assert lines[LineKind.BUDGET].day == date(2026, 10, 15)
    assert lines[LineKind.UNBUDGETED].amount_su == between  # no grant on 12 October
    assert pool.charged_su == _ledger_su(ledger.p3)
    assert pool.closing_su == pool.opening_su + sum(line.amount_su for line in pool.lines)
    assert pool.closing_su == Decimal(100) - Job.objects.get(job_id="9009").service_units


def test_unused_su_carried_into_the_next_period_cancel_out_within_the_month(ledger):
    """On a pool that carries over, a budget period ending mid-month hands its unused SU to the
    next: the two lines cancel, and the closing balance is the one balance's."""
    gpu = ledger.centre.gpu
    ResourcePool.objects.filter(pk=gpu.pk).update(carry_over=True)
    allocation_grant(
        project=ledger.p2, pool=gpu, amount=Decimal(800), period_start=date(2026, 7, 15),
        period_end=date(2027, 7, 15), actor=ledger.centre.staff,
    )  # fmt: skip
    jobs_import(
        cluster=ledger.centre.cluster,
        lines=[HEADER, _line(9100, "pawsey0002-gpu", "2026-09-10T08:00:00", seconds=3600,
                             cpus=8, partition="gpu", node="nid2001"),
               _line(9101, "pawsey0002-gpu", "2026-10-20T08:00:00", seconds=1800, cpus=8,
                     partition="gpu", node="nid2001")],
        source="gpu",
    )  # fmt: skip
    statement = statement_get(project=ledger.p2, month=OCTOBER)
    (pool,) = [pool for pool in statement.pools if pool.pool == gpu.name]
    lines = {line.kind: line for line in pool.lines}
    before = Job.objects.get(job_id="9100").service_units
    assert pool.opening_su == Decimal(200) - before
    assert lines[LineKind.LAPSE].amount_su == -(Decimal(200) - before)
    assert "carried over" in lines[LineKind.LAPSE].description
    assert lines[LineKind.BUDGET].amount_su == Decimal(200) + Decimal(200) - before
    october = BudgetPeriod.objects.get(allocation__project=ledger.p2, allocation__pool=gpu,
                                       start=date(2026, 10, 15))  # fmt: skip
    assert pool.closing_su == balance_for_period(period=october, on=OCTOBER).remaining_su
    assert pool.charged_su == Job.objects.get(job_id="9101").service_units


def test_the_money_is_summed_per_cost_model_with_jobs_node_hours_and_energy(ledger):
    statement = statement_get(project=ledger.p1, month=OCTOBER)
    (money,) = statement.money
    jobs = list(_october_jobs(ledger.p1))
    assert money.cost_model == "slurm-testbed v1 demo"
    assert money.currency == "Euro"
    assert money.jobs == len(jobs) == 3
    assert money.cost == _ledger_cost(ledger.p1) > 0
    assert money.node_hours == Decimal(3000 + 7200 + 600) / 3600
    # 9002 has Slurm's measured 720 kJ = 0.2 kWh; the others the engine's estimate
    estimates = sum(job.energy_wh for job in jobs if job.job_id != "9002")
    assert money.energy_kwh == (Decimal("0.2") + estimates / 1000).quantize(Decimal("1e-6"))
    assert not statement.figures.provisional  # October has ended and an import ran since


def test_a_finance_codes_statement_covers_exactly_its_projects(ledger):
    statement = finance_statement_get(finance_code="FIN-7/A", month=OCTOBER)
    assert [project.figures.code for project in statement.projects] == ["pawsey0001", "pawsey0003"]
    assert statement.charged_su == _ledger_su(ledger.p1) + _ledger_su(ledger.p3)
    assert statement.cost_by_currency() == {
        "Euro": _ledger_cost(ledger.p1) + _ledger_cost(ledger.p3)
    }
    assert {job.job_id for job in statement.jobs} == {"9002", "9003", "9004", "9007", "9008",
                                                      "9009"}  # fmt: skip
    with pytest.raises(StatementError, match="no project has the finance code 'FIN-0'"):
        finance_statement_get(finance_code="FIN-0", month=OCTOBER)


# --- The three formats give the ledger's totals ---------------------------------------------


def _pdf_text(pdf: bytes) -> str:
    """The PDF's text as pypdf reads it, each run of white space one space (a table's cells
    come out one per line)."""
    pages = PdfReader(io.BytesIO(pdf)).pages
    return " ".join(" ".join(page.extract_text() for page in pages).split())


def test_the_pdf_prints_the_ledgers_totals_and_the_centre(ledger, settings):
    settings.PORTAL_CENTRE_NAME = "Example Centre"
    settings.PORTAL_CENTRE_ADDRESS = "1 Example Road|Perth WA 6000"
    statement = finance_statement_get(finance_code="FIN-7/A", month=OCTOBER)
    text = _pdf_text(statement_pdf(statement))
    assert "Example Centre" in text
    assert "1 Example Road" in text
    assert "Perth WA 6000" in text
    assert "Statement of finance code FIN-7/A for October 2026" in text
    assert "PROVISIONAL" not in text
    charged = _ledger_su(ledger.p1) + _ledger_su(ledger.p3)
    cost = _ledger_cost(ledger.p1) + _ledger_cost(ledger.p3)
    assert f"Charged SU {su_text(charged)}" in text
    assert f"Cost Euro {money_text(cost)}" in text
    assert f"Closing balance SU {su_text(statement.closing_su)}" in text
    assert f"Jobs {statement.jobs_count}" in text
    for line in statement.pools[0].lines:  # every adjustment a line of its own
        assert su_text(line.amount_su) in text


def test_a_month_under_way_says_provisional_in_every_format(ledger):
    statement = statement_get(project=ledger.p1, month=date(2026, 11, 1))
    assert "PROVISIONAL" in _pdf_text(statement_pdf(statement))
    assert "PROVISIONAL" in statement_csv(statement).decode()
    summary = load_workbook(io.BytesIO(statement_xlsx(statement)))["Summary"]
    assert summary["B6"].value.startswith("PROVISIONAL")


def test_a_month_stays_provisional_until_an_import_has_run_after_its_end(ledger):
    ImportRun.objects.update(finished_at=datetime(2026, 10, 31, 23, 0, tzinfo=UTC))
    assert statement_get(project=ledger.p1, month=OCTOBER).figures.provisional
    ImportRun.objects.update(finished_at=datetime(2026, 11, 1, 0, 5, tzinfo=UTC))
    assert not statement_get(project=ledger.p1, month=OCTOBER).figures.provisional


def test_the_xlsx_has_numeric_and_date_cells_that_sum_to_the_ledger(ledger):
    statement = statement_get(project=ledger.p1, month=OCTOBER)
    book = load_workbook(io.BytesIO(statement_xlsx(statement)))
    assert book.sheetnames == ["Summary", "Jobs"]
    summary = {row[0].value: row for row in book["Summary"].iter_rows() if row[0].value}
    assert summary["Month"][1].is_date
    assert summary["Month"][1].value == datetime(2026, 10, 1)
    assert summary["Issued"][1].is_date
    totals = {
        row[0].value: row[1]
        for row in book["Summary"].iter_rows()
        if row[0].value in {"Charged", "Closing balance", "Opening balance", "Cost", "Jobs"}
    }
    assert totals["Charged"].data_type == "n"
    assert su_display(Decimal(str(totals["Charged"].value))) == su_display(_ledger_su(ledger.p1))
    assert cents(Decimal(str(totals["Cost"].value))) == cents(_ledger_cost(ledger.p1))
    assert totals["Jobs"].value == 3
    jobs = list(book["Jobs"].iter_rows(min_row=2))
    assert [row[0].value for row in jobs] == ["9002", "9003", "9004"]
    for row in jobs:
        assert row[7].is_date
        assert row[8].is_date
        assert row[11].data_type == "n"
    assert jobs[0][8].value == datetime(2026, 10, 1, 0, 10)
    su = sum(Decimal(str(row[11].value)) for row in jobs)
    money = sum(Decimal(str(row[13].value)) for row in jobs)
    assert su_display(su) == su_display(_ledger_su(ledger.p1))
    assert cents(money) == cents(_ledger_cost(ledger.p1))


def test_the_csv_parses_to_the_ledgers_figures_exactly(ledger):
    statement = statement_get(project=ledger.p1, month=OCTOBER)
    rows = list(csv.DictReader(io.StringIO(statement_csv(statement).decode())))
    lines = [row for row in rows if row["record"] == "line"]
    charged = -sum(Decimal(row["service_units"]) for row in lines if row["kind"] == "charge")
    assert charged == _ledger_su(ledger.p1)  # exact: six places, as the ledger keeps them
    (opening,) = [row for row in rows if row["record"] == "opening"]
    (closing,) = [row for row in rows if row["record"] == "closing"]
    assert Decimal(opening["service_units"]) + sum(
        Decimal(row["service_units"]) for row in lines
    ) == Decimal(closing["service_units"])
    totals = {row["kind"]: row for row in rows if row["record"] == "total"}
    assert Decimal(totals["cost"]["cost"]) == _ledger_cost(ledger.p1)
    assert totals["cost"]["currency"] == "Euro"
    assert Decimal(totals["charged"]["service_units"]) == _ledger_su(ledger.p1)
    assert {row["kind"] for row in lines} >= {"refund", "top_up", "transfer_out", "correction"}


# --- Bad input ------------------------------------------------------------------------------


def test_a_month_is_written_yyyy_mm_and_has_begun():
    today = date(2026, 11, 28)
    assert month_parse("2026-11", today=today) == date(2026, 11, 1)
    for text, message in [
        ("2026-12", "2026-12 has not begun yet"),
        ("2026-13", "is not a month"),
        ("Oct 2026", "is not a month"),
        ("0000-01", "before 1970"),
    ]:
        with pytest.raises(StatementError, match=message):
            month_parse(text, today=today)


def test_the_command_writes_one_file_per_project_in_each_format(ledger, tmp_path):
    for file_format in ("pdf", "xlsx", "csv"):
        out = io.StringIO()
        call_command(
            "statements", "--month", "2026-10", "--format", file_format, "--out",
            str(tmp_path / file_format), stdout=out,
        )  # fmt: skip
        names = sorted(path.name for path in (tmp_path / file_format).iterdir())
        assert names == [f"statement-pawsey000{n}-2026-10.{file_format}" for n in (1, 2, 3, 4)]
        assert "4 statement(s) written" in out.getvalue()


def test_the_command_writes_one_statement_of_a_finance_code(ledger, tmp_path):
    call_command(
        "statements", "--month", "2026-10", "--finance-code", "FIN-7/A", "--format", "csv",
        "--out", str(tmp_path), stdout=io.StringIO(),
    )  # fmt: skip
    (path,) = tmp_path.iterdir()
    assert path.name == "statement-FIN-7_A-2026-10.csv"
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert {row["project"] for row in rows if row["project"]} == {"pawsey0001", "pawsey0003"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--month", "2099-01"], "2099-01 has not begun yet"),
        (["--month", "2026-10", "--finance-code", "NOPE"], "no project has the finance code"),
        (["--month", "2026-10", "--project", "nope0001"], "there is no project 'nope0001'"),
        (["--month", "2026-10", "--project", "pawsey0002", "--finance-code", "FIN-7/A"],
         "pawsey0002 is not billed to the finance code"),
    ],
)  # fmt: skip
def test_the_command_refuses_bad_input_and_writes_nothing(ledger, tmp_path, arguments, message):
    out = tmp_path / "out"
    with pytest.raises(CommandError, match=message):
        call_command("statements", *arguments, "--format", "pdf", "--out", str(out))
    assert not out.exists()


# --- Who may read a statement ---------------------------------------------------------------


def _api(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def test_the_pi_managers_and_staff_download_statements_in_the_three_formats(ledger):
    manager = UserFactory(username="mona")
    MembershipFactory(project=ledger.p1, user=manager, role="manager")
    url = "/api/v1/projects/pawsey0001/statements/2026-10"
    for user in (ledger.centre.alice, manager, ledger.centre.staff):
        pdf = _api(user).get(f"{url}.pdf")
        assert pdf.status_code == 200
        assert pdf["Content-Type"] == "application/pdf"
        assert 'filename="statement-pawsey0001-2026-10.pdf"' in pdf["Content-Disposition"]
        assert pdf.content.startswith(b"%PDF")
    xlsx = _api(ledger.centre.alice).get(f"{url}.xlsx")
    assert load_workbook(io.BytesIO(xlsx.content)).sheetnames == ["Summary", "Jobs"]
    rows = list(
        csv.DictReader(io.StringIO(_api(ledger.centre.alice).get(f"{url}.csv").content.decode()))
    )
    charged = [row for row in rows if row["record"] == "total" and row["kind"] == "charged"]
    assert Decimal(charged[0]["service_units"]) == _ledger_su(ledger.p1)


def test_others_may_not_read_a_projects_statement(ledger):
    url = "/api/v1/projects/pawsey0001/statements/2026-10.pdf"
    assert _api(None).get(url).status_code in {401, 403}
    assert _api(ledger.centre.bob).get(url).status_code == 404  # another project's PI
    member = UserFactory(username="mel")
    MembershipFactory(project=ledger.p1, user=member)
    refused = _api(member).get(url)
    assert refused.status_code == 403
    assert "only the PI or a manager of pawsey0001 reads its statements" in str(refused.json())


def test_a_month_to_come_is_a_400_with_the_sentence(ledger):
    answer = _api(ledger.centre.alice).get("/api/v1/projects/pawsey0001/statements/2099-01.csv")
    assert answer.status_code == 400
    assert "2099-01 has not begun yet" in str(answer.json())


def test_the_finance_code_is_set_by_staff_and_shown_in_the_project_api(ledger):
    staff = _api(ledger.centre.staff)
    answer = staff.patch("/api/v1/projects/pawsey0002/", {"finance_code": "CC-42"}, format="json")
    assert answer.status_code == 200, answer.content
    assert staff.get("/api/v1/projects/pawsey0002/").json()["finance_code"] == "CC-42"
    bad = staff.patch("/api/v1/projects/pawsey0002/", {"finance_code": "=SUM(A1)"}, format="json")
    assert bad.status_code == 400
    assert "finance code" in str(bad.json())
    assert Project.objects.get(code="pawsey0002").finance_code == "CC-42"


def test_the_project_page_offers_the_pi_the_statements_and_not_a_member(ledger):
    member = UserFactory(username="mel")
    MembershipFactory(project=ledger.p1, user=member)
    pages = {}
    for user in (ledger.centre.alice, member):
        client = Client()
        client.force_login(user)
        pages[user.username] = client.get("/allocations/projects/pawsey0001/").content.decode()
    assert "Monthly statements" in pages["alice"]
    month = date.today().replace(day=1)
    assert f"/api/v1/projects/pawsey0001/statements/{month:%Y-%m}.xlsx" in pages["alice"]
    assert "Monthly statements" not in pages["mel"]


def test_staff_set_a_projects_finance_code_on_its_staff_page(ledger):
    client = Client()
    client.force_login(ledger.centre.staff)
    url = "/allocations/staff/projects/pawsey0002/"
    assert 'name="finance_code"' in client.get(url).content.decode()
    form = {"title": "Genomics", "field_of_science": "", "finance_code": "CC-7", "pi": "bob"}
    assert client.post(url, form).status_code == 302
    assert Project.objects.get(code="pawsey0002").finance_code == "CC-7"
    refused = client.post(url, {**form, "finance_code": "-bad code"})
    assert refused.status_code == 400
    assert "a finance code is up to 64 letters" in refused.content.decode()
    assert Project.objects.get(code="pawsey0002").finance_code == "CC-7"


def test_a_project_added_in_the_admin_keeps_its_finance_code(db):
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin)
    answer = client.post(
        "/admin/projects/project/add/",
        {"code": "pawsey0099", "title": "T", "status": "active", "finance_code": "CC-9",
         "memberships-TOTAL_FORMS": 0, "memberships-INITIAL_FORMS": 0},
    )  # fmt: skip
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert Project.objects.get(code="pawsey0099").finance_code == "CC-9"


def test_an_adjustment_to_a_period_ended_before_the_month_is_carried_in_and_balances(ledger):
    """On a pool that carries over, a correction made in October to a budget period that ended
    in May reaches today's balance through the SU carried over: the statement lists it, its
    opening is the balance before it, and it adds up (it was refused, a 500 on the API)."""
    gpu = ledger.centre.gpu
    ResourcePool.objects.filter(pk=gpu.pk).update(carry_over=True)
    allocation_grant(
        project=ledger.p2, pool=gpu, amount=Decimal(800), period_start=date(2026, 3, 1),
        period_end=date(2027, 3, 1), actor=ledger.centre.staff,
    )  # fmt: skip
    ended = BudgetPeriod.objects.get(
        allocation__project=ledger.p2, allocation__pool=gpu, start=date(2026, 3, 1)
    )
    _at(date(2026, 10, 5), Adjustment.objects.create(
        project=ledger.p2, budget_period=ended, kind=Adjustment.Kind.CORRECTION,
        amount_su=Decimal("12.5"), actor=ledger.centre.staff, reason="May outage credited late",
    ))  # fmt: skip
    statement = statement_get(project=ledger.p2, month=OCTOBER)
    name = ResourcePool.objects.get(pk=gpu.pk).name
    (pool,) = [pool for pool in statement.pools if pool.pool == name]
    (late,) = [line for line in pool.lines if line.kind == LineKind.CORRECTION]
    assert late.amount_su == Decimal("12.5")
    assert late.day == date(2026, 10, 5)
    assert "carried" in late.description
    assert "2026-05-31" in late.description
    assert pool.opening_su == Decimal(600)  # three quarters carried in, before the correction
    assert pool.closing_su == pool.opening_su + sum(line.amount_su for line in pool.lines)
    today = BudgetPeriod.objects.get(
        allocation__project=ledger.p2, allocation__pool=gpu, start=date(2026, 9, 1)
    )
    assert pool.closing_su == balance_for_period(period=today, on=OCTOBER).remaining_su
    response = _api(ledger.centre.staff).get(
        f"/api/v1/projects/{ledger.p2.code}/statements/2026-10.csv"
    )
    assert response.status_code == 200

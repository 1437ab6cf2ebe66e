"""CSV formula injection (issue 32): a job named ``=HYPERLINK("http://x","y")`` (and OWASP's
other payloads) goes through every CSV the portal writes and comes out as text, while the
numbers beside it stay numbers. The helper itself and the scan for writers that bypass it are
in tests/kit/test_csv_export.py."""

from __future__ import annotations

import csv
from decimal import Decimal
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.test import Client

from accounting.clusters.pages import _tables_csv
from accounting.ledger.efficiency_pages import CSV_COLUMNS as EFFICIENCY_COLUMNS
from accounting.ledger.efficiency_pages import _csv as efficiency_csv
from accounting.utilisation.api import UtilisationCsvRenderer
from kit.charts import Chart
from tests.accounting.test_cost_commands import SIMPLE, make_job
from tests.factories import PartitionFactory, UserFactory
from tests.kit.test_csv_export import PAYLOADS

pytestmark = pytest.mark.django_db

NEUTRALISED = {"'" + payload for payload in PAYLOADS}


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(StringIO(text, newline="")))


def _column(text: str, name: str) -> set[str]:
    header, *rows = _rows(text)
    index = header.index(name)
    return {row[index] for row in rows}


@pytest.fixture
def partition():
    return PartitionFactory(cluster__name="mistral", name="compute")


@pytest.fixture
def jobs(partition):
    """A job per payload: the payload as its name (``sbatch -J``), its user and its job id."""
    made = []
    for number, payload in enumerate(PAYLOADS):
        job = make_job(
            partition, str(100 + number), "m10000", 3600, job_id=payload, job_name=payload,
            username=payload, service_units=Decimal(5),
        )  # fmt: skip
        made.append(job)
    return made


def test_the_jobs_page_csv_download(jobs):
    client = Client()
    client.force_login(UserFactory(username="ops", is_staff=True))
    response = client.get("/accounting/projects/bb1234/jobs/?format=csv")
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    assert _column(text, "job_name") == NEUTRALISED
    assert _column(text, "user") == NEUTRALISED
    assert _column(text, "job_id") == NEUTRALISED
    assert _column(text, "service_units") == {"5.000000"}  # a number, not text


def test_the_export_charges_command(jobs):
    out = StringIO()
    call_command("export_charges", "--cluster", "mistral", stdout=out)
    assert _column(out.getvalue(), "user") == NEUTRALISED
    assert _column(out.getvalue(), "job_id") == NEUTRALISED


def test_the_coststats_command_csv(jobs):
    out = StringIO()
    call_command(
        "coststats", "--model", SIMPLE, "--cluster", "mistral", "--end", "2017-09-11",
        "--quiet", "--csv", "--details", stdout=out, stderr=StringIO(),
    )  # fmt: skip
    assert _column(out.getvalue(), "job_id") == NEUTRALISED


def test_every_chart_table_download():
    chart = Chart(
        key="users", title="t", figure_json="{}", columns=("user", "su"),
        rows=[(payload, Decimal("-5")) for payload in PAYLOADS],
    )  # fmt: skip
    text = chart.csv_response("project").content.decode()
    assert _column(text, "user") == NEUTRALISED
    assert _column(text, "su") == {"-5"}


def test_the_utilisation_api_csv():
    rows = [["partition", "q"], *([payload, Decimal("-0.5")] for payload in PAYLOADS)]
    text = UtilisationCsvRenderer().render(rows).decode()
    assert _column(text, "partition") == NEUTRALISED
    assert _column(text, "q") == {"-0.5"}


def test_the_cost_ratio_tables_csv():
    context = {
        "models": [{"name": "gpu"}],
        "rows": [
            {"application": payload, "perf_ratio": Decimal(2), "cpu_charge": Decimal(1),
             "models": [{"gpu_charge": Decimal(-1), "cost_ratio": Decimal("0.5")}]}
            for payload in PAYLOADS
        ],
    }  # fmt: skip
    text = _tables_csv(context).content.decode()
    assert _column(text, "application") == NEUTRALISED
    assert _column(text, "gpu_gpu_charge_su") == {"-1"}


def test_the_efficiency_csv_per_user():
    totals = SimpleNamespace(**dict.fromkeys(EFFICIENCY_COLUMNS, Decimal("-1")))
    rows = [SimpleNamespace(key=payload, totals=totals) for payload in PAYLOADS]
    text = efficiency_csv("project-users", "user", rows).content.decode()
    assert _column(text, "user") == NEUTRALISED
    assert _column(text, "jobs") == {"-1"}

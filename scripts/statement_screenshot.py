"""Render the first page of a demo statement to docs/screenshots/statement.png (docs/costs.md).

    .venv/bin/python scripts/statement_screenshot.py

The statement is assembled from made-up figures by the portal's own pure assembly and PDF
renderer (``allocations.statements``), so the picture is exactly what the portal prints; the
page is rasterised with pypdfium2 (requirements-dev.txt). No database is needed.
"""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pypdfium2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from allocations.statements.assembly import (  # noqa: E402
    Line,
    LineKind,
    PartitionCharge,
    PeriodSpan,
    PoolFigures,
    ProjectFigures,
    StatementFigures,
    StatementJob,
    statement_assemble,
)
from allocations.statements.render_pdf import statement_pdf  # noqa: E402

OUT = ROOT / "docs" / "screenshots" / "statement.png"


def _job(
    number: int, partition: str, day: int, nodes: int, hours: int, su: str, cost: str
) -> StatementJob:
    end = datetime(2026, 10, day, 18, tzinfo=UTC)
    return StatementJob(
        job_id=str(4_412_000 + number), cluster="setonix", partition=partition, username="jsmith",
        state="COMPLETED", charge_state="charged", start=end.replace(hour=18 - hours), end=end,
        elapsed_seconds=hours * 3600, nodes=nodes, service_units=Decimal(su),
        energy_wh=Decimal(nodes * hours * 410), cost=Decimal(cost),
        cost_model="setonix v2 FY27", currency="AUD",
    )  # fmt: skip


def demo_figures() -> StatementFigures:
    work = [_job(n, "work", 2 + n, 2, 3, "768.000000", "4.112400") for n in range(6)]
    gpu = [_job(10 + n, "gpu", 10 + n, 1, 4, "2048.000000", "9.870000") for n in range(3)]
    cpu_charged = sum((job.service_units for job in work), Decimal(0))
    gpu_charged = sum((job.service_units for job in gpu), Decimal(0))
    cpu = PoolFigures(
        pool="Setonix CPU", cluster="setonix",
        periods=(PeriodSpan(date(2026, 10, 1), date(2027, 1, 1), Decimal(25000),
                            Decimal(25000) + Decimal(1536) - Decimal(2000) - cpu_charged,
                            cpu_charged, carries_over=False),),
        adjustments=(
            Line(date(2026, 10, 9), LineKind.REFUND, "refund: node failure: job 4412003",
                 Decimal(1536)),
            Line(date(2026, 10, 21), LineKind.TRANSFER_OUT,
                 "transfer out: to pawsey0117: joint campaign", Decimal(-2000)),
        ),
        charges=(PartitionCharge("work", "setonix", len(work), cpu_charged),),
    )  # fmt: skip
    gpu_pool = PoolFigures(
        pool="Setonix GPU", cluster="setonix",
        periods=(PeriodSpan(date(2026, 10, 1), date(2027, 1, 1), Decimal(12000),
                            Decimal(12000) + Decimal(4000) - gpu_charged, gpu_charged,
                            carries_over=False),),
        adjustments=(
            Line(date(2026, 10, 14), LineKind.TOP_UP, "top-up: granted top-up request 88",
                 Decimal(4000)),
        ),
        charges=(PartitionCharge("gpu", "setonix", len(gpu), gpu_charged),),
    )  # fmt: skip
    return StatementFigures(
        centre_name="Pawsey Supercomputing Research Centre",
        centre_address="1 Bryce Avenue\nKensington, Western Australia 6151",
        month=date(2026, 10, 1),
        issued_on=date(2026, 11, 2),
        provisional=False,
        projects=(
            ProjectFigures(
                code="pawsey0042", title="Ocean eddies at 1 km", pi_name="Jane Smith",
                finance_code="UWA-CC-4471", pools=(cpu, gpu_pool), jobs=tuple(work + gpu),
            ),
        ),
    )  # fmt: skip


def main() -> None:
    pdf = statement_pdf(statement_assemble(demo_figures()))
    document = pypdfium2.PdfDocument(pdf)
    image = document[0].render(scale=1.4).to_pil()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    image.save(OUT, optimize=True)
    print(f"wrote {OUT.relative_to(ROOT)} ({image.width}x{image.height})")


if __name__ == "__main__":
    main()

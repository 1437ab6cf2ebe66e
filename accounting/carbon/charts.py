"""Figure of a project's energy page: energy per month, measured and estimated, with the table
of :data:`ENERGY_COLUMNS`. Drawn with :mod:`kit.charts`; the page reads, this draws."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kit.charts import Chart, date_axis, embeddable, figure, say_empty, value_axis

ENERGY_COLUMNS = (
    "month", "cluster", "energy (kWh)", "measured (kWh)", "estimated (kWh)", "measured (%)",
    "CO2e (kg)", "grid intensity (g/kWh)", "jobs",
)  # fmt: skip
NOT_SET = "not set"


def energy_monthly(*, key: str, title: str, rows: Sequence[tuple[Any, ...]]) -> Chart:
    """Energy per month, measured and estimated stacked, from rows of ``ENERGY_COLUMNS``
    (month as an ISO day; a CO2e or intensity that is not set is ``NOT_SET``)."""
    measured: dict[str, float] = {}
    estimated: dict[str, float] = {}
    for row in rows:
        month = row[0]
        measured[month] = measured.get(month, 0.0) + float(row[3])
        estimated[month] = estimated.get(month, 0.0) + float(row[4])
    months = sorted(measured)
    fig = figure(
        title,
        360,
        barmode="stack",
        xaxis=date_axis("month", months, step="month"),
        yaxis=value_axis("energy (kWh)", (measured[m] + estimated[m] for m in months)),
        bargap=0.15,
    )
    for name, values in (("measured by Slurm", measured), ("estimated by the engine", estimated)):
        fig.add(
            {
                "type": "bar", "x": months, "y": [values[month] for month in months], "name": name,
                "hovertemplate": f"%{{x|%Y-%m}}<br>{name}: %{{y:,.1f}} kWh<extra></extra>",
            }
        )  # fmt: skip
    if not months:
        say_empty(fig, "No charged jobs in this window")
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=ENERGY_COLUMNS,
        rows=list(rows),
    )

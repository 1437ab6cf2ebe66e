"""Figures of the money cost distribution page (PeCoH report ch. 6, Figures 6.1-6.5): quantile
curves of job properties and the share of the cost held by the most expensive jobs. Drawn with
:mod:`kit.charts`; the page reads, these draw."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from kit.charts import MUTED, PALETTE, Chart, embeddable, figure, log_axis, say_empty


def cost_quantile_curve(
    *, key: str, title: str, axis_title: str, unit: str, points: Sequence[tuple[Decimal, Any]]
) -> Chart:
    """Quantile curve of one job property: x the quantile in %, y its value on a log axis
    (the report's Figures 6.1-6.3). Zero values cannot sit on a log axis and are left out of
    the curve (they stay in the data table)."""
    shown = [(float(p), float(v)) for p, v in points if v is not None and v > 0]
    fig = figure(
        title,
        340,
        xaxis={"title": {"text": "quantile (% of jobs)"}, "range": [0, 100], "ticksuffix": " %"},
        yaxis=log_axis(axis_title, (v for _, v in shown), rangemode="normal"),
        showlegend=False,
        margin={"l": 70, "r": 16, "t": 48, "b": 56},
    )
    fig.add(
        {
            "type": "scatter", "mode": "lines+markers",
            "x": [p for p, _ in shown], "y": [v for _, v in shown],
            "line": {"color": PALETTE[0], "width": 2}, "marker": {"size": 4},
            "hovertemplate": "%{x:.0f} % of jobs: at most %{y:,.4g} " + unit + "<extra></extra>",
        }
    )  # fmt: skip
    if not shown:
        say_empty(fig, "No jobs in this period")
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("quantile %", unit),
        rows=[(f"{p:f}", "" if v is None else f"{v:f}") for p, v in points],
        height=340,
    )


def cost_share_curve(
    *, key: str, points: Sequence[tuple[Decimal, int, Decimal | None]], currency: str
) -> Chart:
    """Cumulative share of the total cost held by the most expensive jobs (Figures 6.4-6.5):
    x the top % of jobs by cost, y their % of the summed cost."""
    title = "Share of the cost held by the most expensive jobs"
    fig = figure(
        title,
        380,
        xaxis={"title": {"text": "most expensive jobs (% of jobs)"}, "range": [0, 100],
               "ticksuffix": " %"},
        yaxis={"title": {"text": f"share of the total {currency} cost (%)"},
               "range": [0, 100.5], "ticksuffix": " %"},
        showlegend=False,
        margin={"l": 70, "r": 16, "t": 48, "b": 56},
    )  # fmt: skip
    shown = [(0.0, 0.0)] + [
        (float(top), float(share)) for top, _, share in points if share is not None
    ]
    fig.add(
        {
            "type": "scatter", "mode": "lines", "x": [x for x, _ in shown],
            "y": [y for _, y in shown], "line": {"color": PALETTE[1], "width": 2.5},
            "hovertemplate": "the top %{x:.1f} % of jobs: %{y:.1f} % of the cost<extra></extra>",
        }
    )  # fmt: skip
    fig.add(
        {
            "type": "scatter", "mode": "lines", "x": [0, 100], "y": [0, 100],
            "line": {"color": MUTED, "width": 1, "dash": "dot"}, "hoverinfo": "skip",
        }
    )  # fmt: skip
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("top % of jobs", "jobs", "% of cost"),
        rows=[
            (f"{top:f}", jobs, "" if share is None else f"{share:.4f}")
            for top, jobs, share in points
        ],
        height=380,
    )

"""Figures of the ledger's pages: the share of each node a job held (job detail), and SU charged
against right-sized and jobs by efficiency (efficiency pages). Drawn with :mod:`kit.charts`; the
pages read, these draw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from decimal import Decimal
from typing import Any

from kit.charts import PALETTE, Chart, date_axis, embeddable, figure, say_empty, su, value_axis

# --- Jobs -------------------------------------------------------------------------------------


def node_fractions(*, key: str, groups: Sequence[dict[str, Any]], dominant: str) -> Chart:
    """Per-node fractions of cores, memory and GPUs (in % of a node); the largest is charged."""
    resources = ("cores", "memory", "gpus")
    labels = {"cores": "cores", "memory": "memory", "gpus": "GPUs"}
    title = "Share of each node the job held"
    fig = figure(
        title,
        120 + 70 * len(groups),
        barmode="group",
        xaxis={"title": {"text": "percent of one node"}, "range": [0, 100], "ticksuffix": " %"},
        yaxis={"title": {"text": ""}, "autorange": "reversed", "automargin": True},
        showlegend=len(groups) > 1,
        margin={"l": 16, "r": 48, "t": 48, "b": 56 if len(groups) == 1 else 96},
    )
    rows = []
    for index, group in enumerate(groups):
        values = [float(group[name]) * 100 for name in resources]
        colours = [PALETTE[1] if name == dominant else "#9fb8c8" for name in resources]
        fig.add(
            {
                "type": "bar",
                "y": [labels[name] for name in resources], "x": values, "orientation": "h",
                "name": group["label"], "marker": {"color": colours},
                # Inside the bar when it fits there, else just past its end: a label never
                # runs past the plot's right edge, where the figure would cut it.
                "text": [bar_label(value) for value in values], "textposition": "auto",
                "insidetextanchor": "end", "cliponaxis": False, "constraintext": "none",
                "hovertemplate": "%{y}: %{x:.2f} % of a node<extra>" + group["label"] + "</extra>",
                "legendrank": index,
            }
        )  # fmt: skip
        rows.append((group["label"], *(f"{value:.4f}" for value in values)))
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("nodes", "cores %", "memory %", "GPUs %"),
        rows=rows,
        height=120 + 70 * len(groups),
    )


# --- Efficiency -------------------------------------------------------------------------------


def efficiency_months(
    *, key: str, months: Sequence[tuple[date, Decimal, Decimal, Decimal | None, Decimal | None]]
) -> Chart:
    """SU charged for the measured jobs of each month beside what right-sized requests would
    have cost; the gap is the SU left on the table. Rows: (month, charged, right-sized, CPU
    efficiency, memory efficiency) with the ratios 0-1 or None."""
    title = "SU charged and right-sized, per month"
    x = [month for month, *_ in months]
    fig = figure(
        title,
        340,
        barmode="group",
        xaxis=date_axis("month", x, step="month"),
        yaxis=value_axis("service units (SU)", (su(row[1]) for row in months)),
        bargap=0.2,
    )
    for index, (name, column) in enumerate((("charged", 1), ("right-sized", 2))):
        fig.add(
            {
                "type": "bar", "name": f"SU {name}", "x": x,
                "y": [su(row[column]) for row in months],  # type: ignore[arg-type]
                "marker": {"color": PALETTE[index]},
                "hovertemplate": f"%{{x|%Y-%m}}<br>{name}: %{{y:,.1f}} SU<extra></extra>",
            }
        )  # fmt: skip
    if not months:
        say_empty(fig, "No measured jobs in this period")
    rows = [
        (
            month.strftime("%Y-%m"), su(charged), su(right_sized), su(charged - right_sized),
            _percent(cpu), _percent(memory),
        )
        for month, charged, right_sized, cpu, memory in months
    ]  # fmt: skip
    return Chart(
        key=key, title=title, figure_json=embeddable(fig),
        columns=("month", "SU charged", "SU right-sized", "SU left on the table",
                 "CPU efficiency %", "memory efficiency %"),
        rows=rows, height=340,
    )  # fmt: skip


def _percent(ratio: Decimal | None) -> float | str:
    return "" if ratio is None else round(float(ratio) * 100, 1)


EFFICIENCY_METRICS = {"cpu": "CPU", "memory": "memory", "gpu": "GPU", "walltime": "walltime"}


def efficiency_histogram(*, key: str, distributions: Mapping[str, Sequence[int]]) -> Chart:
    """Measured jobs per tenth of each efficiency (under 10 %, 10-20 %, ... 90-100 %)."""
    title = "Jobs by efficiency"
    tenths = [f"{10 * tenth}-{10 * tenth + 10} %" for tenth in range(10)]
    fig = figure(
        title,
        340,
        barmode="group",
        xaxis={"title": {"text": "efficiency: used ÷ held"}},
        yaxis=value_axis(
            "jobs", (n for counts in distributions.values() for n in counts), integer=True
        ),
        bargap=0.15,
    )
    for index, (metric, label) in enumerate(EFFICIENCY_METRICS.items()):
        counts = list(distributions.get(metric, [0] * 10))
        if not any(counts):
            continue
        fig.add(
            {
                "type": "bar", "name": label, "x": tenths, "y": counts,
                "marker": {"color": PALETTE[index]},
                "hovertemplate": f"{label} %{{x}}: %{{y:,d}} jobs<extra></extra>",
            }
        )  # fmt: skip
    if not fig["data"]:
        say_empty(fig, "No measured jobs in this period")
    rows = [
        (tenths[tenth], *(distributions.get(metric, [0] * 10)[tenth]
                          for metric in EFFICIENCY_METRICS))
        for tenth in range(10)
    ]  # fmt: skip
    return Chart(
        key=key, title=title, figure_json=embeddable(fig),
        columns=("efficiency", *(f"{label} jobs" for label in EFFICIENCY_METRICS.values())),
        rows=rows, height=340,
    )  # fmt: skip


def bar_label(percent: float) -> str:
    """A share of a node as its bar's label: whole percent from 10 % (``100 %``, ``64 %``), one
    decimal below (``3.1 %``), so a label is short enough to sit inside its bar."""
    return f"{percent:.0f} %" if percent >= 10 else f"{percent:.1f} %"

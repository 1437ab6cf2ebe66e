"""Figures of the charging model's pages: a quote on every partition, and Figure 1 of the energy
paper in the cost ratio explorer. Drawn with :mod:`kit.charts`; the pages read, these draw."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from kit.charts import INK, PALETTE, Chart, embeddable, figure, su, value_axis

# --- Quotes -----------------------------------------------------------------------------------


def quote_comparison(*, key: str, rows: Sequence[tuple[str, Decimal, bool]]) -> Chart:
    """SU of the same job on every partition it fits on; the quoted one highlighted."""
    title = "The same job on each partition"
    fig = figure(
        title,
        120 + 44 * max(len(rows), 1),
        xaxis=value_axis("service units (SU)", (su(value) for _, value, _ in rows)),
        yaxis={"autorange": "reversed", "automargin": True},
        showlegend=False,
        margin={"l": 16, "r": 24, "t": 48, "b": 56},
    )
    fig.add(
        {
                "type": "bar",
            "y": [name for name, _, _ in rows], "x": [su(value) for _, value, _ in rows],
            "orientation": "h",
            "marker": {"color": [PALETTE[1] if chosen else PALETTE[0] for _, _, chosen in rows]},
            "hovertemplate": "%{y}: %{x:,.3f} SU<extra></extra>",
        }
    )  # fmt: skip
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("partition", "SU"),
        rows=[(name, su(value)) for name, value, _ in rows],
        height=120 + 44 * max(len(rows), 1),
    )


# --- Cost ratio explorer ----------------------------------------------------------------------

MODEL_LABELS = {"energy": "energy model", "sm": "SM model", "peak": "peak model"}
# What each model weighs a GPU node by, in plain words (the page's key to the labels).
MODEL_WORDS = {
    "energy": "by the power its GPUs draw",
    "sm": "by the GPUs' streaming multiprocessors (SM), one SU each, like a core",
    "peak": "by the GPUs' peak speed in FLOP/s",
}
MODEL_COLOURS = {"energy": PALETTE[2], "sm": PALETTE[0], "peak": PALETTE[1]}
MODEL_DASHES = {"energy": "solid", "sm": "dash", "peak": "dot"}


def figure1(
    *,
    key: str,
    series: dict[str, list[tuple[float, float]]],
    optimal: list[tuple[float, float]],
    shaded: Sequence[tuple[float, float]],
    my_speedup: float | None,
    table_speedups: Sequence[float] = (),
) -> Chart:
    """Figure 1 of the energy paper: energy of the SU-minimising choice against the speedup."""
    title = "Energy used when each model picks the node with fewer SU"
    fig = figure(
        title,
        400,
        xaxis={"title": {"text": "GPU speedup over one CPU node (\u00d7)"}},
        yaxis={"title": {"text": "energy (Wh)"}, "tickformat": ",.0f"},
        hovermode="x unified",
    )
    for low, high in shaded:
        fig.shape(
            type="rect", xref="x", yref="paper", x0=low, x1=high, y0=0, y1=1,
            fillcolor="rgba(47,158,68,0.13)", line={"width": 0}, layer="below",
        )  # fmt: skip
    if shaded:
        # From the band's left edge rightwards: centred on a phone's narrow band it ran over
        # the y axis' labels, and to the right the curves have fallen well above it.
        fig.annotate(
            x=shaded[0][0], xanchor="left", xshift=2, y=0.03, yref="paper", yanchor="bottom",
            text="only the energy model<br>picks the efficient node", showarrow=False,
            font={"size": 11, "color": "#23692f"}, bgcolor="rgba(255,255,255,0.75)",
        )  # fmt: skip
    if optimal:
        fig.add(
            {
                "type": "scatter",
                "x": [x for x, _ in optimal], "y": [y for _, y in optimal],
                "name": "lowest possible",
                "mode": "lines", "line": {"color": "#9aa5b1", "dash": "dot", "width": 1.5},
                "hovertemplate": "lowest possible: %{y:,.0f} Wh<extra></extra>",
            }
        )  # fmt: skip
    for model, points in series.items():
        fig.add(
            {
                "type": "scatter",
                "x": [x for x, _ in points], "y": [y for _, y in points],
                "name": MODEL_LABELS.get(model, model), "mode": "lines",
                "line": {"color": MODEL_COLOURS.get(model), "width": 3 if model == "energy" else 2,
                      "dash": MODEL_DASHES.get(model, "solid")},
                "hovertemplate": f"{MODEL_LABELS.get(model, model)}: %{{y:,.0f}} Wh<extra></extra>",
            }
        )  # fmt: skip
    if my_speedup is not None:
        fig.shape(
            type="line", xref="x", yref="paper", x0=my_speedup, x1=my_speedup, y0=0, y1=1,
            line={"color": INK, "dash": "dash", "width": 1.5},
        )  # fmt: skip
        fig.annotate(
            x=my_speedup, y=0.9, yref="paper", text=f"your application: {my_speedup:.3g}\u00d7",
            showarrow=False, xanchor="left", xshift=4, font={"size": 11},
            bgcolor="rgba(255,255,255,0.8)",
        )  # fmt: skip
    models = list(series)
    by_speedup: dict[float, dict[str, float]] = {}
    for model, points in series.items():
        for x, y in points:
            by_speedup.setdefault(x, {})[model] = y
    wanted = set(table_speedups)
    rows = [
        (f"{speedup:g}", *(round(values.get(model, float("nan")), 3) for model in models))
        for speedup, values in sorted(by_speedup.items())
        if not wanted or speedup in wanted
    ]
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("speedup", *(f"{MODEL_LABELS.get(model, model)} Wh" for model in models)),
        rows=rows,
        height=400,
    )

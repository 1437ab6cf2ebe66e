"""Figures of dynamic priorities: the priority curve. Drawn with :mod:`kit.charts`."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from kit.charts import MUTED, PALETTE, Chart, embeddable, figure

# --- Dynamic priority ---------------------------------------------------------------------------


def priority_curve(
    *,
    key: str,
    curve: Sequence[tuple[Decimal, Decimal]],
    k1: Decimal,
    k2: Decimal,
    projects: Sequence[tuple[str, Decimal, Decimal]],
) -> Chart:
    """Figure 2 of the Q(T) paper: Pr_dyn against the profiling coefficient K (eq 14), the
    piecewise-linear curve with K1 and K2 marked and each project as a point on it."""
    title = "Dynamic priority against the profiling coefficient"
    fig = figure(
        title,
        400,
        xaxis={"title": {"text": "profiling coefficient K"}},
        yaxis={"title": {"text": "dynamic priority Pr_dyn"}, "rangemode": "normal"},
        hovermode="closest",
    )
    for name, threshold in (("K1", k1), ("K2", k2)):
        fig.shape(
            type="line", xref="x", yref="paper", x0=float(threshold), x1=float(threshold),
            y0=0, y1=1, line={"color": MUTED, "dash": "dot", "width": 1},
        )  # fmt: skip
        fig.annotate(
            x=float(threshold), y=1, yref="paper", yanchor="bottom", showarrow=False,
            text=f"{name} = {threshold.normalize():f}", font={"size": 11, "color": MUTED},
        )  # fmt: skip
    fig.add(
        {
            "type": "scatter", "mode": "lines", "name": "dynamic priority",
            "x": [float(k) for k, _ in curve], "y": [float(pr) for _, pr in curve],
            "line": {"color": PALETTE[0], "width": 2.5},
            "hovertemplate": "K = %{x:.4g}<br>Pr_dyn = %{y:,.6g}<extra></extra>",
        }
    )  # fmt: skip
    if projects:
        fig.add(
            {
                "type": "scatter", "mode": "markers+text", "name": "projects",
                "x": [float(k) for _, k, _ in projects],
                "y": [float(pr) for _, _, pr in projects],
                "text": [code for code, _, _ in projects], "textposition": "top center",
                "textfont": {"size": 11},
                "marker": {"color": PALETTE[1], "size": 10, "line": {"color": "#fff", "width": 1}},
                "hovertemplate": "%{text}<br>K = %{x:.6g}<br>Pr_dyn = %{y:,.6g}<extra></extra>",
            }
        )  # fmt: skip
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("project", "K", "Pr_dyn"),
        rows=[(code, k, pr) for code, k, pr in projects],
        height=400,
    )

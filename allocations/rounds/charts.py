"""Figures of a round: its pools' available, requested and granted SU. Drawn with
:mod:`kit.charts`."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from kit.charts import PALETTE, Chart, embeddable, figure, su, value_axis

# --- Rounds -----------------------------------------------------------------------------------


def round_pools(*, key: str, pools: Sequence[tuple[str, Decimal, Decimal, Decimal]]) -> Chart:
    """Requested, granted and available SU per pool of a round."""
    title = "SU per pool: available, requested, granted"
    fig = figure(
        title,
        320,
        barmode="group",
        xaxis={"title": {"text": "resource pool"}},
        yaxis=value_axis(
            "service units (SU)", (su(Decimal(row[i])) for row in pools for i in (1, 2, 3))
        ),
    )
    names = [name for name, *_ in pools]
    for index, (label, colour) in enumerate(
        (("available", "#9fb8c8"), ("requested", PALETTE[1]), ("granted", PALETTE[2])), start=1
    ):
        fig.add(
            {
                "type": "bar",
                "x": names, "y": [su(Decimal(row[index])) for row in pools], "name": label,
                "marker": {"color": colour},
                "hovertemplate": f"%{{x}}<br>{label}: %{{y:,.0f}} SU<extra></extra>",
            }
        )  # fmt: skip
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("pool", "available SU", "requested SU", "granted SU"),
        rows=[(name, su(a), su(r), su(g)) for name, a, r, g in pools],
        height=320,
    )

"""Figures of balances: gauges and alerts (dashboard), a budget period's burn-down and SU per
partition or user (project page). Drawn with :mod:`kit.charts`; the pages read, these draw."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from kit.charts import (
    HIGH,
    MUTED,
    OK,
    OVER,
    PALETTE,
    WARN,
    Chart,
    date_axis,
    embeddable,
    figure,
    say_empty,
    su,
    value_axis,
)

# --- Balances ---------------------------------------------------------------------------------


def alert_level(percent_used: Decimal | None, thresholds: Sequence[int]) -> int | None:
    """The highest threshold (75, 90, 100 by default) the period's use has reached."""
    if percent_used is None:
        return None
    reached = [threshold for threshold in thresholds if percent_used >= threshold]
    return max(reached) if reached else None


def _level_colour(level: int | None) -> str:
    if level is None:
        return OK
    if level >= 100:
        return OVER
    return HIGH if level >= 90 else WARN


def balance_gauge(
    *,
    key: str,
    pool: str,
    percent_used: Decimal | None,
    used_su: Decimal,
    available_su: Decimal,
    thresholds: Sequence[int],
) -> Chart:
    """A gauge of the budget period used, in percent, with the alert thresholds marked."""
    percent = float(percent_used) if percent_used is not None else 0.0
    top = max(100.0, percent * 1.05)
    marks = sorted(thresholds) or [100]
    bands = [(0.0, float(marks[0]), "#e8f5ec")]
    shades = ("#fdf2dc", "#fde6d6", "#f9dcd9")
    for index, threshold in enumerate(marks):
        upper = float(marks[index + 1]) if index + 1 < len(marks) else top
        bands.append((float(threshold), upper, shades[min(index, len(shades) - 1)]))
    title = f"{pool}: budget period used"
    fig = figure(title, 210, margin={"l": 40, "r": 40, "t": 44, "b": 8})
    fig.add(
        {
                "type": "indicator",
            "mode": "gauge+number",
            "value": round(percent, 1),
            "number": {"suffix": " %", "font": {"size": 30}},
            "gauge": {
                "shape": "angular",
                "axis": {"range": [0, top], "ticksuffix": " %", "tickfont": {"size": 11}},
                "bar": {"color": _level_colour(alert_level(percent_used, thresholds)),
                        "thickness": 0.55},
                "steps": [{"range": [low, high], "color": colour} for low, high, colour in bands],
                "threshold": {"line": {"color": OVER, "width": 3}, "thickness": 0.9,
                              "value": 100},
                "borderwidth": 0,
            },
        }
    )  # fmt: skip
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("pool", "used SU", "available SU", "percent used"),
        rows=[(pool, su(used_su), su(available_su), percent_used)],
        height=210,
    )


def burn_down(
    *,
    key: str,
    pool: str,
    start: date,
    end: date,
    today: date,
    available_su: Decimal,
    used_per_day: dict[date, Decimal],
    burn_rate_per_day: Decimal,
    projected_exhaustion: date | None,
) -> Chart:
    """Cumulative SU used in the budget period against what is available, with a projection
    at the current burn rate and the even pace that would last exactly to the period's end."""
    last_day = end - timedelta(days=1)
    days, cumulative, used_total = [], [], Decimal(0)
    rows: list[tuple[Any, ...]] = []
    current = start
    while current <= min(today, last_day):
        used_today = used_per_day.get(current, Decimal(0))
        used_total += used_today
        days.append(current)
        cumulative.append(su(used_total))
        rows.append((current.isoformat(), su(used_today), su(used_total)))
        current += timedelta(days=1)
    title = f"{pool} burn-down, {start:%Y-%m-%d} \u2013 {last_day:%Y-%m-%d}"
    fig = figure(
        title,
        340,
        xaxis=date_axis("date", [start, last_day], range=[start.isoformat(), end.isoformat()]),
        hovermode="x unified",
    )
    drawn = [su(available_su), *cumulative]
    fig.add(
        {
                "type": "scatter",
            "x": [start, end], "y": [su(available_su), su(available_su)], "name": "available",
            "mode": "lines", "line": {"color": MUTED, "dash": "dash", "width": 1.5},
            "hovertemplate": "available: %{y:,.1f} SU<extra></extra>",
        }
    )  # fmt: skip
    fig.add(
        {
                "type": "scatter",
            "x": [start, end], "y": [0, su(available_su)], "name": "even pace", "mode": "lines",
            "line": {"color": "#b9c2cc", "dash": "dot", "width": 1.5},
            "hovertemplate": "even pace: %{y:,.1f} SU<extra></extra>",
        }
    )  # fmt: skip
    fig.add(
        {
                "type": "scatter",
            "x": days, "y": cumulative, "name": "used", "mode": "lines", "fill": "tozeroy",
            "line": {"color": PALETTE[0], "width": 2.5}, "fillcolor": "rgba(11,110,153,0.12)",
            "hovertemplate": "used: %{y:,.1f} SU<extra></extra>",
        }
    )  # fmt: skip
    if days and burn_rate_per_day > 0 and today < end:
        horizon = projected_exhaustion or end
        span = (horizon - today).days
        projected = used_total + burn_rate_per_day * span
        drawn.append(su(projected))
        fig.add(
            {
                "type": "scatter",
                "x": [today, horizon], "y": [su(used_total), su(projected)], "name": "projection",
                "mode": "lines+markers", "line": {"color": HIGH, "dash": "dash", "width": 2},
                "marker": {"size": [0, 9], "color": HIGH},
                "hovertemplate": "projected: %{y:,.1f} SU<extra></extra>",
            }
        )  # fmt: skip
        if projected_exhaustion is not None:
            fig.annotate(
                x=projected_exhaustion.isoformat(), y=su(projected),
                text=f"runs out {projected_exhaustion:%Y-%m-%d}", showarrow=True, arrowhead=0,
                ax=0, ay=-28, xanchor="right", font={"color": HIGH, "size": 12},
            )  # fmt: skip
    fig["layout"]["yaxis"] = value_axis("service units (SU)", drawn)
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("day", "SU used that day", "SU used in the period so far"),
        rows=rows,
        height=340,
    )


# --- Usage ------------------------------------------------------------------------------------

STEP_LABELS = {"day": "day", "week": "week starting", "month": "month"}


def usage_stacked(
    *,
    key: str,
    title: str,
    points: Iterable[tuple[date, str, Decimal]],
    step: str,
    group_label: str,
    window: tuple[date, date],
) -> Chart:
    """SU per period, one stacked bar per partition or user, over ``window`` (start, end)."""
    series: dict[str, dict[date, float]] = {}
    periods: set[date] = set()
    rows: list[tuple[Any, ...]] = []
    for period, name, service_units in points:
        series.setdefault(name, {})[period] = su(service_units)
        periods.add(period)
        rows.append((period.isoformat(), name, su(service_units)))
    ordered = sorted(periods)
    x_format = "%Y-%m" if step == "month" else "%Y-%m-%d"
    totals = {period: sum(values.get(period, 0.0) for values in series.values())
              for period in ordered}  # fmt: skip
    fig = figure(
        title,
        360,
        barmode="stack",
        xaxis=date_axis(STEP_LABELS.get(step, step), ordered or list(window), step=step),
        yaxis=value_axis("service units (SU)", totals.values()),
        bargap=0.15,
    )
    for name in sorted(series, key=lambda item: -sum(series[item].values())):
        values = series[name]
        fig.add(
            {
                "type": "bar",
                "x": ordered, "y": [values.get(period, 0.0) for period in ordered], "name": name,
                "hovertemplate": f"%{{x|{x_format}}}<br>{group_label} {name}: "
                "%{y:,.1f} SU<extra></extra>",
            }
        )  # fmt: skip
    if not series:
        # Without bars plotly's date axis would show its default, the year 2000.
        fig["layout"]["xaxis"]["range"] = [day.isoformat() for day in window]
        say_empty(fig, "No charged jobs in this window")
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=(STEP_LABELS.get(step, step), group_label, "SU"),
        rows=rows,
    )

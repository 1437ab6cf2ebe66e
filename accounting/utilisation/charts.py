"""Figures of the utilisation pages: Q(T) per bucket beside the classical core-hour and GPU-hour
utilisation, and a partition's true overhead over time and as a histogram. Drawn with
:mod:`kit.charts`; the pages read, these draw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kit.charts import (
    INK,
    MUTED,
    OK,
    PALETTE,
    Chart,
    date_axis,
    embeddable,
    figure,
    value_axis,
)

# --- Utilisation Q(T) -------------------------------------------------------------------------

_BUCKET_FORMATS = {"hour": "%Y-%m-%d %H:%M", "day": "%Y-%m-%d", "week": "%Y-%m-%d",
                   "month": "%Y-%m"}  # fmt: skip
_BUCKET_LABELS = {"hour": "hour starting", "day": "day", "week": "week starting",
                  "month": "month"}  # fmt: skip


def _bucket_axis(step: str, starts: Sequence[datetime]) -> dict[str, Any]:
    return date_axis(f"{_BUCKET_LABELS.get(step, step)} (cluster time)", starts, step=step)


def utilisation_quality(
    *,
    key: str,
    starts: Sequence[datetime],
    series: dict[str, list[float | None]],
    step: str,
    total: str | None,
    inconsistent: Mapping[datetime, float] | None = None,
) -> Chart:
    """Q(T) per bucket (eq 12): one line per partition and, named ``total``, the cluster's;
    ``inconsistent`` buckets (over 100 %, start: value) are marked as such."""
    title = "Load quality Q(T): share of peak FLOP the jobs reserved"
    fig = figure(
        title,
        380,
        xaxis=_bucket_axis(step, starts),
        yaxis=value_axis(
            "Q(T), % of peak FLOP",
            (value for values in series.values() for value in values),
            ticksuffix=" %",
        ),
        hovermode="x unified",
    )
    x_format = _BUCKET_FORMATS.get(step, "%Y-%m-%d")
    for index, (name, values) in enumerate(series.items()):
        is_total = name == total
        fig.add(
            {
                "type": "scatter", "x": list(starts), "y": values, "name": name,
                "mode": "lines" if len(starts) > 60 else "lines+markers",
                "line": {"color": INK if is_total else PALETTE[index % len(PALETTE)],
                         "width": 3 if is_total else 1.8, "dash": "solid"},
                "hovertemplate": f"%{{x|{x_format}}}<br>{name}: Q = %{{y:.2f}} %<extra></extra>",
            }
        )  # fmt: skip
    _mark_inconsistent(fig, inconsistent, x_format)
    return Chart(key=key, title=title, figure_json=embeddable(fig), columns=(), height=380)


def _mark_inconsistent(
    fig: Any, inconsistent: Mapping[datetime, float] | None, x_format: str
) -> None:
    """Buckets over 100 % (impossible: the jobs' data over-commits the nodes) as red crosses,
    and the 100 % line they cross."""
    if not inconsistent:
        return
    fig.add(
        {
            "type": "scatter", "x": list(inconsistent), "y": list(inconsistent.values()),
            "name": "over 100 %: inconsistent job data", "mode": "markers",
            "marker": {"symbol": "x", "size": 9, "color": "#c0392b"},
            "hovertemplate": f"%{{x|{x_format}}}<br>over 100 % (%{{y:.1f}} %): the jobs "
            "over-commit the nodes<extra></extra>",
        }
    )  # fmt: skip


def utilisation_classical(
    *,
    key: str,
    starts: Sequence[datetime],
    series: dict[str, list[float | None]],
    step: str,
    scope: str,
    inconsistent: Mapping[datetime, float] | None = None,
) -> Chart:
    """Q(T) beside the classical core-hour and GPU-hour utilisation of ``scope``: reserved
    resource-time over available, which weighs a core and a GPU alike by the hour, not by FLOP."""
    title = f"Q(T) and core-/GPU-hour utilisation, {scope}"
    fig = figure(
        title,
        340,
        xaxis=_bucket_axis(step, starts),
        yaxis=value_axis(
            "% of capacity",
            (value for values in series.values() for value in values),
            ticksuffix=" %",
        ),
        hovermode="x unified",
    )
    x_format = _BUCKET_FORMATS.get(step, "%Y-%m-%d")
    styles = {
        "Q(T), peak FLOP": {"color": INK, "width": 2.5, "dash": "solid"},
        "core-hours": {"color": PALETTE[0], "width": 1.8, "dash": "dash"},
        "GPU-hours": {"color": PALETTE[1], "width": 1.8, "dash": "dot"},
    }
    for name, values in series.items():
        fig.add(
            {
                "type": "scatter", "x": list(starts), "y": values, "name": name,
                "mode": "lines" if len(starts) > 60 else "lines+markers",
                "line": styles.get(name, {"color": MUTED, "width": 1.5}),
                "hovertemplate": f"%{{x|{x_format}}}<br>{name}: %{{y:.2f}} %<extra></extra>",
            }
        )  # fmt: skip
    _mark_inconsistent(fig, inconsistent, x_format)
    return Chart(key=key, title=title, figure_json=embeddable(fig), columns=(), height=340)


# --- True overhead (canonical units) ---------------------------------------------------------


def overhead_series(
    *,
    key: str,
    partition: str,
    unit: str,
    buckets: Sequence[tuple[str, str, int]],
) -> Chart:
    """True overhead of a partition over time: mean canonical units per bucket (section 3)."""
    title = f"{partition}: idle slices of {unit}"
    x, y, rows = [], [], []
    for start, end, unit_seconds in buckets:
        seconds = (_iso(end) - _iso(start)).total_seconds()
        mean = round(unit_seconds / seconds, 3) if seconds else 0.0
        x.append(start)
        y.append(mean)
        rows.append((start, end, mean, round(unit_seconds / 3600, 3)))
    fig = figure(
        title,
        320,
        xaxis=date_axis("time (UTC)", x, step="hour"),
        yaxis=value_axis("idle slices (mean)", y),
        showlegend=False,
    )
    fig.add(
        {
            "type": "scatter", "x": x, "y": y, "mode": "lines", "line": {"shape": "hv",
            "color": PALETTE[1], "width": 2}, "fill": "tozeroy",
            "fillcolor": "rgba(224,122,31,0.12)", "name": "true overhead",
            "hovertemplate": "%{x}<br>%{y:,.2f} idle slices<extra></extra>",
        }
    )  # fmt: skip
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("bucket start", "bucket end", "mean idle slices", "slice-hours"),
        rows=rows,
        height=320,
    )


def overhead_histogram(*, key: str, partition: str, histogram: dict[int, int]) -> Chart:
    """Node-hours spent at each number of canonical units of true overhead (section 3.1)."""
    title = f"{partition}: node-hours at each true overhead"
    units = sorted(histogram)
    hours = [round(histogram[count] / 3600, 3) for count in units]
    fig = figure(
        title,
        300,
        xaxis=value_axis("idle slices (true overhead)", units, integer=True),
        yaxis=value_axis("node-hours", hours),
        showlegend=False,
        bargap=0.1,
    )
    fig.add(
        {
            "type": "bar", "x": units, "y": hours,
            "marker": {"color": [OK if count == 0 else PALETTE[0] for count in units]},
            "hovertemplate": "%{x} idle slices: %{y:,.1f} node-hours<extra></extra>",
        }
    )  # fmt: skip
    return Chart(
        key=key,
        title=title,
        figure_json=embeddable(fig),
        columns=("idle slices", "node-hours"),
        rows=list(zip(units, hours, strict=True)),
        height=300,
    )


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text)

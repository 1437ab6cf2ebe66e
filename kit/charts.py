"""The primitives every chart of the pages is drawn with: the palette, the plotly template,
:class:`Chart` and :class:`Figure`. Domain-free: it imports no app of the project, and each
domain's ``charts.py`` builds its figures from these.

A :class:`Chart` holds the figure as JSON (rendered by ``static/js/charts.js`` with the
plotly.js bundle vendored in ``static/vendor/plotly/``, never a CDN) and the same numbers as a data
table, which the page shows beside the chart and offers as CSV (``?csv=<key>``). Every figure
has a title, axis titles with units and hover text with the values.

Builders take plain values (dates, Decimals, rows), not querysets: the views read, these draw.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from django.http import HttpResponse
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from kit.csv_export import csv_writer

PALETTE = (
    "#0b6e99", "#e07a1f", "#2f9e44", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#b7950b",
)  # fmt: skip
INK, MUTED, GRID = "#1d2733", "#5b6877", "#e6eaef"
ISO_DAY = "%Y-%m-%d"  # dates are ISO on every page, chart axes included
OK, WARN, HIGH, OVER = "#2f9e44", "#d89614", "#e0661f", "#c0392b"

_TEMPLATE = go.layout.Template(
    layout={
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 13,
                 "color": INK},
        "title": {"font": {"size": 15}, "x": 0, "xanchor": "left", "y": 0.97},
        "colorway": list(PALETTE),
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",
        "hoverlabel": {"font": {"size": 13}},
        # A tick label that sticks out of the chart is drawn, not hidden: static/js/charts.js
        # widens the margin it needs ("100 %" at an axis' end, a phone's last date).
        "xaxis": {"gridcolor": GRID, "linecolor": "#c7ced6", "zeroline": False,
                  "automargin": True, "title": {"font": {"color": MUTED}, "standoff": 10},
                  "ticklabeloverflow": "allow", "ticklabelstandoff": 4},
        "yaxis": {"gridcolor": GRID, "linecolor": "#c7ced6", "zeroline": False,
                  "automargin": True, "title": {"font": {"color": MUTED}, "standoff": 12},
                  "rangemode": "tozero", "ticklabeloverflow": "allow"},
        # The legend sits at the very bottom of the figure, below the x axis and its title.
        "legend": {"orientation": "h", "yref": "container", "y": 0.01, "yanchor": "bottom",
                   "x": 0, "font": {"size": 12}},
        "margin": {"l": 60, "r": 16, "t": 48, "b": 96},
    }
)  # fmt: skip


@dataclass(frozen=True)
class Chart:
    """A figure ready for a page, with its data table."""

    key: str
    title: str
    figure_json: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    height: int = 360

    @property
    def table_html(self) -> SafeString:
        """The data table beside the chart, built here as plain text with each value escaped
        (rows can number in the hundreds: a year of days is thousands of cells, and a
        ``format_html`` per cell was most of the project page's time)."""
        head = "".join(f"<th>{conditional_escape(column)}</th>" for column in self.columns)
        if not self.rows:
            body = f'<tr><td colspan="{len(self.columns)}" class="empty">No data.</td></tr>'
        else:
            body = "".join("<tr>" + "".join(map(_cell, row)) + "</tr>" for row in self.rows)
        return mark_safe(  # noqa: S308 - every value above is escaped
            f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        )

    def csv_response(self, filename_stem: str) -> HttpResponse:
        """The data table as a CSV download."""
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename_stem}-{self.key}.csv"'
        writer = csv_writer(response)
        writer.writerow(self.columns)
        writer.writerows(self.rows)
        return response


_TEMPLATE_JSON = _TEMPLATE.to_plotly_json()


class Figure(dict[str, Any]):
    """A plotly figure as the plain dict plotly.js takes: ``{"data": [...], "layout": {...}}``.

    Building ``plotly.graph_objects`` validates every property on every request (10 ms and more
    per figure); these builders write the same structure directly and let plotly serialise it.
    The tests validate every figure against plotly's schema (``go.Figure(figure)``), so a typo
    fails there and costs nothing at run time.
    """

    def add(self, trace: dict[str, Any]) -> None:
        self["data"].append(trace)

    def annotate(self, **annotation: Any) -> None:
        self["layout"].setdefault("annotations", []).append(annotation)

    def shape(self, **shape: Any) -> None:
        self["layout"].setdefault("shapes", []).append(shape)


def _plain_value(value: Any) -> Any:
    """A figure's value json cannot write itself: dates as ISO 8601, decimals as numbers (what
    plotly's encoder writes of them)."""
    if isinstance(value, date | datetime):
        return value.isoformat()
    if isinstance(value, Decimal) and value.is_finite():
        return float(value)
    raise TypeError(f"not a value a figure holds: {value!r}")


def embeddable(fig: Figure) -> str:
    """The figure as JSON to embed in a page, with the template. The builders write plain
    values, so the standard library writes them (plotly's encoder tries a dozen kinds of object
    for every date and decimal: 2 ms of the project page's four figures); anything else (a NaN,
    an object of plotly's) goes through ``plotly.io.to_json`` as before."""
    plain = {"data": fig["data"], "layout": {**fig["layout"], "template": _TEMPLATE_JSON}}
    try:
        text = json.dumps(plain, default=_plain_value, allow_nan=False, separators=(",", ":"))
        text = text.replace("/", "\\u002f")  # as plotly's (it escapes "<" and ">" too: below)
    except (TypeError, ValueError):
        text = pio.to_json(plain, validate=False)
    # Safe inside <script type="application/json">: the same escapes as Django's json_script.
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def say_empty(fig: Figure, text: str) -> None:
    """Write ``text`` across the middle of a chart that has nothing to draw."""
    fig.annotate(
        text=text, showarrow=False, font={"color": MUTED}, xref="paper", yref="paper",
        x=0.5, y=0.5,
    )  # fmt: skip


def figure(title: str, height: int, **layout: Any) -> Figure:
    """An empty figure with its title, height and any more layout."""
    return Figure(data=[], layout={"title": {"text": title}, "height": height, **layout})


def find_chart(charts: Iterable[Chart], key: str) -> Chart | None:
    """The chart of ``key`` (the ``?csv=<key>`` of a page), if drawn."""
    return next((chart for chart in charts if chart.key == key), None)


def _cell(value: Any) -> str:
    """One cell of a chart's data table, escaped: numbers grouped by thousands and
    right-aligned, as every table of the pages shows them (the CSV keeps them plain)."""
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        # Digits, separators, a sign, an exponent or NaN/Infinity: nothing to escape.
        return f'<td class="num">{value:,}</td>'
    if hasattr(value, "__html__"):  # already safe (conditional_escape's rule)
        return f"<td>{value.__html__()}</td>"
    # Django's escape() is this same call behind a lazy-string wrapper that cost a third of a
    # project page's table time (a thousand cells).
    return f"<td>{html.escape(str(value))}</td>"


def su(value: Decimal | float) -> float:
    """Service units as plotly draws them: a float to three places."""
    return round(float(value), 3)


# --- Axes whose ticks follow the data ---------------------------------------------------------
#
# Plotly picks tick steps from the axis length alone and prints them with the format it is given:
# ",.0f" over a range of 0 to 1 SU prints "0, 0, 0, 1, 1", and a day axis over three days puts
# ticks every 12 hours that "%Y-%m-%d" prints twice each. These builders choose the step from
# the data's range and the format from the step, so every tick reads differently.

_NICE_STEPS = (Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5), Decimal(10))
_TICKS = 5  # about this many intervals on a value axis
_DAY_MS = 86_400_000
_DAY_STEPS = (1, 2, 7, 14)  # days between ticks; beyond these, months
_MONTH_STEPS = (1, 2, 3, 6, 12)
_MAX_DATE_TICKS = 8


def nice_step(top: float, *, integer: bool = False) -> Decimal:
    """The tick step for a value axis from 0 to ``top``: 1, 2, 2.5 or 5 times a power of ten,
    the smallest that makes about five intervals; at least 1 for whole numbers."""
    if not top or top <= 0 or not math.isfinite(top):
        return Decimal(1)
    raw = Decimal(repr(top)) / _TICKS
    power = Decimal(10) ** math.floor(math.log10(float(raw)))
    step = next(power * nice for nice in _NICE_STEPS if power * nice >= raw)
    if integer:
        step = max(Decimal(1), step.to_integral_value(rounding="ROUND_CEILING"))
        if step == Decimal("2.5"):
            step = Decimal(3)
    return step.normalize()


def _decimals(step: Decimal) -> int:
    exponent = step.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    return max(0, -exponent)


def value_axis(
    title: str,
    values: Iterable[float | int | Decimal | None],
    *,
    integer: bool = False,
    **more: Any,
) -> dict[str, Any]:
    """A value axis from 0 whose ticks follow the data: ``values`` are every value drawn on it
    (for stacked bars, the stacks' totals). Whole numbers (jobs, nodes) get whole steps of at
    least 1 and ``,d``; other quantities as many decimals as the step needs (0.25 SU: two,
    20,000 SU: none). ``more`` adds or overrides layout keys (``ticksuffix``, ``range``)."""
    top = max((abs(float(value)) for value in values if value is not None), default=0.0)
    step = nice_step(top, integer=integer)
    tickformat = ",d" if integer else f",.{_decimals(step)}f"
    return {
        "title": {"text": title}, "automargin": True, "rangemode": "tozero",
        "tickmode": "linear", "tick0": 0, "dtick": float(step), "tickformat": tickformat,
        **more,
    }  # fmt: skip


_LOG_DIGITS = (1, 2, 5)  # each decade's ticks when the data spans a few decades
_LOG_FEW_DECADES = 3.5  # beyond this many decades, one tick per power of ten


def log_axis(
    title: str, values: Iterable[float | int | Decimal | None], **more: Any
) -> dict[str, Any]:
    """A log axis whose ticks follow the data and read in full: ``values`` are every value
    drawn on it (zeros and None are not drawn on a log axis). Under one decade (jobs of 1 to 4
    nodes) the ticks step as on a value axis (1, 2, 3, 4); over a few decades at 1, 2 and 5 of
    each (0.05, 0.1, 0.2 ... 50); over more, the powers of ten. Plotly alone labels the 2s and
    5s with their lone digit ("5, 2, 10, 5, 2, 1") and a short range in halves of a node."""
    axis: dict[str, Any] = {"title": {"text": title}, "type": "log", **more}
    shown = [float(value) for value in values if value is not None and value > 0]
    if not shown:
        return axis
    low, high = min(shown), max(shown)
    decades = math.log10(high / low)
    if decades < 1:
        step = nice_step(high)
        first = math.ceil(Decimal(repr(low)) / step)
        ticks = [step * n for n in range(first, math.floor(Decimal(repr(high)) / step) + 1)]
    else:
        digits = _LOG_DIGITS if decades <= _LOG_FEW_DECADES else (1,)
        powers = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        ticks = [Decimal(digit).scaleb(power) for power in powers for digit in digits]
        # one tick either side of the data, for plotly's padding; the rest are off the axis
        below = [tick for tick in ticks if tick <= Decimal(repr(low))][-1:]
        above = [tick for tick in ticks if tick >= Decimal(repr(high))][:1]
        inside = [tick for tick in ticks if Decimal(repr(low)) < tick < Decimal(repr(high))]
        ticks = below + inside + above
    if not ticks:  # one value between two steps: plotly's own tick is as good
        return axis
    axis.update(
        tickmode="array",
        tickvals=[float(tick) for tick in ticks],
        ticktext=[f"{tick.normalize():,f}" for tick in ticks],
    )
    return axis


def date_axis(
    title: str, dates: Sequence[date | datetime | str], *, step: str = "day", **more: Any
) -> dict[str, Any]:
    """A date axis with one label per tick and none repeated: ``step`` is what one point
    stands for (``hour``, ``day``, ``week``, ``month``). Days and weeks tick on whole days
    (every 1, 2, 7 or 14, or whole months over a long span) as ``2026-11-03``; months as
    ``2026-11``; hours as the time and, below it, the day, with the format following the zoom."""
    axis: dict[str, Any] = {"title": {"text": title}, "type": "date", "automargin": True}
    days = sorted(_as_date(value) for value in dates)
    if step == "hour":
        axis["tickformatstops"] = [
            {"dtickrange": [None, _DAY_MS], "value": "%H:%M\n%Y-%m-%d"},
            {"dtickrange": [_DAY_MS, "M1"], "value": ISO_DAY},
            {"dtickrange": ["M1", None], "value": "%Y-%m"},
        ]
        return {**axis, **more}
    span_days = (days[-1] - days[0]).days if days else 0
    if step == "month":
        months = span_days // 28 + 1
        every = next((m for m in _MONTH_STEPS if months / m <= _MAX_DATE_TICKS), 12)
        axis.update(tickformat="%Y-%m", dtick=f"M{every}")
    else:
        unit = 7 if step == "week" else 1
        every_days = next(
            (d for d in _DAY_STEPS if d >= unit and span_days / d < _MAX_DATE_TICKS), None
        )
        if every_days is not None:
            axis.update(tickformat=ISO_DAY, dtick=every_days * _DAY_MS)
        else:
            every = next((m for m in _MONTH_STEPS if span_days / 30 / m < _MAX_DATE_TICKS), 12)
            axis.update(tickformat=ISO_DAY, dtick=f"M{every}")
    if days:
        axis["tick0"] = days[0].isoformat()
    return {**axis, **more}


def _as_date(value: date | datetime | str) -> date:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime):
        return value.date()
    return value

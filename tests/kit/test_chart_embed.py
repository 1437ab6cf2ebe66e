"""A figure's JSON on a page (``kit.charts.embeddable``) is written by the standard library
from the builders' plain values, byte for byte what plotly's encoder wrote of the same figure;
what it cannot write (a NaN) still goes through plotly."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import plotly.io as pio

from allocations.grants import charts as grant_charts
from kit import charts


def _plotly_text(figure: charts.Figure) -> str:
    """What embeddable wrote before: plotly's encoder, then the same escapes."""
    plain = {
        "data": figure["data"],
        "layout": {**figure["layout"], "template": charts._TEMPLATE_JSON},
    }
    text = pio.to_json(plain, validate=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _figures() -> list[charts.Figure]:
    start = date(2026, 1, 1)
    used = {start + timedelta(days=n): Decimal(n * 7) / 3 for n in range(40)}
    figure = charts.figure("by hand & <b>", 300)
    figure.add({
        "type": "scatter", "x": [datetime(2026, 1, 1, 3, tzinfo=UTC), date(2026, 1, 2)],
        "y": [Decimal("1.250000"), 2], "name": "o'neil & <co>", "text": ["é", None, True],
    })  # fmt: skip
    built = [
        grant_charts.burn_down(
            key="b", pool="cpu", start=start, end=start + timedelta(days=90),
            today=start + timedelta(days=40), available_su=Decimal(100000), used_per_day=used,
            burn_rate_per_day=Decimal("12.5"), projected_exhaustion=start + timedelta(days=80),
        ),
        grant_charts.usage_stacked(
            key="u", title="SU per week by user", step="week", group_label="user",
            points=[
                (start + timedelta(weeks=n), f"user{n % 3}", Decimal(n) / 7) for n in range(20)
            ],
            window=(start, start + timedelta(weeks=20)),
        ),
        grant_charts.balance_gauge(
            key="g", pool="gpu", percent_used=Decimal("91.5"), used_su=Decimal(915),
            available_su=Decimal(85), thresholds=[75, 90, 100],
        ),
    ]  # fmt: skip
    return [figure] + [_figure_of(chart) for chart in built]


def _figure_of(chart: charts.Chart) -> charts.Figure:
    """The figure a builder embedded, as a dict again (its JSON without the template)."""
    import json

    plain = json.loads(chart.figure_json)
    plain["layout"].pop("template")
    return charts.Figure(plain)


def test_every_figure_is_written_as_plotly_wrote_it():
    for figure in _figures():
        assert charts.embeddable(figure) == _plotly_text(figure)


def test_the_builders_figures_come_out_the_same_with_their_dates_and_decimals():
    start = date(2026, 3, 1)
    figure = charts.figure("t", 200)
    figure.add({"type": "bar", "x": [start, start + timedelta(days=1)], "y": [Decimal("0.5"), 1]})
    assert charts.embeddable(figure) == _plotly_text(figure)
    assert '"x":["2026-03-01","2026-03-02"]' in charts.embeddable(figure)


def test_a_value_json_cannot_write_goes_through_plotly():
    figure = charts.figure("t", 200)
    figure.add({"type": "bar", "x": [1, 2], "y": [float("nan"), Decimal("NaN")]})
    text = charts.embeddable(figure)
    assert text == _plotly_text(figure)
    assert '"y":[NaN' not in text

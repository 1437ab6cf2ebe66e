"""Tick formats follow the data's range and labels fit (issue 31, item 5): a project with 1 SU
got y ticks "1, 0, 0, 0, 0, 0" (",.0f" over steps of 0.2) and a few days of usage repeated
x dates (12-hour ticks printed as days); the job page's bar labels ran past the figure's edge
("100.0 9"). Checked on the figure JSON the pages embed. Pure: no database."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from decimal import Decimal

import plotly.graph_objects as go
import pytest

from accounting.costs.charts import cost_quantile_curve, cost_share_curve
from accounting.ledger.charts import bar_label, efficiency_histogram, node_fractions
from accounting.utilisation.charts import overhead_series
from allocations.grants.charts import burn_down, usage_stacked
from kit.charts import date_axis, log_axis, nice_step, value_axis

DAY_MS = 86_400_000


def layout(chart) -> dict:
    figure = json.loads(chart.figure_json)
    go.Figure(figure)  # raises on any property plotly does not know
    return figure["layout"]


def tick_labels(axis: dict, top: float) -> list[str]:
    """The labels plotly prints for a linear value axis from 0 to ``top``."""
    step = Decimal(repr(axis["dtick"]))
    decimals = int(axis["tickformat"].strip(",.df") or 0)
    labels, value = [], Decimal(0)
    while value <= Decimal(repr(top)):
        labels.append(f"{value:,.{decimals}f}")
        value += step
    return labels


@pytest.mark.parametrize(
    ("top", "step", "tickformat"),
    [
        (1, 0.2, ",.1f"),
        (1.2, 0.25, ",.2f"),
        (0.004, 0.001, ",.3f"),
        (7, 2, ",.0f"),
        (24_576, 5_000, ",.0f"),
        (0, 1, ",.0f"),
    ],
)
def test_a_value_axis_steps_and_decimals_follow_the_range(top, step, tickformat):
    axis = value_axis("service units (SU)", [0, top])
    assert (axis["tickmode"], axis["tick0"], axis["dtick"]) == ("linear", 0, step)
    assert axis["tickformat"] == tickformat
    assert axis["automargin"] is True
    labels = tick_labels(axis, top)
    assert len(labels) == len(set(labels)), labels  # never "1, 0, 0, 0, 0, 0"


@pytest.mark.parametrize(("top", "step"), [(1, 1), (3, 1), (7, 2), (12, 3), (250, 50)])
def test_whole_numbers_get_whole_steps_of_at_least_one(top, step):
    axis = value_axis("jobs", [top], integer=True)
    assert axis["dtick"] == step
    assert axis["tickformat"] == ",d"


def test_nice_steps_are_one_two_two_and_a_half_or_five_times_a_power_of_ten():
    assert [nice_step(top) for top in (0.9, 4, 11, 130, 7_000)] == [
        Decimal("0.2"), Decimal(1), Decimal("2.5"), Decimal(50), Decimal(2000)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("days", "step", "dtick"),
    [(2, "day", DAY_MS), (10, "day", 2 * DAY_MS), (27, "day", 7 * DAY_MS),
     (300, "day", "M2"), (27, "week", 7 * DAY_MS), (2, "week", 7 * DAY_MS)],
)  # fmt: skip
def test_a_date_axis_ticks_on_whole_days_so_no_date_repeats(days, step, dtick):
    start = date(2026, 11, 1)
    axis = date_axis("day", [start, start + timedelta(days=days)], step=step)
    assert axis["dtick"] == dtick
    assert axis["tickformat"] == "%Y-%m-%d"
    assert axis["tick0"] == "2026-11-01"
    assert axis["type"] == "date"


def test_a_month_axis_ticks_on_months_and_an_hour_axis_follows_the_zoom():
    months = date_axis("month", [date(2026, 1, 1), date(2026, 11, 1)], step="month")
    assert (months["dtick"], months["tickformat"]) == ("M2", "%Y-%m")
    hours = date_axis("time", [datetime(2026, 11, 1, 0), datetime(2026, 11, 2, 23)], step="hour")
    assert "tickformat" not in hours
    assert [stop["value"] for stop in hours["tickformatstops"]] == [
        "%H:%M\n%Y-%m-%d", "%Y-%m-%d", "%Y-%m"
    ]  # fmt: skip


def test_a_project_with_little_usage_gets_decimal_ticks_and_one_tick_per_day():
    points = [(date(2026, 11, day), "work", Decimal("0.3")) for day in (1, 2, 3)]
    points.append((date(2026, 11, 2), "gpu", Decimal("0.6")))
    chart = usage_stacked(
        key="usage", title="SU per day by partition", points=points, step="day",
        group_label="partition", window=(date(2026, 11, 1), date(2026, 11, 4)),
    )  # fmt: skip
    axes = layout(chart)
    assert (axes["yaxis"]["dtick"], axes["yaxis"]["tickformat"]) == (0.2, ",.1f")  # top 0.9
    assert (axes["xaxis"]["dtick"], axes["xaxis"]["tickformat"]) == (DAY_MS, "%Y-%m-%d")


def test_a_large_project_keeps_whole_su_ticks():
    points = [(date(2026, 11, day), "work", Decimal("24576")) for day in range(1, 29)]
    chart = usage_stacked(
        key="usage", title="SU per day by partition", points=points, step="day",
        group_label="partition", window=(date(2026, 11, 1), date(2026, 11, 29)),
    )  # fmt: skip
    yaxis = layout(chart)["yaxis"]
    assert (yaxis["dtick"], yaxis["tickformat"]) == (5000, ",.0f")


def test_a_burn_down_scales_to_what_it_draws_the_projection_included():
    chart = burn_down(
        key="burn", pool="CPU", start=date(2026, 11, 1), end=date(2026, 12, 1),
        today=date(2026, 11, 5), available_su=Decimal(2),
        used_per_day={date(2026, 11, day): Decimal("0.1") for day in range(1, 6)},
        burn_rate_per_day=Decimal("0.1"), projected_exhaustion=None,
    )  # fmt: skip
    axes = layout(chart)
    assert (axes["yaxis"]["dtick"], axes["yaxis"]["tickformat"]) == (1, ",.0f")  # top 3.1
    assert axes["xaxis"]["dtick"] == 7 * DAY_MS


def test_a_histogram_of_few_jobs_counts_in_whole_jobs():
    chart = efficiency_histogram(key="hist", distributions={"cpu": [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]})
    yaxis = layout(chart)["yaxis"]
    assert (yaxis["dtick"], yaxis["tickformat"]) == (1, ",d")


def test_the_overhead_chart_leaves_room_for_its_y_title():
    start = datetime(2026, 11, 1)
    buckets = [
        ((start + timedelta(hours=h)).isoformat(), (start + timedelta(hours=h + 1)).isoformat(),
         3600 * 2)
        for h in range(48)
    ]  # fmt: skip
    axes = layout(overhead_series(key="s", partition="work", unit="1 core", buckets=buckets))
    assert axes["yaxis"]["automargin"] is True
    assert axes["yaxis"]["title"]["text"] == "idle slices (mean)"
    assert (axes["yaxis"]["dtick"], axes["yaxis"]["tickformat"]) == (0.5, ",.1f")
    assert "tickformatstops" in axes["xaxis"]
    template_title = json.loads(
        overhead_series(key="s", partition="w", unit="1 core", buckets=buckets).figure_json
    )["layout"]["template"]["layout"]["yaxis"]["title"]
    assert template_title["standoff"] >= 12


def test_job_bar_labels_are_short_and_sit_inside_a_long_bar():
    assert [bar_label(value) for value in (100.0, 64.04, 3.125)] == ["100 %", "64 %", "3.1 %"]
    chart = node_fractions(
        key="fractions", groups=[{"label": "node 1", "cores": 1, "memory": 0.4, "gpus": 1}],
        dominant="gpus",
    )  # fmt: skip
    (trace,) = json.loads(chart.figure_json)["data"]
    assert trace["text"] == ["100 %", "40 %", "100 %"]
    assert trace["textposition"] == "auto"  # inside when it fits: a full bar's label never
    assert trace["cliponaxis"] is False  # runs past the figure's right edge


@pytest.mark.parametrize(
    ("low", "high", "labels"),
    [
        # Jobs of 1 to 4 nodes: whole nodes, never "1.5" or "2.5" nodes.
        (1, 4, ["1", "2", "3", "4"]),
        # Runtimes of 3 min to 48 h: each decade at 1, 2 and 5, every label whole ("0.05"),
        # never plotly's lone minor digits ("5, 2, 10, 5, 2, 1").
        (0.05, 48, ["0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "20", "50"]),
        # Costs from a tenth of a cent to hundreds: the powers of ten, grouped.
        (0.001, 1000, ["0.001", "0.01", "0.1", "1", "10", "100", "1,000"]),
    ],
)
def test_a_log_axis_labels_each_tick_in_full(low, high, labels):
    axis = log_axis("runtime (hours)", [None, low, 0, (low + high) / 2, high])
    assert axis["type"] == "log"
    assert axis["ticktext"] == labels
    assert [float(label.replace(",", "")) for label in labels] == axis["tickvals"]


def test_a_log_axis_without_positive_values_leaves_the_ticks_to_plotly():
    assert "tickvals" not in log_axis("cost (Euro)", [None, 0])


def test_the_cost_quantile_curves_label_their_log_axis_in_full():
    chart = cost_quantile_curve(
        key="quantiles-nodes", title="Job size by quantile", axis_title="job size (nodes)",
        unit="nodes", points=[(Decimal(p), Decimal(1 + p // 30)) for p in range(101)],
    )  # fmt: skip
    assert layout(chart)["yaxis"]["ticktext"] == ["1", "2", "3", "4"]


def test_a_log_axis_of_one_value_between_steps_leaves_the_ticks_to_plotly():
    assert "tickvals" not in log_axis("runtime (hours)", [0.37])


def test_the_cost_share_curve_names_its_y_axis_in_words():
    # It read "share of the total cost (Euro), %".
    chart = cost_share_curve(
        key="cost-share", points=[(Decimal(1), 3, Decimal("17.6"))], currency="Euro"
    )
    assert layout(chart)["yaxis"]["title"]["text"] == "share of the total Euro cost (%)"

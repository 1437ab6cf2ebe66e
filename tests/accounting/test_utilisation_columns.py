"""The columns of a Q(T) series (the API's default shape, the page's charts) hold, value for
value, the figures of each bucket as ``utilisation_figures`` prints them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from accounting.utilisation.quality import (
    FIGURE_FIELDS,
    TOTAL,
    Utilisation,
    UtilisationWindow,
    utilisation_columns,
    utilisation_figures,
)

START = datetime(2026, 1, 1, tzinfo=UTC)
seconds = st.integers(min_value=0, max_value=10**9)
flop = st.fractions(min_value=0, max_value=10**20, max_denominator=10**6)
figures = st.builds(
    Utilisation, used_flop=flop, capacity_flop=flop, core_seconds=seconds,
    available_core_seconds=seconds, gpu_seconds=seconds, available_gpu_seconds=seconds,
)  # fmt: skip


@given(buckets=st.lists(st.tuples(figures, figures), max_size=30))
def test_each_column_holds_each_buckets_printed_figure(buckets):
    windows = [
        UtilisationWindow(
            start=START + timedelta(hours=index), end=START + timedelta(hours=index + 1),
            total=cpu + gpu, partitions={"cpu": cpu, "gpu": gpu},
        )
        for index, (cpu, gpu) in enumerate(buckets)
    ]  # fmt: skip
    columns = utilisation_columns(windows, ["cpu", "gpu"])
    assert list(columns) == ["cpu", "gpu", TOTAL]
    for name, series in columns.items():
        assert tuple(series) == FIGURE_FIELDS
        for index, window in enumerate(windows):
            figures_of = window.total if name == TOTAL else window.partitions[name]
            printed = utilisation_figures(figures_of)
            assert {field: series[field][index] for field in FIGURE_FIELDS} == printed


def test_ties_round_half_even_and_no_capacity_is_none():
    half = Fraction(1, 2 * 10**8)  # 0.0000005 % of 1: a tie at the sixth place
    windows = [
        UtilisationWindow(
            start=START, end=START + timedelta(hours=1),
            total=Utilisation(used_flop=half, capacity_flop=1, core_seconds=5,
                              available_core_seconds=0),
            partitions={},
        )
    ]  # fmt: skip
    total = utilisation_columns(windows, [])[TOTAL]
    assert total["q_percent"] == ["0.000000"]  # 0.0000005 rounds to the even 0
    assert total["core_percent"] == [None]
    assert total["used_flop"] == ["0"]

"""Cost statistics over many jobs: Listings 7-8 and the cost distribution of chapter 6.

Pure: no database. Quantiles are numpy's ``method="lower"``, deviations ``ddof=0``; the numpy
comparisons are skipped when numpy is not installed (requirements-dev.txt pins it).
"""

from __future__ import annotations

import random
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounting.costs import coststats
from accounting.costs.costmodels import cost_model_load, cost_model_parse, expand_nodelist, job_cost
from accounting.costs.coststats import (
    Column,
    JobRecord,
    column_statistics,
    concentration_lines,
    cost_concentration,
    cost_statistics,
    cost_table_build,
    details_cells,
    details_csv_cells,
    details_csv_header,
    format_value,
    job_totals,
    quantile_percents,
    statistics_csv_rows,
    statistics_table,
    table_columns,
)

MODELS = Path(__file__).resolve().parents[2] / "examples" / "costmodels"
SIZE = Column("size", "Size", "nodes", 0, "size")
RUNTIME = Column("runtime", "Runtime", "h", 4, "runtime")
CLOSE = 1e-9

# A job set that reproduces the Size column of Listing 7 cell for cell: 475 jobs, 854 nodes.
LISTING_7_SIZES = [1] * 210 + [2] * 158 + [3] * 106 + [10]


def display(value, column=SIZE):
    return format_value(value, column)


def share(value):
    return value.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)


def numpy_or_skip():
    return pytest.importorskip("numpy")


# -- the definitions, against numpy ---------------------------------------------------------------


@pytest.mark.parametrize("increment", [25, Decimal("12.5"), Decimal("6.25"), 50, 100])
@pytest.mark.parametrize("count", [1, 2, 5, 17, 33, 101])
def test_quantiles_mean_and_deviation_match_numpy_lower_and_ddof_0(increment, count):
    np = numpy_or_skip()
    rng = random.Random(count)
    values = [rng.randint(0, 1000) for _ in range(count)]
    stats = column_statistics(values, increment=increment)
    data = np.array(values, dtype=float)
    for quantile in stats.quantiles:
        expected = np.quantile(data, float(quantile.percent) / 100, method="lower")
        assert float(quantile.value) == expected
    assert float(stats.mean) == pytest.approx(np.mean(data), rel=CLOSE)
    assert float(stats.std_dev) == pytest.approx(np.std(data), rel=CLOSE, abs=CLOSE)
    assert float(stats.sum) == np.sum(data)
    assert stats.count == stats.total_count == count


def test_jobs_lacking_data_sort_first_and_count_as_zero_in_the_totals_like_numpy():
    np = numpy_or_skip()
    values = [None, 7, None, 3, 11, 2, None, 5, 13, 1]
    stats = column_statistics(values, increment=10)
    present = np.array([v for v in values if v is not None], dtype=float)
    as_zero = np.array([v or 0 for v in values], dtype=float)
    with_missing_first = np.array([-np.inf if v is None else v for v in values])
    for quantile in stats.quantiles:
        expected = np.quantile(with_missing_first, float(quantile.percent) / 100, method="lower")
        if expected == -np.inf:
            assert quantile.value is None
            assert quantile.share_percent is None
        else:
            assert float(quantile.value) == expected
    assert (stats.count, stats.total_count) == (7, 10)
    assert float(stats.mean) == pytest.approx(np.mean(present))
    assert float(stats.std_dev) == pytest.approx(np.std(present))
    assert float(stats.total_mean) == pytest.approx(np.mean(as_zero))
    assert float(stats.total_dev) == pytest.approx(np.std(as_zero))


@given(
    st.lists(st.one_of(st.none(), st.integers(0, 10**6)), min_size=1, max_size=60),
    st.sampled_from([1, 5, 10, 20, 25, 50]),
)
def test_every_quantile_is_numpys_lower_quantile_over_all_jobs(values, increment):
    np = numpy_or_skip()
    stats = column_statistics(values, increment=increment)
    data = np.array([-1 if v is None else v for v in values])
    for quantile in stats.quantiles:
        # numpy computes p * (N - 1) in floating point; the index here is exact, which can only
        # differ when the product is a whole number that floating point misses.
        exact = Fraction(str(quantile.percent)) * (len(values) - 1) / 100
        position = float(quantile.percent) / 100 * (len(values) - 1)
        if exact.denominator == 1 and position != int(exact):
            continue
        expected = np.quantile(data, float(quantile.percent) / 100, method="lower")
        assert (quantile.value is None) == (expected == -1)
        if quantile.value is not None:
            assert quantile.value == int(expected)


def test_the_quantile_index_is_exact_where_floating_point_is_not():
    # 0.29 * 100 is 28.999999999999996 in binary floating point; the 29 % quantile of 0..100 is 29.
    stats = column_statistics(list(range(101)), increment=1)
    assert stats.quantiles[29].value == 29


@given(st.lists(st.one_of(st.none(), st.integers(0, 10**9)), min_size=1, max_size=80))
def test_quantiles_and_their_shares_never_decrease_and_end_at_the_maximum(values):
    stats = column_statistics(values, increment=10)
    present = [v for v in values if v is not None]
    seen = [q for q in stats.quantiles if q.value is not None]
    assert [q.value for q in seen] == sorted(q.value for q in seen)
    shares = [q.share_percent for q in seen if q.share_percent is not None]
    assert shares == sorted(shares)
    if present:
        assert stats.quantiles[-1].value == max(present)
        if sum(present):
            assert stats.quantiles[-1].share_percent == 100
    assert stats.sum == sum(present)


def test_quantile_rows_step_by_the_increment_and_always_end_at_100():
    assert quantile_percents(25) == (0, 25, 50, 75, 100)
    assert quantile_percents(30) == (0, 30, 60, 90, 100)
    assert len(quantile_percents(1)) == 101
    with pytest.raises(ValueError, match="increment"):
        quantile_percents(0)


def test_a_scaled_column_is_the_exact_multiple_of_its_values():
    stats = column_statistics([3600, 7200, None], increment=50, scale=Fraction(1, 3600))
    assert [q.value for q in stats.quantiles] == [None, 1, 2]
    assert (stats.sum, stats.mean, stats.total_mean) == (3, Decimal("1.5"), 1)


# -- Listings 7 and 8 ---------------------------------------------------------------------------


def test_the_size_column_reproduces_listing_7():
    stats = column_statistics(LISTING_7_SIZES, increment=25)
    cells = [f"{display(q.value)} ({share(q.share_percent)}%)" for q in stats.quantiles]
    assert cells == [
        "1 nodes (0.1%)", "1 nodes (13.9%)", "2 nodes (31.1%)", "2 nodes (58.8%)",
        "10 nodes (100.0%)",
    ]  # fmt: skip
    assert display(stats.sum) == "854 nodes"
    assert (stats.count, stats.total_count) == (475, 475)
    assert [display(v) for v in (stats.mean, stats.std_dev, stats.total_mean, stats.total_dev)] == [
        "2 nodes", "1 nodes", "2 nodes", "1 nodes",
    ]  # fmt: skip


def test_energy_lacking_on_26_of_475_jobs_leaves_the_0_percent_cell_empty_as_in_listing_7():
    energies = [None] * 26 + list(range(1, 450))
    stats = column_statistics(energies, increment=25)
    assert stats.quantiles[0].value is None
    assert stats.quantiles[1].value is not None
    assert (stats.count, stats.total_count) == (449, 475)
    assert stats.total_mean == stats.sum / 475
    assert stats.mean == stats.sum / 449


def test_the_statistics_table_has_the_rows_and_cells_of_listings_7_and_8():
    model = cost_model_load(MODELS / "mistral-simple.cost")
    jobs = [
        JobRecord(str(n), f"m[{10000 + n}-{10000 + n + size - 1}]", 60, None)
        for n, size in enumerate(LISTING_7_SIZES)
    ]
    stats = cost_statistics(cost_table_build(model, jobs))
    lines = statistics_table(stats)
    assert lines[0].split() == [
        "statistics",
        "Size",
        "Runtime",
        "Energy",
        "All",
        "Procurement",
        "Total",
    ]
    labels = [line.split("  ")[0].strip() for line in lines if line and line[0] not in "=-"]
    assert labels[1:] == [
        "0%", "25%", "50%", "75%", "100%", "sum", "count", "total count", "mean", "std-dev",
        "total mean", "total dev",
    ]  # fmt: skip
    assert "1 nodes (0.1%)" in lines[2]
    assert "10 nodes (100.0%)" in lines[6]
    assert lines[8].split()[1:3] == ["854", "nodes"]


# -- pricing a batch ----------------------------------------------------------------------------

ENERGY_MODEL = (
    "currency Euro\n"
    "nodes Lean n[1-8]\n  rate Procurement 1 1/h\n  energy-rate Power 10 1/kWh\n"
    "nodes Fat n[7-8]\n  rate Extra 2 1/h\n  energy-rate Cooling 5 1/kWh\n"
)
BATCH = [
    JobRecord("1", "n1", 3600, 3_600_000),
    JobRecord("2", "n[1-2]", 1800, None),
    JobRecord("3", "n[6-8]", 7200, 1_800_000),
    JobRecord("4", "n8", 0, 0),
    JobRecord("5", "n[7-8],x1", 3600, 3_600_000),
]


def test_each_jobs_total_equals_the_job_cost_meters_total():
    model = cost_model_parse(ENERGY_MODEL)
    table = cost_table_build(model, BATCH)
    for job, total in zip(BATCH, job_totals(table), strict=True):
        alone = job_cost(
            model,
            nodes=expand_nodelist(job.nodelist),
            runtime_seconds=job.runtime_seconds,
            energy_joules=job.energy_joules,
        )
        assert abs(total - alone.total) <= Decimal("1e-24")


def test_energy_columns_count_only_jobs_with_an_energy_record_and_nodes_in_the_set():
    model = cost_model_parse(ENERGY_MODEL)
    stats = cost_statistics(cost_table_build(model, BATCH))
    by_name = {
        column.qualified: column_stats
        for column, column_stats in zip(stats.columns, stats.statistics, strict=True)
    }
    assert (by_name["Energy"].count, by_name["Energy"].total_count) == (3, 5)
    assert by_name["Lean/Power"].count == 3  # jobs 1, 3 and 5; 2 and 4 have no energy record
    assert by_name["Fat/Cooling"].count == 2  # jobs 3 and 5
    # Job 1: 1 kWh at 10; job 3: 0.5 kWh x 3/3 nodes at 10; job 5: 1 kWh x 2/3 nodes (x1 is in
    # no set) at 10.
    assert by_name["Lean/Power"].sum == Decimal(10) + Decimal(5) + Decimal(20) / 3
    assert by_name["Fat/Extra"].count == 3  # jobs 3, 4 and 5
    assert stats.jobs_with_unknown_nodes == 1
    assert by_name["Total"].count == 5


def test_the_integer_and_the_decimal_paths_give_the_same_statistics(monkeypatch):
    model = cost_model_parse(ENERGY_MODEL)
    rng = random.Random(7)
    jobs = [
        JobRecord(str(n), rng.choice(["n1", "n[1-3]", "n[6-8]", "n[5-8]", "n[2-8]", "n8"]),
                  rng.randint(0, 10**5), rng.choice([None, rng.randint(1, 10**8)]))
        for n in range(300)
    ]  # fmt: skip
    exact = cost_statistics(cost_table_build(model, jobs), increment=10)
    monkeypatch.setattr(coststats, "_MAX_DENOMINATOR", 1)
    decimal = cost_statistics(cost_table_build(model, jobs), increment=10)
    for left, right in zip(exact.statistics, decimal.statistics, strict=True):
        assert left.count == right.count
        assert abs(left.sum - right.sum) <= Decimal("1e-20") * max(1, abs(left.sum))
        for a, b in zip(left.quantiles, right.quantiles, strict=True):
            assert (a.value is None) == (b.value is None)
            if a.value is not None:
                assert abs(a.value - b.value) <= Decimal("1e-20") * max(1, a.value)


def test_a_time_rate_column_sums_the_job_cost_meters_rate_costs():
    model = cost_model_load(MODELS / "mistral-full.cost")
    jobs = [JobRecord(str(n), f"m[{10000 + n}-{10000 + 2 * n}]", 60 * n, None) for n in range(50)]
    rows = []
    stats = cost_statistics(cost_table_build(model, jobs, on_row=rows.append))
    procurement = stats.statistics[
        [c.qualified for c in stats.columns].index("BasicNode/Procurement")
    ]
    assert abs(procurement.sum - sum(row.rate_costs[0] for row in rows)) <= Decimal("1e-20")
    assert abs(stats.statistics[-1].sum - sum(row.total for row in rows)) <= Decimal("1e-20")


def test_max_runtime_leaves_out_longer_jobs_and_counts_them():
    model = cost_model_parse(ENERGY_MODEL)
    table = cost_table_build(model, BATCH, max_runtime_seconds=3600)
    assert (len(table), table.dropped_long_jobs) == (4, 1)  # job 3 ran 2 h
    assert cost_statistics(table).job_count == 4


def test_an_unreadable_node_list_names_its_job():
    model = cost_model_parse(ENERGY_MODEL)
    with pytest.raises(ValueError, match="job 9: 'n\\[1-' is not a Slurm hostlist"):
        cost_table_build(model, [JobRecord("9", "n[1-", 1, None)])


def test_no_jobs_give_an_empty_table_without_errors():
    model = cost_model_parse(ENERGY_MODEL)
    stats = cost_statistics(cost_table_build(model, []))
    assert stats.job_count == 0
    assert all(q.value is None for q in stats.statistics[0].quantiles)
    assert stats.statistics[-1].sum == 0
    assert concentration_lines(stats) == []
    assert statistics_table(stats)


def test_totals_only_keeps_the_total_column():
    model = cost_model_parse(ENERGY_MODEL)
    stats = cost_statistics(cost_table_build(model, BATCH), totals_only=True)
    assert [column.header for column in stats.columns] == ["Total"]


# -- the cumulative cost distribution (ch. 6) ----------------------------------------------------


def test_the_most_expensive_percent_of_jobs_and_their_share_of_the_cost():
    totals = [Decimal(1)] * 99 + [Decimal(901)]
    top_1, top_10 = cost_concentration(totals, top_percents=[Decimal(1), Decimal(10)])
    assert (top_1.jobs, top_1.share_percent) == (1, Decimal("90.1"))
    assert (top_10.jobs, top_10.share_percent) == (10, Decimal("91"))


def test_a_fraction_of_a_job_counts_as_a_whole_job():
    [top] = cost_concentration([Decimal(n) for n in range(1, 11)], top_percents=[Decimal(1)])
    assert top.jobs == 1
    assert top.share_percent == Decimal(10) / 55 * 100


# -- rendering ----------------------------------------------------------------------------------


def test_details_rows_show_blank_cells_where_a_job_lacks_data():
    model = cost_model_parse(ENERGY_MODEL)
    rows = []
    cost_table_build(model, BATCH, on_row=rows.append)
    columns = table_columns(model)
    cells = details_cells(rows[1], model, columns)  # job 2: lean nodes, no energy record
    assert cells == [
        "2",
        "2 nodes",
        "0.5000 h",
        "",
        "2 nodes",
        "1.00 Euro",
        "",
        "",
        "",
        "",
        "1.00 Euro",
    ]
    assert details_csv_header(columns)[:3] == ["job_id", "Size [nodes]", "Runtime [h]"]
    assert details_csv_cells(rows[1], model, columns)[-1] == "1.000000"


def test_statistics_as_csv_are_long_rows_with_the_distribution_at_the_end():
    model = cost_model_parse(ENERGY_MODEL)
    rows = list(statistics_csv_rows(cost_statistics(cost_table_build(model, BATCH))))
    assert rows[0] == ["column", "statistic", "value", "share_percent"]
    assert ["Size [nodes]", "count", "5", ""] in rows
    assert rows[-1][:3] == ["Total [Euro]", "top 50%", "3"]

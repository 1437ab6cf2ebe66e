"""A chart's data table (``Chart.table_html``), built as text for speed: every value escaped,
numbers grouped and right-aligned, an empty table said so."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.utils.safestring import mark_safe

from kit.charts import Chart


def _table(columns, rows):
    return str(Chart(key="k", title="t", figure_json="{}", columns=columns, rows=rows).table_html)


def test_every_value_and_heading_is_escaped_and_numbers_are_grouped():
    html = _table(
        ("user <b>", "SU"),
        [("<script>alert(1)</script>", Decimal("1234567.125")), ("o'neil & co", 3), (True, None)],
    )

    assert html == (
        '<table class="data"><thead><tr><th>user &lt;b&gt;</th><th>SU</th></tr></thead><tbody>'
        "<tr><td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"
        '<td class="num">1,234,567.125</td></tr>'
        '<tr><td>o&#x27;neil &amp; co</td><td class="num">3</td></tr>'
        "<tr><td>True</td><td>None</td></tr></tbody></table>"
    )


def test_a_value_already_safe_is_kept_and_dates_print_as_dates():
    html = _table(("day", "note"), [(date(2026, 11, 28), mark_safe("<em>kept</em>"))])

    assert "<td>2026-11-28</td><td><em>kept</em></td>" in html


def test_a_table_without_rows_says_so_across_its_columns():
    assert '<tr><td colspan="3" class="empty">No data.</td></tr>' in _table(("a", "b", "c"), [])

"""Every page, as every role, at a phone's width (390 px): the page itself never scrolls
sideways (issue 31, item 4; docs/pages.md, Phones). What is wider than a phone (a table, a
raw line) scrolls inside its own box. The pages and roles are those of the accessibility walk
(tests/browser/test_accessibility.py).

The anonymous pages (sign-in, home) are checked at phone width by test_layout.py's menu tests
and the accessibility test; this walk is the signed-in portal.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounting.ledger.pipeline import jobs_import
from benchmarks.sacct_generator import sacct_lines
from tests.browser.test_accessibility import (
    CHARTS_READY,
    WIDTHS,
    _centre_in_full,
    pages_walk,
)
from tests.browser.test_layout import CUT_OFF_CELLS

pytestmark = pytest.mark.django_db(transaction=True)

# How much wider than the window the page is, and the outermost elements that stick out of
# it (to say what to fix).
OVERFLOW = """() => {
  const root = document.documentElement, body = document.body;
  const wide = Math.max(root.scrollWidth - root.clientWidth, body.scrollWidth - root.clientWidth);
  if (wide <= 0) return null;
  const limit = root.clientWidth + 1;
  const clipped = node => {
    // (what is absolutely placed escapes a box that clips unless that box is positioned)
    if (getComputedStyle(node).position === 'absolute') return false;
    for (let box = node.parentElement; box && box !== body; box = box.parentElement) {
      if (getComputedStyle(box).overflowX !== 'visible') return true;
    }
    return false;
  };
  const out = [...body.querySelectorAll('*')]
    .filter(node => node.getBoundingClientRect().right > limit && !clipped(node))
    .filter(node => node.parentElement === body
            || node.parentElement.getBoundingClientRect().right <= limit);
  const name = node => node.tagName.toLowerCase() + (node.id ? '#' + node.id : '')
    + (node.className && typeof node.className === 'string'
       ? '.' + node.className.trim().split(/\\s+/).join('.') : '');
  return {width: root.scrollWidth, out: out.slice(0, 5).map(node =>
    `${name(node)} (${Math.round(node.getBoundingClientRect().right)} px)`)};
}"""

# The charts whose toolbar (Plotly's modebar, shown on a tap) would lie over their title.
TOOLBAR_ON_TITLE = """() => [...document.querySelectorAll('[data-figure]')].filter(chart => {
  const bar = chart.querySelector('.modebar'), title = chart.querySelector('.gtitle');
  if (!bar || !title) return false;
  const a = bar.getBoundingClientRect(), b = title.getBoundingClientRect();
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}).map(chart => chart.querySelector('.gtitle').textContent)"""
# Raw lines (sacct's, a command) in tables squeezed to a column too narrow to read.
RAW_SQUEEZED = """() => [...document.querySelectorAll('table.data td code.raw')]
  .filter(raw => raw.offsetParent !== null && raw.textContent.length > 20)
  .filter(raw => raw.getBoundingClientRect().width < 150)
  .map(raw => raw.textContent.slice(0, 40))"""

# Pages whose tables show every column on a phone, without scrolling them sideways (beside
# test_layout.py's researcher pages): the explorer, which people open on a phone to compare.
WHOLE_TABLES = {"accounting:cost-ratio": "#my-application, #node-weights"}


def test_on_a_phone_no_page_scrolls_sideways(live_server, transactional_db, sign_in):
    site = _centre_in_full()
    # A whole sacct line quarantined (an account the portal does not know), as imports make
    # them: the quarantine page's raw-line column has something as long as real ones to show.
    header, line, *_ = sacct_lines(lines=1, seed=7, start=timezone.now() - timedelta(days=2))
    account = line.split("|")[header.split("|").index("Account")]
    jobs_import(cluster=site.cluster, lines=[header, line.replace(account, "nobody2")],
                source="a line for the phone test")  # fmt: skip
    width, height = WIDTHS["phone"]
    problems = []
    pages = 0
    for page, name, where in pages_walk(site, live_server, sign_in, width=width, height=height):
        page.wait_for_function(CHARTS_READY)
        pages += 1
        overflow = page.evaluate(OVERFLOW)
        if overflow is not None:
            problems.append(f"{where}: {overflow['width']} px wide; {', '.join(overflow['out'])}")
        if covered := page.evaluate(TOOLBAR_ON_TITLE):
            problems.append(f"{where}: the chart toolbar covers the titles {covered}")
        if name.split(" ")[0] in WHOLE_TABLES:
            for table in page.locator(WHOLE_TABLES[name.split(" ")[0]]).all():
                if table.is_visible() and (cut := table.evaluate(CUT_OFF_CELLS)):
                    problems.append(f"{where}: columns cut off {cut}")
        if squeezed := page.evaluate(RAW_SQUEEZED):
            problems.append(f"{where}: raw lines squeezed under 150 px: {squeezed}")
    assert pages > 100  # every page as every role that reads it
    assert not problems, f"{len(problems)} problems at {width} px:\n" + "\n".join(problems)

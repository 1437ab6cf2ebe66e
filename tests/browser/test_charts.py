"""Every chart of every page, as every role, at laptop (1280 px) and phone (390 px) width:
each word of the drawing is shown and whole (issue 31, the screenshots' review). Plotly hides a
tick label that would stick out of the chart (the "100 %" at the end of an axis, a phone's
last date) and lets a title or a gauge's label run past the chart's edge, cut; the pages
widen a margin or wrap a title instead (``static/js/charts.js``)."""

from __future__ import annotations

import pytest

from tests.browser.test_accessibility import CHARTS_READY, WIDTHS, _centre_in_full, pages_walk

pytestmark = pytest.mark.django_db(transaction=True)

# The text of each chart that Plotly hid for want of room, or that sticks out of the chart.
CHART_TEXT_CUT = """() => [...document.querySelectorAll('[data-figure]')].flatMap(chart => {
  const box = chart.getBoundingClientRect();
  return [...chart.querySelectorAll('svg.main-svg text')]
    .filter(text => text.textContent.trim() !== '' && !text.closest('.hoverlayer'))
    .filter(text => {
      if (getComputedStyle(text).display === 'none') return true;
      const drawn = text.getBoundingClientRect();
      return drawn.left < box.left - 1 || drawn.right > box.right + 1
        || drawn.top < box.top - 1 || drawn.bottom > box.bottom + 1;
    })
    .map(text => `${chart.getAttribute('aria-label')}: "${text.textContent}"`);
})"""


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_no_chart_hides_or_cuts_its_words(live_server, transactional_db, sign_in, size):
    site = _centre_in_full()
    width, height = WIDTHS[size]
    problems = []
    pages = 0
    for page, _name, where in pages_walk(site, live_server, sign_in, width=width, height=height):
        page.wait_for_function(CHARTS_READY)
        pages += 1
        if cut := page.evaluate(CHART_TEXT_CUT):
            problems.append(f"{where}: {cut}")
    assert pages > 100  # every page as every role that reads it
    assert not problems, f"{len(problems)} pages at {width} px:\n" + "\n".join(problems)


def test_a_chart_fits_its_words_again_when_the_window_narrows(live_server, scenario, sign_in):
    # A laptop window narrowed to a phone's (or a phone turned upright): the burn-downs'
    # titles ran off the chart, as on a phone before the fitting.
    page = sign_in("alice", width=1280, height=800)
    page.goto(f"{live_server.url}/allocations/projects/pawsey0001/")
    page.wait_for_function(CHARTS_READY)
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_function(f"({CHART_TEXT_CUT})().length === 0", timeout=10_000)

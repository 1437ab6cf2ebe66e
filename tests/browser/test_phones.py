"""Every page, as every role, at a phone's width (390 px): the page itself never scrolls
sideways (issue 31, item 4; docs/pages.md, Phones). What is wider than a phone (a table, a
raw line) scrolls inside its own box. The pages and roles are those of the accessibility walk
(tests/browser/test_accessibility.py).

The anonymous pages (sign-in, home) are checked at phone width by test_layout.py's menu tests
and the accessibility test; this walk is the signed-in portal.
"""

from __future__ import annotations

import pytest

from tests.browser.test_accessibility import (
    CHARTS_READY,
    WIDTHS,
    _centre_in_full,
    pages_walk,
)

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


def test_on_a_phone_no_page_scrolls_sideways(live_server, transactional_db, sign_in):
    site = _centre_in_full()
    width, height = WIDTHS["phone"]
    problems = []
    pages = 0
    for page, _name, where in pages_walk(site, live_server, sign_in, width=width, height=height):
        page.wait_for_function(CHARTS_READY)
        pages += 1
        overflow = page.evaluate(OVERFLOW)
        if overflow is not None:
            problems.append(f"{where}: {overflow['width']} px wide; {', '.join(overflow['out'])}")
    assert pages > 100  # every page as every role that reads it
    assert not problems, f"{len(problems)} pages wider than {width} px:\n" + "\n".join(problems)

"""axe-core on every page, for every role, at laptop and phone widths: no serious or critical
violation (docs/pages.md, Accessibility).

The pages come from the permission matrix (tests/pages/test_permission_matrix.py), which the
URL configuration keeps complete: every URL name that answers a GET, outside the API, as
every role allowed to read it, with the URLs built for pawsey0003's objects. Anonymous
visitors see the sign-in page (also after a failed attempt) and the home page. axe-core is the
npm package (package.json), loaded into each page from ``node_modules``.

Each page is loaded once per role and checked at laptop width; the first role that reads a page
(in the order of ``USERNAMES``: researchers first, who use the portal on a phone most) checks it
at phone width too: the window is resized, the charts redrawn to fit (as Plotly does when a
window is resized), and axe-core runs on that layout. A page's layout at a width is the same
whoever reads it; what a role adds (links, forms) is checked at laptop width for every role.
The phone checks of the other roles doubled the test's time and found nothing the first one
did not.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from accounting.costs.services import cost_model_version_create
from accounting.models import Partition
from accounting.utilisation.overhead import overhead_run_compute
from tests.browser.conftest import PASSWORD, ROOT, build_scenario
from tests.pages.conftest import Site, site_of
from tests.pages.test_permission_matrix import MATRIX, rare_objects_make

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"laptop": (1280, 800), "phone": (390, 844)}
USERNAMES = {"member": "alice", "other": "bob", "pi": "carol", "committee": "erin",
             "chair": "dana", "staff": "staff"}  # fmt: skip  # as in tests/pages/conftest.py
# URL names that answer a GET with JSON (or a decision letter's PDF, the outputs' CSV and
# BibTeX), not a page; any other answer that is not HTML fails.
NOT_PAGES = {
    "healthz", "readyz", "accounting:cost-ratio-live", "allocations:request-letter",
    "allocations:output-export-csv", "allocations:output-export-bibtex",
}  # fmt: skip
SERIOUS = {"serious", "critical"}
# Every chart drawn, and its drawing hidden from screen readers (static/js/charts.js): the
# chart's name and its data table speak for it.
CHARTS_READY = """[...document.querySelectorAll('[data-figure]')].every(chart => {
    const drawings = [...chart.querySelectorAll('svg.main-svg')];
    return drawings.length > 0 && drawings.every(svg => svg.getAttribute('aria-hidden') === 'true');
})"""
CHARTS_RESIZE = (
    "Promise.all([...document.querySelectorAll('[data-figure]')]"
    ".map(chart => window.Plotly.Plots.resize(chart)))"
)
AXE_RUN = "axe.run(document, {resultTypes: ['violations']})"


def page_urls(site: Site) -> dict[str, str]:
    """Every page of the matrix by URL name, for pawsey0003's objects."""
    return {
        name: entry.url(site)
        for name, entry in sorted(MATRIX.items())
        if entry.read is not None and not name.startswith("api:") and name not in NOT_PAGES
    }


def _centre_in_full() -> Site:
    """The browser scenario, plus what the staff pages need to draw all their charts: a cost
    model (money per job), an overhead run, the matrix's rare objects (a quarantined line, a
    proposed priority action, a priority policy)."""
    site = site_of(build_scenario(history_lines=2400))
    cost_model_version_create(
        cluster=site.cluster, name="demo",
        text=(ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text(),
    )  # fmt: skip
    rare_objects_make(site)
    today = timezone.localtime(timezone.now(), site.cluster.zoneinfo).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    overhead_run_compute(
        cluster=site.cluster, start=today - timedelta(days=3), end=today, step="hour"
    )
    return site


def _results_shown(site: Site) -> dict[str, str]:
    """Pages in the state their results add to: a quote with its chart, the explorer with an
    application of one's own."""
    gpu = Partition.objects.get(cluster=site.cluster, name="gpu")
    quote = urlencode({"partition": gpu.pk, "nodes": 1, "gpus_per_node": 2,
                       "memory_per_node": "120G", "hours": 6})  # fmt: skip
    explorer = urlencode({"system": "paper", "cpu_node_hours": 100, "speedup": 9,
                          "grid_intensity": 500, "applications": "MyCode, 20"})  # fmt: skip
    return {
        "accounting:quote (a quote)": f"/accounting/quote/?{quote}",
        "accounting:cost-ratio (an application)": f"/accounting/cost-ratio/?{explorer}",
    }


class Audit:
    """Runs axe-core on pages and keeps what it finds, described for whoever fixes it."""

    def __init__(self, axe_script: str) -> None:
        self.axe_script = axe_script
        self.problems: list[str] = []
        self.checks = 0
        self.axe_seconds = 0.0

    def page(self, page: Any, where: str, *, phone: bool = True) -> None:
        """The page at laptop width, then (with ``phone``) at phone width."""
        page.wait_for_function(CHARTS_READY)
        page.add_script_tag(path=self.axe_script)
        for size, (width, height) in WIDTHS.items():
            if size == "phone" and not phone:
                continue
            page.set_viewport_size({"width": width, "height": height})
            page.evaluate(f"window.Plotly && {CHARTS_RESIZE}")
            page.wait_for_function(CHARTS_READY)
            self.checks += 1
            began = time.monotonic()
            violations = page.evaluate(AXE_RUN)["violations"]
            self.axe_seconds += time.monotonic() - began
            self.problems += [
                _described(violation, f"{where} at {size} ({width} px)")
                for violation in violations
                if violation["impact"] in SERIOUS
            ]


def _described(violation: dict[str, Any], where: str) -> str:
    shown = violation["nodes"][:8]
    nodes = "".join(
        f"\n      {' '.join(map(str, node['target']))}\n        {node['html'][:300]}"
        for node in shown
    )
    more = len(violation["nodes"]) - len(shown)
    return (
        f"{where}: {violation['id']} ({violation['impact']}) {violation['help']}\n"
        f"    {violation['helpUrl']}{nodes}" + (f"\n      ... and {more} more" if more else "")
    )


def _open(page: Any, url: str, where: str) -> None:
    response = page.goto(url)
    assert response is not None, where
    assert response.ok, f"{where}: {response.status}"
    kind = response.headers.get("content-type", "")
    assert kind.startswith("text/html"), f"{where} answers {kind}: add it to NOT_PAGES"


def pages_walk(
    site: Site, live_server: Any, sign_in: Any, *, width: int, height: int
) -> Iterator[tuple[Any, str, str]]:
    """Every page of the matrix as every role allowed to read it (``USERNAMES``' order), plus
    the member's pages with results shown: yields the browser page, opened and answered with
    HTML, its URL name, and where it is (for messages). One signed-in window per role, at
    ``width`` x ``height``."""
    urls = page_urls(site)
    for role, username in USERNAMES.items():
        page = sign_in(username, width=width, height=height)
        readable = {name: url for name, url in urls.items() if role in (MATRIX[name].read or ())}
        if role == "member":
            readable |= _results_shown(site)
        for name, url in readable.items():
            where = f"{name} {url} as {role} ({username})"
            _open(page, live_server.url + url, where)
            yield page, name, where
        page.context.close()


def test_every_page_for_every_role_has_no_serious_accessibility_violation(
    live_server, transactional_db, browser, sign_in, axe_script
):
    site = _centre_in_full()
    audit = Audit(str(axe_script))
    started = time.monotonic()

    width, height = WIDTHS["laptop"]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    for name, url in {"login": "/accounts/login/", "home": "/"}.items():
        _open(page, live_server.url + url, f"{name} {url} as anonymous")
        audit.page(page, f"{name} {url} as anonymous")
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD + "-wrong")
    page.click("form button[type=submit]")
    page.locator(".errorlist").first.wait_for()
    audit.page(page, "login /accounts/login/ as anonymous, after a wrong password")
    context.close()

    on_phone: set[str] = set()  # the pages already checked at phone width
    for page, name, where in pages_walk(site, live_server, sign_in, width=width, height=height):
        audit.page(page, where, phone=name not in on_phone)
        on_phone.add(name)
        page.set_viewport_size({"width": width, "height": height})

    print(
        f"axe-core: {audit.checks} checks in {time.monotonic() - started:.0f} s,"
        f" {audit.axe_seconds:.0f} s of them in axe-core itself"
    )
    # every page as each role at laptop width, and each page once at phone width
    assert audit.checks > 100
    problems = audit.problems
    assert not problems, (
        f"{len(problems)} serious or critical accessibility violations (axe-core):\n"
        + "\n".join(problems)
    )

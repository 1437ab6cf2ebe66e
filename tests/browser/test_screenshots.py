"""Screenshots of the main pages on a laptop (1280 px) and a phone (390 px), every chart drawn
and no console error on any page. ``make screenshots`` sets PORTAL_SCREENSHOTS=docs/screenshots
to refresh the pictures in the docs; otherwise they go to a temporary directory."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlencode

import pytest

from accounting.costs.services import cost_model_version_create
from accounting.models import Partition
from tests.browser.conftest import ROOT, build_scenario

pytestmark = pytest.mark.django_db(transaction=True)

CHARTS_DRAWN = (
    "[...document.querySelectorAll('[data-figure]')].every(e => e.querySelector('.main-svg'))"
)


def _shoot(page, url: str, path: Path) -> None:
    page.goto(url)
    page.wait_for_function(CHARTS_DRAWN)
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def test_screenshots_of_the_main_pages(live_server, transactional_db, sign_in, tmp_path):
    wanted_folder = os.environ.get("PORTAL_SCREENSHOTS")
    # Months of jobs make the pictures in the docs; the everyday run needs fewer.
    scenario = build_scenario(history_lines=8000 if wanted_folder else 2400)
    folder = Path(wanted_folder or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    gpu = Partition.objects.get(cluster=scenario.cluster, name="gpu")
    quote = urlencode({"partition": gpu.pk, "nodes": 1, "gpus_per_node": 2,
                       "memory_per_node": "120G", "hours": 6})  # fmt: skip
    explorer = urlencode({"system": "paper", "cpu_node_hours": 100, "speedup": 9,
                          "grid_intensity": 500, "applications": "MyCode, 20"})  # fmt: skip
    # The staff pages need money: the demo's cost model of the cluster, priced.
    cost_model_version_create(
        cluster=scenario.cluster, name="demo",
        text=(ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text(),
    )  # fmt: skip
    cluster = scenario.cluster.name
    shots = {
        "alice": [
            ("dashboard", "/", ("desktop", "phone")),
            ("project", "/allocations/projects/pawsey0001/", ("desktop", "phone")),
            ("jobs", "/accounting/projects/pawsey0001/jobs/?sort=-su", ("desktop",)),
            ("job-detail", f"/accounting/jobs/{scenario.job_id}/", ("desktop", "phone")),
            (
                "project-efficiency",
                "/accounting/projects/pawsey0001/efficiency/",
                ("desktop", "phone"),
            ),
            ("quote", f"/accounting/quote/?{quote}", ("desktop",)),
            ("cost-ratio-explorer", f"/accounting/cost-ratio/?{explorer}", ("desktop", "phone")),
        ],
        "dana": [("round-overview", f"/allocations/rounds/{scenario.round.pk}/", ("desktop",))],
        "staff": [
            ("imports", "/accounting/imports/", ("desktop",)),
            ("utilisation", f"/accounting/utilisation/?cluster={cluster}&step=day", ("desktop",)),
            ("cost-distribution", f"/accounting/costs/?cluster={cluster}", ("desktop",)),
            ("efficiency", "/accounting/efficiency/?start=2000-01-01", ("desktop",)),
        ],
    }
    sizes = {"desktop": (1280, 800), "phone": (390, 844)}
    taken = []
    for username, pages in shots.items():
        for size, (width, height) in sizes.items():
            wanted = [(name, url) for name, url, where in pages if size in where]
            if not wanted:
                continue
            page = sign_in(username, width=width, height=height)
            for name, url in wanted:
                path = folder / f"{size}-{name}.png"
                _shoot(page, base + url, path)
                taken.append(path.name)
            assert page.errors == [], f"console errors as {username} on {size}: {page.errors}"
    assert len(taken) == 17

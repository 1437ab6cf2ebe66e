"""Real browser tests: Playwright for Python driving Debian's Chromium (/usr/bin/chromium).

The ``browser`` fixture installs Chromium with apt when it is missing and we are root, and
``axe_script`` installs axe-core (package.json) with ``npm ci``; each skips with the reason
only when that is impossible and CI is not set (in CI the tests must run, so they fail
instead). Pages are served by pytest-django's ``live_server`` on a transactional test database
filled by :func:`build_scenario`, and users sign in through the real login form.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounting.clusters.quotes import QuoteRequest
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, Job, Partition
from allocations.grants.selectors import balance_get
from allocations.grants.services import adjustment_refund, allocation_grant
from allocations.models import AllocationRequest, AllocationRound
from allocations.rounds.services import (
    request_create,
    request_estimate_add,
    request_review_start,
    request_submit,
    review_submit,
    round_create,
)
from allocations.slurm.enforcement import thresholds_check
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project, ResourcePool
from tests.conftest import IN_CI
from tests.factories import (
    MembershipFactory,
    ProjectFactory,
    ResourcePoolFactory,
    UserFactory,
    example_cluster,
)
from tests.system_packages import apt_missing_reason, npm_missing_reason

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # package.json pins axe-core
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PASSWORD = "pw-for-tests"  # tests/factories.py
HISTORY_DAYS = 120


def _chromium_missing_reason() -> str | None:
    """Install Debian's Chromium when it is missing and we may; else say why we cannot."""
    return apt_missing_reason(CHROMIUM, "chromium")


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"browser tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def axe_script() -> Path:
    """axe-core's script, installed from the npm registry by ``npm ci`` when missing; pages
    load it from this file (``page.add_script_tag(path=...)``), never from a CDN."""
    reason = npm_missing_reason(AXE, ROOT)
    if reason is not None:
        _unavailable(reason)
    return AXE


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module. Playwright's sync API keeps an event loop running in this
    thread while it is open, and the tests' fixtures still use the synchronous ORM, so Django's
    async-safety guard stands aside until the module ends (and with it the browser): later
    tests, and the subprocesses they start, see neither."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - requirements-dev.txt pins playwright
        _unavailable("playwright is not installed (pip install -r requirements-dev.txt)")
    reason = _chromium_missing_reason()
    if reason is not None:
        _unavailable(reason)
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield launched
            launched.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@dataclass
class Scenario:
    cluster: Cluster
    users: dict[str, User]
    projects: dict[str, Project]
    pools: dict[str, ResourcePool]
    round: AllocationRound
    requests: dict[str, AllocationRequest]  # by project code
    job_id: int  # a memory-dominated job of pawsey0001


# Per project: the share of its current budget period used (sets the grant after the import).
TARGET_USE = {"pawsey0001": Decimal("0.62"), "pawsey0002": Decimal("0.93"),
              "pawsey0003": Decimal("0.79"), "pawsey0004": Decimal("1.04")}  # fmt: skip


def build_scenario(*, history_lines: int = 6000, seed: int = 2026) -> Scenario:
    """A small centre with months of generated jobs, grants that put projects at different
    alert levels, adjustments, an open round with requests and reviews, and an enforcement
    action: enough for every page to show something real."""
    for name in ("setonix", "paper-test-system"):
        example_cluster(name)
    cluster = example_cluster("slurm-testbed")
    users: dict[str, Any] = {
        name: UserFactory(username=name) for name in ("alice", "bob", "carol", "dana", "erin")
    }
    users["staff"] = UserFactory(username="staff", is_staff=True)
    titles = {
        "pawsey0001": "Climate ensembles", "pawsey0002": "Genome assembly",
        "pawsey0003": "Radio astronomy imaging", "pawsey0004": "Battery materials",
    }  # fmt: skip
    pis = {"pawsey0001": "alice", "pawsey0002": "bob", "pawsey0003": "carol", "pawsey0004": "bob"}
    projects = {
        code: ProjectFactory.create(code=code, title=title, pi=users[pis[code]])
        for code, title in titles.items()
    }
    MembershipFactory(project=projects["pawsey0001"], user=users["carol"])
    MembershipFactory(project=projects["pawsey0003"], user=users["alice"], notify=True)
    pools = {
        "cpu": ResourcePoolFactory.create(name="testbed CPU", cluster=cluster, partitions=["work"]),
        "gpu": ResourcePoolFactory.create(
            name="testbed GPU", cluster=cluster, partitions=["gpu"], slurm_account_suffix="-gpu"
        ),
    }
    now = timezone.now()
    history = sacct_lines(
        lines=history_lines, seed=seed, start=now - timedelta(days=HISTORY_DAYS),
        mean_gap_seconds=int(HISTORY_DAYS * 86400 / (history_lines / 4.2)), now=now,
        usage=True,  # what the jobs used: the efficiency pages have something to show
    )  # fmt: skip
    jobs_import(cluster=cluster, lines=history, source="generated history")

    # Grants: a year in quarters whose current quarter started 50 days ago, sized so that
    # each project has used TARGET_USE of it.
    today = timezone.localdate()
    start = today - timedelta(days=50)
    end = start.replace(year=start.year + 1)
    for code, project in projects.items():
        for pool in pools.values():
            allocation_grant(
                project=project, pool=pool, amount=Decimal(4000), period_start=start,
                period_end=end, actor=users["staff"], reason="scenario",
            )  # fmt: skip
            balance = balance_get(project=project, pool=pool)
            assert balance is not None
            wanted = (balance.used_su / TARGET_USE[code]).quantize(Decimal(1), ROUND_HALF_UP)
            allocation = project.allocations.get(pool=pool)
            current = allocation.budget_periods.get(start__lte=today, end__gt=today)
            current.budget_su = max(wanted, Decimal(100))
            current.save(update_fields=["budget_su"])
    refunded = Job.objects.filter(
        project=projects["pawsey0001"], partition__name="work", service_units__gt=0,
        end__date__gte=start,
    ).order_by("-service_units").first()  # fmt: skip
    if refunded is not None:
        adjustment_refund(
            project=projects["pawsey0001"], pool=pools["cpu"], job=refunded,
            actor=users["staff"], reason="node failure during the run",
        )  # fmt: skip
    thresholds_check()

    round_ = round_create(
        name="2027 merit round", opens_at=now - timedelta(days=3),
        closes_at=now + timedelta(days=25), period_start=end,
        period_end=end.replace(year=end.year + 1),
        available={pools["cpu"]: Decimal(500_000), pools["gpu"]: Decimal(200_000)},
        chair=users["dana"], committee=[users["erin"]], actor=users["staff"],
    )  # fmt: skip
    work = Partition.objects.get(cluster=cluster, name="work")
    requests = {}

    for code, cpu_su, gpu_su, stage in (
        ("pawsey0001", 120_000, 40_000, "reviewed"), ("pawsey0002", 260_000, 90_000, "submitted"),
        ("pawsey0003", 80_000, 100_000, "under review"),
    ):  # fmt: skip
        pi = users[pis[code]]
        request = request_create(
            round_=round_, project=projects[code], actor=pi,
            justification="Production runs of the next campaign.",
            amounts={pools["cpu"]: Decimal(cpu_su), pools["gpu"]: Decimal(gpu_su)},
        )  # fmt: skip
        request_estimate_add(
            request=request, actor=pi, partition=work, jobs=400,
            quote=QuoteRequest(nodes=2, hours=Decimal(12)), description="ensemble members",
        )  # fmt: skip
        request_submit(request=request, actor=pi)
        if stage != "submitted":
            request_review_start(request=request, actor=users["dana"])
        if stage == "reviewed":
            review_submit(request=request, reviewer=users["erin"], score=4, comment="Strong case.")
        requests[code] = request
    memory_job = (
        Job.objects.filter(project=projects["pawsey0001"], dominant_resource="memory",
                           charge_state=Job.ChargeState.CHARGED, nnodes=1)
        .order_by("-service_units")
        .first()
    )  # fmt: skip
    assert memory_job is not None
    return Scenario(
        cluster=cluster, users=users, projects=projects, pools=pools, round=round_,
        requests=requests, job_id=memory_job.pk,
    )  # fmt: skip


@pytest.fixture
def scenario(transactional_db: None) -> Scenario:
    return build_scenario(history_lines=2400)


@pytest.fixture
def sign_in(live_server: Any, browser: Any) -> Iterator[Any]:
    """``sign_in(username, viewport=...)``: a new page, signed in through the login form, that
    records console errors and uncaught exceptions in ``page.errors``."""
    contexts = []

    def open_page(username: str, *, width: int = 1280, height: int = 800) -> Any:
        context = browser.new_context(
            viewport={"width": width, "height": height}, device_scale_factor=1,
            accept_downloads=True,
        )  # fmt: skip
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on(
            "console",
            lambda message: page.errors.append(message.text) if message.type == "error" else None,
        )
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("form button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    yield open_page
    for context in contexts:
        context.close()

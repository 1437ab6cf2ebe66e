"""A small centre with data of every kind, and API clients for each role.

``world`` builds on the allocations tests' ``centre`` (testbed cluster, two pools, users and
projects pawsey0001-0004): grants, the sample's jobs and their roll-ups, a round with a draft,
a submitted and an under-review request, a review, adjustments and an import with a
quarantined line. Roles for the permission matrix:

    anonymous  no credentials
    member     carol, member of pawsey0003 (PI alice)
    outsider   bob, PI of pawsey0002 and pawsey0004 (a member of other projects)
    pi         alice, PI of pawsey0003 (and pawsey0001)
    committee  reviewer, on the round's committee, in no project
    chair      chair, the round's chair, in no project
    staff      ops
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any

import pytest
from django.core.cache import cache
from django.db import transaction
from django.db.models import Model
from rest_framework.test import APIClient

from accounting.clusters.quotes import QuoteRequest
from accounting.ledger.pipeline import jobs_import
from accounting.models import ImportRun, Job, Partition, QuarantinedRecord
from allocations.grants.services import adjustment_refund, adjustment_top_up, allocation_grant
from allocations.models import Adjustment, Allocation, AllocationRequest, AllocationRound, Review
from allocations.rounds.services import (
    request_create,
    request_estimate_add,
    request_review_start,
    request_submit,
    review_submit,
    round_create,
)
from people.tokens import token_create
from tests.allocations.conftest import (  # noqa: F401 (pytest fixture)
    PERIOD,
    SAMPLE,
    SAMPLE_DAY,
    Centre,
    centre,
    centre_build,
    open_round_times,
)

# Requests tests/api/test_fuzz.py sent, per role: printed at the end of the run.
FUZZ_CASES = pytest.StashKey[Counter[str]]()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    counts = config.stash.get(FUZZ_CASES, None)
    if counts:
        per_role = ", ".join(f"{role} {n}" for role, n in sorted(counts.items()))
        terminalreporter.write_line(f"schemathesis cases: {counts.total()} ({per_role})")


ROLES = ("anonymous", "member", "outsider", "pi", "committee", "chair", "staff")
CODES = ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004")


@dataclass
class World:
    centre: Centre
    round: AllocationRound
    draft: AllocationRequest  # pawsey0002's, by bob
    submitted: AllocationRequest  # pawsey0001's, by alice
    under_review: AllocationRequest  # pawsey0003's, by alice, reviewed by reviewer
    review: Review
    allocation: Allocation  # pawsey0003 on the CPU pool
    adjustment: Adjustment  # a top-up of pawsey0003
    job: Job  # a charged job of pawsey0003 on the CPU pool
    run: ImportRun
    quarantined: QuarantinedRecord
    work: Partition
    users: dict[str, Any] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    # The projects each role may see in any response body.
    visible: dict[str, set[str]] = field(default_factory=dict)

    def token(self, role: str, scope: str = "write") -> str:
        """A personal token of ``role`` (one per role and scope, made on first use)."""
        key = f"{role}:{scope}"
        if key not in self.tokens:
            issued = token_create(user=self.users[role], name=key, scope=scope, expires_in_days=30)
            self.tokens[key] = issued.plaintext
        return self.tokens[key]

    def client(self, role: str) -> APIClient:
        client = APIClient()
        if role != "anonymous":
            client.credentials(HTTP_AUTHORIZATION=f"Token {self.token(role)}")
        return client


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Throttles count in the cache; every test starts with none spent."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def world(centre) -> World:  # noqa: F811 (the imported fixture)
    return world_build(centre)


@pytest.fixture(scope="module")
def _module_world(django_db_setup, django_db_blocker) -> Iterator[World]:
    """One world for a whole module, built once in a transaction that is rolled back when the
    module ends; each test runs in a savepoint inside it (pytest-django's ``db``), so every
    test meets the same rows. Every role's tokens are made here: a token made inside a test
    would be rolled back with it."""
    with django_db_blocker.unblock(), transaction.atomic():
        world = world_build(centre_build())
        for role in ROLES[1:]:
            for scope in ("read", "write"):
                world.token(role, scope)
        yield world
        transaction.set_rollback(True)


@pytest.fixture
def shared_world(_module_world: World, db) -> Iterator[World]:
    """The module's world for one test (``world`` built once per module, for the modules with
    hundreds of tests that only read it: the permission matrix and the fuzzer). Its objects are
    read again from the database first, so what one test's services changed in memory is not
    seen by the next; the tokens made during a test are forgotten after it."""
    world = _module_world
    tokens = dict(world.tokens)
    for instance in _instances(world):
        instance.refresh_from_db()
    yield world
    world.tokens = tokens


def _instances(world: World) -> list[Model]:
    found = [getattr(world.centre, f.name) for f in fields(world.centre)]
    found += [getattr(world, f.name) for f in fields(world)]
    return [instance for instance in found if isinstance(instance, Model)]


def world_build(c: Centre) -> World:
    staff = c.staff
    for project, amount in ((c.p1, 400), (c.p2, 400), (c.p3, 400)):
        allocation_grant(
            project=project, pool=c.cpu, amount=Decimal(amount), period_start=PERIOD[0],
            period_end=PERIOD[1], actor=staff,
        )  # fmt: skip
    allocation_grant(
        project=c.p3, pool=c.gpu, amount=Decimal(200), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=staff,
    )  # fmt: skip
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=c.cluster, lines=lines, source="sample")
    header = (SAMPLE / "sacct_allocations.psv").read_text().splitlines()[0]
    line = (SAMPLE / "sacct_allocations.psv").read_text().splitlines()[1]
    stranger = line.replace("pawsey0001", "pawsey9999").replace("1332598", "7777777")
    run, _ = jobs_import(cluster=c.cluster, lines=[header, stranger], source="stranger.psv")

    opens, closes = open_round_times()
    round_ = round_create(
        name="2027 call", opens_at=opens, closes_at=closes, period_start=PERIOD[0],
        period_end=PERIOD[1], available={c.cpu: Decimal(1000), c.gpu: Decimal(100)},
        chair=c.chair, committee=[c.reviewer], actor=staff,
    )  # fmt: skip
    draft = request_create(
        round_=round_, project=c.p2, actor=c.bob, amounts={c.cpu: Decimal(20)},
        justification="genomics",
    )  # fmt: skip
    request_estimate_add(
        request=draft, actor=c.bob, partition=Partition.objects.get(cluster=c.cluster, name="gpu"),
        jobs=4, quote=QuoteRequest(nodes=1, hours=Decimal(2), gpus_per_node=2),
        description="assembly",
    )  # fmt: skip
    submitted = request_create(
        round_=round_, project=c.p1, actor=c.alice, amounts={c.cpu: Decimal(30)}
    )
    request_submit(request=submitted, actor=c.alice)
    under_review = request_create(
        round_=round_, project=c.p3, actor=c.alice, amounts={c.cpu: Decimal(10)}
    )
    request_submit(request=under_review, actor=c.alice)
    request_review_start(request=under_review, actor=c.chair)
    review = review_submit(request=under_review, reviewer=c.reviewer, score=4, comment="solid")

    job = (
        Job.objects.filter(project=c.p3, partition__name="work", service_units__gt=0)
        .order_by("pk")
        .first()
    )
    assert job is not None
    adjustment_refund(
        project=c.p3, pool=c.cpu, actor=staff, reason="node fault", job=job, on=SAMPLE_DAY
    )
    adjustment = adjustment_top_up(
        project=c.p3, pool=c.cpu, amount=Decimal(5), actor=staff, reason="workshop",
        on=SAMPLE_DAY,
    )  # fmt: skip
    users = {
        "member": c.carol, "outsider": c.bob, "pi": c.alice, "committee": c.reviewer,
        "chair": c.chair, "staff": staff,
    }  # fmt: skip
    visible = {
        "anonymous": set(),
        "member": {"pawsey0003"},
        "outsider": {"pawsey0002", "pawsey0004"},
        "pi": {"pawsey0001", "pawsey0003"},
        # The committee sees the round's submitted requests (not the draft).
        "committee": {"pawsey0001", "pawsey0003"},
        "chair": {"pawsey0001", "pawsey0003"},
        "staff": set(CODES),
    }
    return World(
        centre=c, round=round_, draft=draft, submitted=submitted, under_review=under_review,
        review=review, allocation=Allocation.objects.get(project=c.p3, pool=c.cpu),
        adjustment=adjustment, job=job, run=run,
        quarantined=QuarantinedRecord.objects.get(import_run=run),
        work=Partition.objects.get(cluster=c.cluster, name="work"), users=users,
        visible=visible,
    )  # fmt: skip

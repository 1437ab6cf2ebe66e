"""Page tests share one centre per module (tests/browser/conftest.py ``build_scenario``):
months of generated jobs, grants at different alert levels, adjustments, an open round with
requests, an enforcement action. It is built once per module and committed; every test runs
in a transaction that is rolled back, and the module's end empties the database again.

Roles, all about project pawsey0003 (PI carol, member alice): ``anonymous``, ``member``
(alice), ``other`` (bob, PI of other projects), ``pi`` (carol), ``committee`` (erin, the
round's reviewer, in no project) and ``staff``. dana chairs the round.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from accounting.models import Cluster, Job
from allocations.models import AllocationRequest, AllocationRound
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project, ResourcePool
from tests.browser.conftest import Scenario, build_scenario

ROLES = ("anonymous", "member", "other", "pi", "committee", "staff")
PROJECT = "pawsey0003"


@dataclass
class Site:
    cluster: Cluster
    projects: dict[str, Project]
    cpu: ResourcePool
    gpu: ResourcePool
    round: AllocationRound
    request: AllocationRequest  # pawsey0003's, under review
    job: Job  # a charged job of pawsey0003
    users: dict[str, User | None]  # by role, plus "chair"

    @property
    def project(self) -> Project:
        return self.projects[PROJECT]


def recent_history(*, lines: int, days: int = 20, seed: int = 11) -> Any:
    now = timezone.now()
    return sacct_lines(
        lines=lines, seed=seed, start=now - timedelta(days=days),
        mean_gap_seconds=int(days * 86400 / (lines / 4.2)), now=now,
    )  # fmt: skip


@pytest.fixture(scope="module")
def scenario(django_db_setup: None, django_db_blocker: Any) -> Iterator[Scenario]:
    from portal.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    with django_db_blocker.unblock():
        try:
            yield build_scenario(history_lines=2400)
        finally:
            call_command("flush", interactive=False, verbosity=0)
            app.conf.task_always_eager = eager


@pytest.fixture
def site(scenario: Scenario, db: None) -> Site:
    return site_of(scenario)


def site_of(scenario: Scenario) -> Site:
    """The scenario as the roles of pawsey0003 see it, every object read again from the
    database (the permission matrix's URLs are built from it)."""
    users = {name: User.objects.get(pk=user.pk) for name, user in scenario.users.items()}
    projects = {code: Project.objects.get(pk=p.pk) for code, p in scenario.projects.items()}
    job = (
        Job.objects.filter(project=projects[PROJECT], charge_state=Job.ChargeState.CHARGED)
        .exclude(partition_version=None)
        .order_by("pk")
        .first()
    )
    assert job is not None
    return Site(
        cluster=Cluster.objects.get(pk=scenario.cluster.pk),
        projects=projects,
        cpu=ResourcePool.objects.get(pk=scenario.pools["cpu"].pk),
        gpu=ResourcePool.objects.get(pk=scenario.pools["gpu"].pk),
        round=AllocationRound.objects.get(pk=scenario.round.pk),
        request=AllocationRequest.objects.get(pk=scenario.requests[PROJECT].pk),
        job=job,
        users={
            "anonymous": None, "member": users["alice"], "other": users["bob"],
            "pi": users["carol"], "committee": users["erin"], "staff": users["staff"],
            "chair": users["dana"],
        },
    )  # fmt: skip


def client_for(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client

"""Provisioning a centre into the real slurmdbd of the testbed (issue "Slurm, both ways").

A centre of ``--projects`` projects (1,000) with ``--members`` members each (10: 10,000
memberships among 3,000 people), each project granted SU on a pool under one parent account.
Measured in one run against the Slurm 22.05 testbed (tests/slurm_testbed.py, started here):

  first plan and apply   target < 60 s   (everything created: sacctmgr load and one script)
  no-change re-run       target < 5 s    (read Slurm, plan: nothing to do)
  reconciliation         target < 10 s   (slurm_sync --check: drift both ways)

    python benchmarks/bench_slurm_sync.py [--projects 1000] [--members 10]

The centre's accounts are removed from Slurm afterwards (one delete of the parent's subtree)
and the benchmark database is dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pg import database_create, database_drop  # noqa: E402

DB = "portal_bench_slurm_sync"
PARENT = "benchcentre"
TARGETS = {"first_s": 60.0, "rerun_s": 5.0, "check_s": 10.0}


def inner(projects: int, members: int) -> dict[str, float | str]:
    """In a process whose DATABASE_URL is the benchmark's and SLURM_CONF the testbed's."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    from decimal import Decimal

    from django.contrib.auth.models import User
    from django.utils import timezone

    from accounting.clusters.services import cluster_apply
    from accounting.clusters.specs import cluster_definition_load
    from accounting.models import Cluster, Partition
    from allocations.grants.services import allocation_grant
    from allocations.slurm.sync import (
        slurm_sync_apply,
        slurm_sync_approve,
        slurm_sync_check,
        slurm_sync_plan,
    )
    from projects.models import Membership, Project, ResourcePool

    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    cluster = Cluster.objects.get(name="slurm-testbed")
    pool = ResourcePool.objects.create(
        name="bench CPU", cluster=cluster, slurm_parent_account=PARENT
    )
    pool.partitions.set(Partition.objects.filter(cluster=cluster, name="work"))
    staff = User.objects.create(username="benchstaff", is_staff=True)
    rng = random.Random(17)
    people = User.objects.bulk_create(
        [User(username=f"bu{index:05d}") for index in range(max(3 * projects, members))]
    )
    made = Project.objects.bulk_create(
        [Project(code=f"bp{index:05d}", title=f"bench {index}") for index in range(projects)]
    )
    Membership.objects.bulk_create(
        [
            Membership(project=project, user=person)
            for project in made
            for person in rng.sample(people, members)
        ]
    )
    today = timezone.localdate()
    for project in made:
        allocation_grant(
            project=project, pool=pool, amount=Decimal(rng.randint(1_000, 500_000)),
            period_start=today.replace(day=1), period_end=today.replace(day=1, year=today.year + 1),
            actor=staff,
        )  # fmt: skip

    started = time.perf_counter()
    plan = slurm_sync_plan(cluster=cluster).plan
    planned = time.perf_counter()
    assert plan is not None
    actions = plan.actions.count()
    plan = slurm_sync_apply(plan=slurm_sync_approve(plan=plan, actor=None, enqueue=False))
    applied = time.perf_counter()
    assert plan.status == plan.Status.APPLIED, plan.error[:2000]

    again = slurm_sync_plan(cluster=cluster).plan
    rerun = time.perf_counter()
    assert again is None or again.actions.count() == 0, "a second plan found work to do"

    check = slurm_sync_check(cluster=cluster)
    checked = time.perf_counter()
    return {
        "projects": projects, "memberships": projects * members, "actions": actions,
        "plan_s": planned - started, "apply_s": applied - planned, "first_s": applied - started,
        "rerun_s": rerun - applied, "check_s": checked - rerun,
        "drift": len(check.drift), "check_error": check.error,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=1000)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(inner(args.projects, args.members)))
        return 0

    from tests.slurm_testbed import Testbed

    testbed = Testbed.from_environ()
    testbed.install()
    was_running = all(testbed.running().values())
    testbed.start()
    testbed.run("sacctmgr", "-i", "delete", "account", PARENT, check=False)  # an earlier run's
    env = {**database_create(DB), **testbed.env}
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--inner", "--projects", str(args.projects),
             "--members", str(args.members)],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
    finally:
        testbed.run("sacctmgr", "-i", "delete", "account", PARENT, check=False)
        database_drop(DB)
        if not was_running:
            testbed.stop()
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        return 1
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"Slurm provisioning, {figures['projects']:,} projects and {figures['memberships']:,}"
        f" memberships ({figures['actions']:,} actions), Slurm 22.05 testbed, one run:"
    )
    missed = []
    for key, label in (("first_s", "first plan and apply"), ("rerun_s", "no-change re-run"),
                       ("check_s", "reconciliation (--check)")):  # fmt: skip
        ok = figures[key] < TARGETS[key]
        missed += [] if ok else [label]
        print(f"  {label:28s} {figures[key]:7.2f} s  (target < {TARGETS[key]:.0f} s)"
              f"{'' if ok else '  MISSED'}")  # fmt: skip
    print(f"    of the first: plan {figures['plan_s']:.2f} s, apply {figures['apply_s']:.2f} s")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

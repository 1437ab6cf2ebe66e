"""Issue 17, item 5 (the lifecycles): jobs that really ran on the testbed in the ways that trip
accounting up — a job array, a job cancelled while pending, a requeued job, a node failure —
read by ``sacct`` exactly as a scheduled import reads them, and booked by the portal's policy.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.sources import sacct_window_import
from accounting.models import Cluster, Job
from projects.models import Project
from tests.slurm.conftest import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

SPEC = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "slurm-testbed.json"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "REQUEUED"}


@pytest.fixture
def portal(slurm_testbed, slurm_account, monkeypatch):
    """The portal's cluster and a project of the account's name; sacct runs on this host with
    the testbed's SLURM_CONF, as the scheduled import runs it."""
    for name, value in slurm_testbed.env.items():
        monkeypatch.setenv(name, value)
    cluster_apply(definition=cluster_definition_load(SPEC))
    Project.objects.create(code=slurm_account, title="lifecycles")
    return Cluster.objects.get(name="slurm-testbed")


def _submit(testbed, account, *options):
    return testbed.run(
        "sbatch", "--parsable", f"--account={account}", "--output=/dev/null", *options
    ).stdout.strip()


def _rows(testbed, job_id):
    """Every run of one job (``--duplicates``), once each has ended with its partition known."""
    done = testbed.run(
        "sacct", "-X", "-D", "--parsable2", "--noheader", f"--jobs={job_id}",
        "--format=JobID,State,Partition",
    )  # fmt: skip
    rows = [line.split("|") for line in done.stdout.splitlines()]
    if rows and all(row[1].split()[0] in ENDED and row[2] for row in rows):
        return rows
    return None


def _runs(testbed, job_id, count):
    """The job's rows once there are ``count`` of them, all ended."""
    rows = _rows(testbed, job_id)
    return rows if rows is not None and len(rows) == count else None


def _state(testbed, job_id):
    done = testbed.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False)
    return done.stdout.strip() or None


def _import(cluster):
    _, summary = sacct_window_import(
        cluster=cluster, since=timezone.now() - timedelta(hours=1),
        until=timezone.now() + timedelta(minutes=1),
    )  # fmt: skip
    return summary


def test_each_task_of_a_job_array_is_booked_under_its_array_id(
    slurm_testbed, slurm_account, portal
):
    job = _submit(slurm_testbed, slurm_account, "--array=0-3", "--partition=work", "--wrap=true")
    wait_for("the array's four tasks", lambda: _runs(slurm_testbed, job, 4))
    _import(portal)
    tasks = Job.objects.filter(project__code=slurm_account).order_by("job_id")
    assert [task.job_id for task in tasks] == [f"{job}_{index}" for index in range(4)]
    assert all(task.charge_state == Job.ChargeState.CHARGED for task in tasks)


def test_a_job_cancelled_while_pending_books_nothing(slurm_testbed, slurm_account, portal):
    job = _submit(slurm_testbed, slurm_account, "--begin=now+1hour", "--partition=work",
                  "--wrap=true")  # fmt: skip
    slurm_testbed.run("scancel", job)
    rows = wait_for("the cancellation", lambda: _rows(slurm_testbed, job))
    assert rows[0][1].startswith("CANCELLED")
    _import(portal)
    booked = Job.objects.filter(project__code=slurm_account)
    assert [(j.start, j.service_units, j.charge_state) for j in booked] in (
        [], [(None, 0, Job.ChargeState.CHARGED)],
    )  # fmt: skip


def test_a_requeued_job_books_both_runs_and_each_only_once(slurm_testbed, slurm_account, portal):
    first_run_waits = 'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 60; else true; fi'
    job = _submit(slurm_testbed, slurm_account, "--requeue", "--partition=work",
                  f"--wrap={first_run_waits}")  # fmt: skip
    wait_for("the first run", lambda: _state(slurm_testbed, job) == "RUNNING" or None)
    slurm_testbed.run("scontrol", "requeue", job)
    # Slurm holds a requeued job for two minutes; the test lets it start again at once.
    wait_for("the requeue", lambda: _state(slurm_testbed, job) == "PENDING" or None)
    slurm_testbed.run("scontrol", "update", f"jobid={job}", "starttime=now")
    rows = wait_for("the second run", lambda: _runs(slurm_testbed, job, 2))
    assert sorted(row[1] for row in rows) == ["COMPLETED", "REQUEUED"]
    _import(portal)
    _import(portal)  # an overlapping window again: nothing twice
    runs = Job.objects.filter(project__code=slurm_account).order_by("start")
    assert [(run.state, run.run != "") for run in runs] == [
        ("REQUEUED", True),
        ("COMPLETED", False),
    ]
    assert all(run.charge_state == Job.ChargeState.CHARGED for run in runs)
    # The first run is charged for the seconds it held its core (none when requeued within
    # the second it started).
    assert (runs[0].service_units > 0) == (runs[0].elapsed_seconds > 0)


def test_a_node_failure_is_refunded_under_the_clusters_policy(slurm_testbed, slurm_account, portal):
    job = _submit(slurm_testbed, slurm_account, "--no-requeue", "--partition=work",
                  "--nodelist=nid1003", "--wrap=sleep 120")  # fmt: skip
    wait_for("the job to run", lambda: _state(slurm_testbed, job) == "RUNNING" or None)
    try:
        slurm_testbed.run("scontrol", "update", "nodename=nid1003", "state=down",
                          "reason=portal test: node failure")  # fmt: skip
        rows = wait_for("the node failure", lambda: _rows(slurm_testbed, job))
    finally:  # ReturnToService=2 brings the node back; resume it if it is still down
        slurm_testbed.run("scontrol", "update", "nodename=nid1003", "state=resume", check=False)
    assert rows[0][1] == "NODE_FAIL"
    _import(portal)
    failed = Job.objects.get(project__code=slurm_account)
    assert (failed.state, failed.charge_state, failed.service_units) == (
        "NODE_FAIL", Job.ChargeState.REFUNDED, 0,
    )  # fmt: skip

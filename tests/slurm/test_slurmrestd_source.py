"""Issue 17, item 4: a cluster read through the real slurmrestd of the testbed (auth/jwt, the
slurmdb jobs endpoint), with the same parser as ``sacct --json``: the ledger it makes is the
ledger sacct makes of the same jobs."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.sources import SlurmrestdFailed, sacct_window_import
from accounting.models import Cluster, ImportRun, Job
from projects.models import Project
from tests.slurm.conftest import unique_name, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

SPEC = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "slurm-testbed.json"


def _ledger(cluster):
    return sorted(
        Job.objects.filter(cluster=cluster).values_list(
            "job_id_raw", "project__code", "username", "partition__name", "state", "cpus",
            "gpus", "service_units", "charge_state",
        )
    )  # fmt: skip


def _finished(testbed, account, count):
    """The account's jobs once all ``count`` have ended and slurmdbd has their partitions."""
    done = testbed.run(
        "sacct", "-X", "--parsable2", "--noheader", "--starttime=now-1hours",
        f"--accounts={account}", "--format=JobIDRaw,State,Partition",
    )  # fmt: skip
    rows = [line.split("|") for line in done.stdout.splitlines()]
    ended = [row for row in rows if row[1] in {"COMPLETED", "FAILED"} and row[2]]
    return ended if len(ended) == count else None


@pytest.fixture
def jobs_run(slurm_testbed, slurm_account):
    """A CPU job and a GPU job, really run under a new account; the portal knows the cluster
    and a project of the account's name."""
    cluster_apply(definition=cluster_definition_load(SPEC))
    Project.objects.create(code=slurm_account, title="slurmrestd test")
    name = unique_name("job")
    started = timezone.now() - timedelta(minutes=1)
    slurm_testbed.run(
        "sbatch", f"--account={slurm_account}", "--output=/dev/null", "--partition=work",
        "--ntasks=4", "--mem=8G",
        f"--job-name={name}", "--wrap=sleep 1",
    )  # fmt: skip
    slurm_testbed.run(
        "sbatch", f"--account={slurm_account}", "--output=/dev/null", "--partition=gpu",
        "--gres=gpu:2",
        f"--job-name={name}", "--wrap=sleep 1",
    )  # fmt: skip
    wait_for("both jobs to end", lambda: _finished(slurm_testbed, slurm_account, 2))
    return Cluster.objects.get(name="slurm-testbed"), slurm_account, started


def test_slurmrestd_books_the_same_ledger_as_sacct(
    slurm_testbed, slurmrestd, jobs_run, monkeypatch
):
    cluster, account, since = jobs_run
    until = timezone.now() + timedelta(minutes=1)
    Cluster.objects.filter(pk=cluster.pk).update(
        slurmrestd_url=slurmrestd.url, slurmrestd_token_file=str(slurmrestd.token_file)
    )
    cluster.refresh_from_db()
    run, _ = sacct_window_import(cluster=cluster, since=since, until=until)
    assert run.source.startswith("slurmrestd ")
    from_restd = [row for row in _ledger(cluster) if row[1] == account]
    assert len(from_restd) == 2
    assert {row[3] for row in from_restd} == {"work", "gpu"}
    assert all(row[8] == Job.ChargeState.CHARGED and row[7] > 0 for row in from_restd)

    # The same window read by sacct on this host (SLURM_CONF of the testbed) books the same.
    Job.objects.filter(cluster=cluster).delete()
    for name, value in slurm_testbed.env.items():
        monkeypatch.setenv(name, value)
    Cluster.objects.filter(pk=cluster.pk).update(slurmrestd_url="")
    cluster.refresh_from_db()
    run, _ = sacct_window_import(cluster=cluster, since=since, until=until)
    assert run.source.startswith("sacct ")
    assert [row for row in _ledger(cluster) if row[1] == account] == from_restd


def test_import_sacct_run_sacct_reads_slurmrestd_when_configured(slurmrestd, jobs_run):
    cluster, account, since = jobs_run
    Cluster.objects.filter(pk=cluster.pk).update(
        slurmrestd_url=slurmrestd.url, slurmrestd_token_file=str(slurmrestd.token_file)
    )
    out = StringIO()
    call_command(
        "import_sacct", "--run-sacct", "--cluster", "slurm-testbed", "--since",
        since.isoformat(), "--json", stdout=out,
    )  # fmt: skip
    assert '"charged": 2' in out.getvalue()
    assert Job.objects.filter(project__code=account).count() == 2


def test_a_forged_token_is_refused_in_slurmrestds_words_and_nothing_is_booked(
    slurmrestd, jobs_run, tmp_path
):
    cluster, _, since = jobs_run
    token = slurmrestd.token_file.read_text().strip()
    forged = tmp_path / "forged.jwt"
    forged.write_text(token[:-4] + "AAAA")
    Cluster.objects.filter(pk=cluster.pk).update(
        slurmrestd_url=slurmrestd.url, slurmrestd_token_file=str(forged)
    )
    cluster.refresh_from_db()
    with pytest.raises(SlurmrestdFailed, match=r"slurmrestd at http://127\.0\.0\.1:\d+ answered"):
        sacct_window_import(cluster=cluster, since=since, until=timezone.now())
    assert not Job.objects.filter(cluster=cluster).exists()
    assert ImportRun.objects.filter(cluster=cluster).count() == 1  # created, then it failed

"""The single-host Slurm the Slurm features are tested on: its nodes and partitions come from
the cluster's spec, sacctmgr writes associations that slurmdbd enforces, jobs really run on the
pretended nodes and reach sacct, and Slurm's billing follows `slurm_billing_config`."""

from __future__ import annotations

import http.client
import json
import re
import socket
from decimal import Decimal
from io import StringIO

import hostlist
import pytest
from django.core.management import call_command

from accounting.clusters.charging import energy_weight
from tests.factories import example_cluster
from tests.slurm.conftest import unique_name, wait_for
from tests.slurm_testbed import Testbed

pytestmark = pytest.mark.slurm

FIELDS = "JobID,JobName,Account,Partition,State,ExitCode,NodeList,AllocTRES"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def _sacct_job(testbed: Testbed, *selection: str) -> dict[str, str] | None:
    """The allocation row of one job from ``sacct -X --parsable2``, once the job has ended and
    slurmdbd has its partition: for about a second after a short job ends, sacct 22.05 can show
    it COMPLETED with an empty Partition (seen in about half of the tries here)."""
    done = testbed.run(
        "sacct", "-X", "--parsable2", "--starttime=now-1hours", f"--format={FIELDS}", *selection
    )
    header, *rows = done.stdout.splitlines()
    jobs = [dict(zip(header.split("|"), row.split("|"), strict=True)) for row in rows]
    assert len(jobs) <= 1, jobs
    if jobs and jobs[0]["State"].split()[0] in ENDED and jobs[0]["Partition"]:
        return jobs[0]
    return None


def _tres(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if item)


def _billing_weights(slurm_conf_text: str) -> dict[str, str]:
    """Each partition's TRESBillingWeights in slurm.conf text."""
    return dict(re.findall(r'PartitionName=(\S+) .*?TRESBillingWeights="([^"]+)"', slurm_conf_text))


def test_the_nodes_and_partitions_of_the_spec_are_up_and_idle(slurm_testbed):
    listed = slurm_testbed.run("sinfo", "-h", "-o", "%R %D %t %N").stdout
    partitions = {line.split()[0]: line.split()[1:] for line in listed.splitlines()}

    assert partitions == {
        "work": ["4", "idle", "nid[1001-1004]"],
        "gpu": ["2", "idle", "nid[2001-2002]"],
    }
    for partition in slurm_testbed.definition.partitions:
        assert hostlist.expand_hostlist(partition.nodelist) == [
            node.name for node in slurm_testbed.nodes if node.partition == partition.name
        ]


def test_the_nodes_claim_the_specs_cores_memory_and_gpus_not_this_machines(slurm_testbed):
    described = {
        fields["NodeName"]: fields
        for line in slurm_testbed.run("scontrol", "-o", "show", "node").stdout.splitlines()
        for fields in [dict(re.findall(r"(\w+)=(\S*)", line))]
    }

    assert {name: described[name]["CPUTot"] for name in described} == {
        **{f"nid100{n}": "128" for n in range(1, 5)}, "nid2001": "64", "nid2002": "64"
    }  # fmt: skip
    assert {described[name]["RealMemory"] for name in described} == {"245000"}
    assert described["nid2001"]["Gres"] == described["nid2002"]["Gres"] == "gpu:8"
    assert described["nid1001"]["Gres"] == "(null)"


def test_slurmdbd_knows_the_cluster_under_its_slurm_name(slurm_testbed):
    listed = slurm_testbed.run(
        "sacctmgr", "-n", "-P", "show", "cluster", "format=cluster,controlport"
    )

    assert f"{slurm_testbed.cluster_name}|{slurm_testbed.ports.slurmctld}" in listed.stdout.split()


def test_accounts_and_users_added_with_sacctmgr_show_in_the_associations(slurm_testbed):
    account = unique_name()

    slurm_testbed.run("sacctmgr", "-i", "add", "account", account, "description=tests")
    slurm_testbed.run("sacctmgr", "-i", "add", "user", "root", f"account={account}")

    shown = slurm_testbed.run(
        "sacctmgr", "-n", "-P", "show", "associations", "where", f"account={account}",
        "format=cluster,account,user,parentname",
    )  # fmt: skip
    cluster = slurm_testbed.cluster_name
    assert set(shown.stdout.split()) == {
        f"{cluster}|{account}||root",  # the account, under root
        f"{cluster}|{account}|root|",  # the user's association with it
    }


def test_a_batch_job_runs_and_sacct_shows_it_completed_under_its_account(
    slurm_testbed, slurm_account
):
    submitted = slurm_testbed.run(
        "sbatch", "--parsable", f"--account={slurm_account}", "--output=/dev/null",
        "--wrap", "sleep 1",
    )  # fmt: skip
    job_id = submitted.stdout.strip().split(";")[0]

    job = wait_for(f"job {job_id} to end", lambda: _sacct_job(slurm_testbed, "-j", job_id))

    assert (job["JobID"], job["Account"], job["State"], job["ExitCode"]) == (
        job_id, slurm_account, "COMPLETED", "0:0"
    )  # fmt: skip
    assert job["Partition"] == "work"  # the default partition
    assert job["NodeList"] in {node.name for node in slurm_testbed.nodes}


def test_srun_runs_its_command_on_a_pretended_node(slurm_testbed, slurm_account):
    name = unique_name("srun")

    ran = slurm_testbed.run("srun", "-A", slurm_account, "-J", name, "-p", "gpu", "hostname")

    # Every pretended node is this machine.
    assert ran.stdout.strip() == socket.gethostname()
    job = wait_for(f"srun job {name} in sacct", lambda: _sacct_job(slurm_testbed, f"--name={name}"))
    assert (job["Account"], job["Partition"], job["State"]) == (slurm_account, "gpu", "COMPLETED")
    assert job["NodeList"] in {"nid2001", "nid2002"}


def test_a_job_under_an_account_the_user_has_no_association_with_is_refused(slurm_testbed):
    stranger = unique_name()
    slurm_testbed.run("sacctmgr", "-i", "add", "account", stranger, "description=tests")

    refused = slurm_testbed.run(
        "sbatch", f"--account={stranger}", "--output=/dev/null", "--wrap", "true", check=False
    )

    assert refused.returncode != 0
    assert "Invalid account or account/partition combination" in refused.stderr
    assert slurm_testbed.run("squeue", "-h", "-A", stranger).stdout == ""


def test_a_gpu_job_gets_fake_gpus_and_slurms_billing_equals_the_portals_rate(
    slurm_testbed, slurm_account
):
    gpu = next(p.charging for p in slurm_testbed.definition.partitions if p.name == "gpu")
    submitted = slurm_testbed.run(
        "sbatch", "--parsable", f"--account={slurm_account}", "-p", "gpu", "-n", "1",
        "--gres=gpu:2", "--output=/dev/null", "--wrap", 'test "$CUDA_VISIBLE_DEVICES" = 0,1',
    )  # fmt: skip
    job_id = submitted.stdout.strip().split(";")[0]

    job = wait_for(f"GPU job {job_id} to end", lambda: _sacct_job(slurm_testbed, "-j", job_id))

    # The script checks that Slurm handed it two GPUs; it exits 1 otherwise.
    assert (job["State"], job["ExitCode"]) == ("COMPLETED", "0:0")
    tres = _tres(job["AllocTRES"])
    assert tres["gres/gpu"] == "2"
    # GPUs dominate: the portal's rate is w * 2/8 (eq 1), 512 * 2/8 = 128 SU per hour.
    assert Decimal(tres["billing"]) == energy_weight(gpu) * 2 / gpu.gpus == 128


@pytest.mark.django_db
def test_the_billing_weights_in_slurm_conf_are_what_slurm_billing_config_prints(slurm_testbed):
    example_cluster("slurm-testbed")
    printed = StringIO()
    call_command("slurm_billing_config", cluster="slurm-testbed", stdout=printed)

    conf = slurm_testbed.slurm_conf.read_text()
    assert _billing_weights(conf) == _billing_weights(printed.getvalue())
    assert set(_billing_weights(conf)) == {"work", "gpu"}
    assert "PriorityFlags=MAX_TRES" in printed.getvalue().splitlines()
    assert "PriorityFlags=MAX_TRES" in conf.splitlines()


def test_slurm_reads_the_billing_weights_it_was_given(slurm_testbed):
    configured = _billing_weights(slurm_testbed.slurm_conf.read_text())
    shown = dict(
        re.findall(
            r"PartitionName=(\S+).*?TRESBillingWeights=(\S+)",
            slurm_testbed.run("scontrol", "-o", "show", "partition").stdout,
        )
    )

    assert set(shown) == set(configured)
    for partition, weights in configured.items():
        # scontrol prints back the numbers it parsed, not the text it read.
        expected = {name: float(value) for name, value in _tres(weights).items()}
        actual = {name: float(value) for name, value in _tres(shown[partition]).items()}
        assert actual == pytest.approx(expected, rel=1e-13), partition


def _restd_get(port: int, token: str, path: str) -> tuple[int, bytes] | None:
    """Status and body of a slurmrestd endpoint, or None while nothing listens yet."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            "GET", path, headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token}
        )
        response = connection.getresponse()
        return response.status, response.read()
    except ConnectionRefusedError:
        return None
    finally:
        connection.close()


def test_slurmrestd_runs_on_it_with_a_jwt_from_scontrol_token(slurmrestd):
    token = slurmrestd.token_file.read_text().strip().removeprefix("SLURM_JWT=")
    port = int(slurmrestd.url.rsplit(":", 1)[1])
    ping = wait_for("slurmrestd to answer", lambda: _restd_get(port, token, "/slurm/v0.0.38/ping"))
    # Through slurmdbd, which checks the JWT too.
    diag = _restd_get(port, token, "/slurmdb/v0.0.38/diag")
    forged = _restd_get(port, token[:-4] + "AAAA", "/slurm/v0.0.38/ping")

    assert ping[0] == 200, ping
    pinged = json.loads(ping[1])
    assert pinged["errors"] == []
    assert pinged["meta"]["Slurm"]["release"].startswith("22.05")
    assert [p["ping"] for p in pinged["pings"]] == ["UP"]
    assert diag is not None
    assert diag[0] == 200, diag
    assert json.loads(diag[1])["errors"] == []
    # slurmrestd passes the token on; slurmctld checks its signature and refuses a forged one.
    assert forged is not None
    assert forged[0] == 500
    refused = json.loads(forged[1])
    assert [error["source"] for error in refused["errors"]] == ["slurm_load_ctl_conf"]
    assert "pings" not in refused

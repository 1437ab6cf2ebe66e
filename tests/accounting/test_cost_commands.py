"""python manage.py jobcost and coststats against jobs in the ledger (PeCoH chapters 5-6)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounting.models import Job
from projects.models import Project
from tests.factories import PartitionFactory, PartitionVersionFactory

ROOT = Path(__file__).resolve().parents[2]
FULL = str(ROOT / "examples" / "costmodels" / "mistral-full.cost")
SIMPLE = str(ROOT / "examples" / "costmodels" / "mistral-simple.cost")
DAY = datetime(2017, 9, 10, tzinfo=UTC)

pytestmark = pytest.mark.django_db


@pytest.fixture
def partition():
    return PartitionFactory(cluster__name="mistral", name="compute")


def make_job(partition, raw_id, nodelist, elapsed, *, energy=None, end=DAY, **fields):
    project, _ = Project.objects.get_or_create(code="bb1234")
    values = {
        "cluster": partition.cluster,
        "job_id_raw": raw_id,
        "job_id": raw_id,
        "project": project,
        "username": "u300000",
        "partition": partition,
        "state": "COMPLETED",
        "state_raw": "COMPLETED",
        "start": None if end is None else end - timedelta(seconds=elapsed),
        "end": end,
        "elapsed_seconds": elapsed,
        "nodelist": nodelist,
        "nnodes": 1,
        "consumed_energy_joules": energy,
        "charge_state": Job.ChargeState.CHARGED,
    }
    values.update(fields)
    return Job.objects.create(**values)


def run(command, *args):
    out, err = StringIO(), StringIO()
    call_command(command, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


# -- jobcost ------------------------------------------------------------------------------------


@pytest.fixture
def listing_5_job(partition):
    return make_job(partition, "4212345", "m[10000-10009]", 277)


def test_jobcost_of_a_ledger_job_prints_listing_5(listing_5_job):
    out, _ = run("jobcost", "--model", FULL, "--job", "4212345", "--cluster", "mistral")
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert lines[1:3] == ["job cost estimate", lines[0]]
    assert lines[4:7] == ["(10 nodes total)", "BasicNode (10 nodes):", "Procurement: 0.09 Euro"]
    assert lines[-2] == "total: 0.43 Euro"


@pytest.mark.parametrize(
    ("form", "expected"),
    [("--short", "job cost estimate: 0.43 Euro\n"), ("--quiet", "0.43\n")],
)
def test_jobcost_short_and_quiet_forms(listing_5_job, form, expected):
    out, _ = run("jobcost", "--model", FULL, "--job", "4212345", "--cluster", "mistral", form)
    assert out == expected


def test_jobcost_json_of_a_ledger_job(listing_5_job):
    out, _ = run("jobcost", "--model", FULL, "--job", "4212345", "--cluster", "mistral", "--json")
    document = json.loads(out)
    assert document["nodes"] == 10
    assert document["total"].startswith("0.43")
    assert [rate["name"] for rate in document["node_sets"][0]["rates"]] == [
        "Procurement", "Disks", "Tapes", "Infrastructure", "Power", "DKRZ",
    ]  # fmt: skip


def test_jobcost_prices_the_current_run_of_a_requeued_job(partition):
    make_job(partition, "77", "m[10000-10009]", 277)
    make_job(partition, "77", "m10000", 99999, run="2017-09-09T10:00:00")
    out, _ = run("jobcost", "--model", FULL, "--job", "77", "--cluster", "mistral", "--quiet")
    assert out == "0.43\n"


def test_jobcost_finds_an_array_task_by_its_job_id(partition):
    make_job(partition, "900", "m[10000-10009]", 277, job_id="899_1")
    out, _ = run("jobcost", "--model", FULL, "--job", "899_1", "--cluster", "mistral", "--quiet")
    assert out == "0.43\n"


def test_jobcost_uses_the_recorded_energy_of_a_ledger_job(partition, tmp_path):
    model = tmp_path / "energy.cost"
    model.write_text("currency Euro\nnodes All m[10000-10009]\n  energy-rate Power 25 c/kWh\n")
    make_job(partition, "5", "m[10000-10001]", 60, energy=7_200_000)
    make_job(partition, "6", "m[10000-10001]", 60, energy=None)
    out, _ = run("jobcost", "--model", str(model), "--job", "5", "--cluster", "mistral", "--quiet")
    assert out == "0.50\n"
    out, _ = run("jobcost", "--model", str(model), "--job", "6", "--cluster", "mistral", "--json")
    assert json.loads(out)["missing_data"] is True


def test_jobcost_from_given_nodes_needs_no_job_in_the_ledger():
    out, _ = run(
        "jobcost", "--model", FULL, "--nodes", "m[10000-10009]", "--runtime", "277", "--short"
    )
    assert out == "job cost estimate: 0.43 Euro\n"


def test_jobcost_warns_on_standard_error_about_nodes_in_no_node_set():
    out, err = run(
        "jobcost", "--model", FULL, "--nodes", "m10000,login1", "--runtime", "0", "--quiet"
    )
    assert out == "0.00\n"
    assert "1 of the job's nodes are in no node set" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--job", "404", "--cluster", "mistral"], "no job '404' on cluster 'mistral'"),
        (["--job", "1", "--cluster", "nowhere"], "unknown cluster 'nowhere'"),
        (["--job", "1"], "--job needs --cluster"),
        (["--nodes", "m[10000-", "--runtime", "5"], "--nodes: 'm[10000-' is not a Slurm hostlist"),
        (["--nodes", "m10000"], "--nodes needs --runtime"),
        (["--nodes", "m10000", "--runtime", "1.5"], "--runtime: expected a whole number"),
        (["--nodes", "m10000", "--runtime", "5", "--energy", "-3"], "--energy: expected a whole"),
        (["--job", "1", "--cluster", "mistral", "--nodes", "m1"], "drop --nodes"),
        ([], "give --job ID --cluster NAME, or --nodes HOSTLIST --runtime SECONDS"),
    ],
)
def test_jobcost_refuses_bad_arguments_with_a_clear_message(partition, args, message):
    with pytest.raises(CommandError) as caught:
        run("jobcost", "--model", FULL, *args)
    assert message in str(caught.value)


SHARED_MODEL = (
    "nodes-are shared\ncurrency Euro\nnodes CPU nid[1001-1004]\n  rate Hardware 8760 1/a\n"
)


@pytest.fixture
def shared_model(tmp_path):
    path = tmp_path / "shared.cost"
    path.write_text(SHARED_MODEL)
    return str(path)


def test_jobcost_prices_a_ledger_job_for_its_share_under_a_shared_model(partition, shared_model):
    version = PartitionVersionFactory(partition=partition)  # 128 cores, 245,000 MB a node
    make_job(
        partition, "31", "nid[1001-1002]", 3600, partition_version=version, nnodes=2, cpus=64,
        memory_mb=Decimal(2000),
    )  # fmt: skip
    out, _ = run("jobcost", "--model", shared_model, "--job", "31", "--cluster", "mistral")
    assert "(nodes shared: the job pays 1/4 of each node)" in out
    assert " ".join(out.splitlines()[-2].split()) == "total: 0.50 Euro"  # 1 Euro a node-hour
    document = json.loads(
        run("jobcost", "--model", shared_model, "--job", "31", "--cluster", "mistral", "--json")[0]
    )
    assert (document["nodes_are"], document["node_share"], document["total"]) == (
        "shared", "1/4", "0.500000",
    )  # fmt: skip
    # The paper's exclusive model prices the same job's nodes whole.
    exclusive = json.loads(run("jobcost", "--model", FULL, "--job", "31", "--cluster", "mistral",
                               "--json")[0])  # fmt: skip
    assert (exclusive["nodes_are"], exclusive["node_share"]) == ("exclusive", "1")


def test_jobcost_share_prices_given_nodes_for_a_part_of_each(shared_model):
    args = ("jobcost", "--model", shared_model, "--nodes", "nid1001", "--runtime", "3600")
    assert run(*args, "--quiet") == ("1.00\n", "")
    assert run(*args, "--share", "1/8", "--quiet") == ("0.13\n", "")
    assert run(*args, "--share", "0.125", "--json")[0] == run(*args, "--share", "1/8", "--json")[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--share", "half"], "--share: expected a part of a node such as 1/8 or 0.125, got"),
        (["--share", "1/0"], "expected a part of a node"),
        (["--share=-1/8"], "expected a part of a node"),
        (["--share", "0"], "--share: a job's share of a node is more than 0 and at most 1, got 0"),
        (["--share", "9/8"], "more than 0 and at most 1, got 9/8"),
    ],
)  # fmt: skip
def test_jobcost_refuses_a_bad_share(shared_model, args, message):
    with pytest.raises(CommandError) as caught:
        run("jobcost", "--model", shared_model, "--nodes", "nid1001", "--runtime", "5", *args)
    assert message in str(caught.value)


def test_jobcost_refuses_a_share_that_does_not_apply(partition, shared_model):
    with pytest.raises(CommandError, match="the model's nodes are exclusive"):
        run("jobcost", "--model", FULL, "--nodes", "m10000", "--runtime", "5", "--share", "1/2")
    with pytest.raises(CommandError, match="--job derives its share of each node from the ledger"):
        run("jobcost", "--model", shared_model, "--job", "1", "--cluster", "mistral",
            "--share", "1/2")  # fmt: skip


def test_jobcost_refuses_a_job_that_is_still_running(partition):
    make_job(partition, "8", "m10000", 60, end=None, charge_state=Job.ChargeState.PENDING)
    with pytest.raises(CommandError, match="has not finished yet"):
        run("jobcost", "--model", FULL, "--job", "8", "--cluster", "mistral")


def test_jobcost_names_the_file_and_line_of_a_bad_model(tmp_path):
    model = tmp_path / "site.cost"
    model.write_text("currency Euro\nnodes A n1\n  rate Base 10 1/fortnight\n")
    with pytest.raises(CommandError) as caught:
        run("jobcost", "--model", str(model), "--nodes", "n1", "--runtime", "5")
    assert str(caught.value).startswith(f"{model}:3: rate Base: bad unit '1/fortnight'")


def test_jobcost_exits_non_zero_with_the_message_on_standard_error(tmp_path):
    model = tmp_path / "site.cost"
    model.write_text("nodes A n1\nrate Base ten 1/a\n")
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env["PORTAL_VAR_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "manage.py", "jobcost", "--model", str(model), "--nodes", "n1",
         "--runtime", "5", "--quiet"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stdout == ""
    assert f"{model}:2: rate Base: 'ten' is not a number" in done.stderr, done.stderr


# -- coststats ----------------------------------------------------------------------------------


@pytest.fixture
def jobs(partition):
    """Five finished jobs on 10 September 2017, one the next day, one running, one never ran."""
    made = [
        make_job(partition, "1", "m10000", 3600, energy=1_000_000, end=DAY + timedelta(hours=1)),
        make_job(partition, "2", "m[10000-10009]", 537, end=DAY + timedelta(hours=2)),
        make_job(partition, "3", "mg[100-101]", 7200, energy=474, end=DAY + timedelta(hours=3)),
        make_job(partition, "4", "m[10001-10002]", 0, end=DAY + timedelta(hours=4)),
        make_job(
            partition,
            "5",
            "m10003",
            200 * 86400,
            end=DAY + timedelta(hours=5),
            charge_state=Job.ChargeState.REFUNDED,
        ),
        make_job(partition, "6", "m10004", 60, end=DAY + timedelta(days=1, hours=1)),
    ]
    make_job(partition, "7", "m10005", 60, end=None, charge_state=Job.ChargeState.PENDING)
    make_job(partition, "8", "", 0, end=DAY + timedelta(hours=6), state="CANCELLED")
    return made


def test_coststats_statistics_over_the_jobs_of_a_day(jobs):
    out, err = run(
        "coststats", "--model", FULL, "--cluster", "mistral", "--start", "2017-09-10",
        "--end", "2017-09-11", "--statistics",
    )  # fmt: skip
    assert "5 jobs priced" in err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["statistics", "Size", "Runtime", "Energy"]
    assert "FatNodeExtra" in lines[0]
    rows = {line.split("  ")[0].strip(): line for line in lines[2:]}
    assert rows["count"].split()[1:4] == ["5", "5", "2"]  # Energy: jobs 1 and 3 only
    assert rows["total count"].split()[2:5] == ["5", "5", "5"]
    assert "the most expensive 1% of jobs (1) account for" in out


def test_coststats_prices_each_job_for_its_share_under_a_shared_model(partition, shared_model):
    version = PartitionVersionFactory(partition=partition)  # 128 cores, 245,000 MB a node
    for raw_id, cores in (("41", 32), ("42", 128)):
        make_job(
            partition, raw_id, "nid1001", 3600, partition_version=version, cpus=cores,
            memory_mb=Decimal(1000),
        )  # fmt: skip
    out, err = run(
        "coststats", "--model", shared_model, "--cluster", "mistral", "--details", "--quiet",
        "--csv",
    )  # fmt: skip
    assert "2 jobs priced, each for its share of its nodes (nodes-are shared)" in err
    rows = list(csv.reader(StringIO(out)))
    assert rows[1:] == [["41", "0.250000"], ["42", "1.000000"]]  # 1 Euro a node-hour


def test_coststats_details_list_each_job_in_end_order(jobs):
    out, _ = run(
        "coststats", "--model", FULL, "--cluster", "mistral", "--end", "2017-09-11", "--details"
    )
    rows = [line.split()[0] for line in out.splitlines()[2:]]
    assert rows == ["1", "2", "3", "4", "5"]
    assert "statistics" not in out


def test_coststats_max_runtime_leaves_out_the_ghost_job(jobs):
    _, err = run(
        "coststats", "--model", FULL, "--cluster", "mistral", "--max-runtime", "96", "--statistics"
    )
    assert "5 jobs priced; 1 longer than 96 h left out" in err


def test_coststats_quiet_csv_has_only_the_total_column(jobs):
    out, _ = run(
        "coststats", "--model", SIMPLE, "--cluster", "mistral", "--quiet", "--csv", "--details"
    )
    rows = list(csv.reader(StringIO(out)))
    assert rows[0] == ["job_id", "Total [Euro]"]
    assert [row[0] for row in rows[1:]] == ["1", "2", "3", "4", "5", "6"]
    # Job 2, Listing 7's largest job: 10 nodes for 537 s at 2398 Euro a year.
    assert rows[2][1] == "0.408335"


def test_coststats_csv_statistics_with_both_tables(jobs):
    out, _ = run(
        "coststats", "--model", SIMPLE, "--cluster", "mistral", "--csv", "--increment", "50"
    )
    details, statistics = out.split("\n\n")
    assert next(csv.reader(StringIO(details)))[:2] == ["job_id", "Size [nodes]"]
    rows = list(csv.reader(StringIO(statistics)))
    assert rows[0] == ["column", "statistic", "value", "share_percent"]
    assert ["Size [nodes]", "50%", "1.000000", rows[2][3]] == rows[2]
    assert ["Energy [J]", "count", "2", ""] in rows


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "nowhere"], "unknown cluster 'nowhere'"),
        (["--cluster", "mistral", "--increment", "0"], "--increment: must be a positive number"),
        (["--cluster", "mistral", "--increment", "150"], "--increment: the quantile increment"),
        (["--cluster", "mistral", "--max-runtime", "soon"], "--max-runtime: not a number"),
        (["--cluster", "mistral", "--start", "yesterday"], "--start: not an ISO 8601 date"),
    ],
)
def test_coststats_refuses_bad_arguments(partition, args, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        run("coststats", "--model", FULL, *args)


def test_coststats_names_the_file_and_line_of_a_bad_model(partition, tmp_path):
    model = tmp_path / "site.cost"
    model.write_text("currency Euro\ncurrency Euro\n")
    with pytest.raises(CommandError, match=r"site\.cost:2: currency set twice"):
        run("coststats", "--model", str(model), "--cluster", "mistral")

"""Importing the real sacct sample: buckets, charges, idempotence, restarts, quarantine, policy."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from math import ceil
from pathlib import Path

import pytest
from django.db.models import Count, Sum

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load, cluster_definition_parse
from accounting.ledger.pipeline import ImportFatal, jobs_import, quarantine_retry
from accounting.models import Cluster, ImportRun, Job, QuarantinedRecord, UsageDaily
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ACCOUNTS = ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004")
PSV_FILES = sorted(p.relative_to(SAMPLE).as_posix() for p in SAMPLE.rglob("sacct_*.psv"))

pytestmark = pytest.mark.django_db


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ACCOUNTS:
        Project.objects.create(code=code, title=f"Project {code}")
    return Cluster.objects.get(name="slurm-testbed")


def _import(cluster, name, **kwargs):
    with (SAMPLE / name).open() as lines:
        return jobs_import(cluster=cluster, lines=lines, source=name, **kwargs)[1]


def _ledger():
    jobs = sorted(
        Job.objects.values_list(
            "job_id_raw", "run", "state", "charge_state", "service_units", "pending_service_units",
            "energy_wh", "project__code", "partition__name", "end",
        )
    )  # fmt: skip
    rollups = sorted(
        UsageDaily.objects.values_list(
            "project__code", "partition__name", "username", "day", "service_units", "core_hours",
            "gpu_hours", "energy_wh", "jobs",
        )
    )  # fmt: skip
    return jobs, rollups


def _data_lines(name):
    with (SAMPLE / name).open() as handle:
        header, *rows = [line.rstrip("\n") for line in handle]
    columns = header.split("|")
    return [dict(zip(columns, row.split("|"), strict=True)) for row in rows]


@pytest.mark.parametrize("name", PSV_FILES)
def test_every_line_of_every_sample_file_lands_in_exactly_one_bucket(testbed, name):
    summary = _import(testbed, name)
    rows = _data_lines(name)
    buckets = summary.as_dict()
    assert summary.lines == len(rows)
    assert sum(value for key, value in buckets.items() if key != "lines") == summary.lines
    assert summary.steps_skipped == sum("." in row["JobIDRaw"] for row in rows)
    assert summary.quarantined == 0
    run = ImportRun.objects.get()
    assert run.status == ImportRun.Status.SUCCEEDED
    assert (run.lines, run.charged, run.pending) == (
        summary.lines,
        summary.charged,
        summary.pending,
    )


def _independent_rate(row, spec):
    """Eq 1's hourly rate from AllocTRES totals split evenly, with exact fractions."""
    tres = dict(item.split("=", 1) for item in row["AllocTRES"].split(","))
    units = {"K": Fraction(1, 1024), "M": 1, "G": 1024, "T": 1024**2}
    memory = Fraction(tres["mem"][:-1]) * units[tres["mem"][-1]]
    nodes = int(row["NNodes"])
    cores_per_node = spec["sockets"] * spec["cores_per_socket"]
    gpus_per_node = spec.get("gpus", 0)
    if gpus_per_node:
        weight = Fraction(
            gpus_per_node * spec["gpu_tdp_watts"], spec["sockets"] * spec["cpu_tdp_watts"]
        )
        weight *= cores_per_node
    else:
        weight = Fraction(cores_per_node)
    f_cores = Fraction(int(tres["cpu"]), nodes * cores_per_node)
    f_gpus = Fraction(int(tres.get("gres/gpu", 0)), nodes * gpus_per_node) if gpus_per_node else 0
    f_memory = Fraction(ceil(memory / nodes * cores_per_node / spec["memory_mb"]), cores_per_node)
    return weight * nodes * max(f_cores, f_gpus, f_memory)


def test_charges_equal_an_independent_computation_of_eq_1(testbed):
    _import(testbed, "sacct_allocations.psv")
    specs = {p["name"]: p for p in json.loads(SPEC.read_text())["partitions"]}
    jobs = {job.job_id_raw: job for job in Job.objects.all()}
    checked = 0
    for row in _data_lines("sacct_allocations.psv"):
        job = jobs[row["JobIDRaw"]]
        if not row["AllocTRES"]:
            assert job.service_units == 0
            continue
        rate = _independent_rate(row, specs[row["Partition"]])
        expected = rate * int(row["ElapsedRaw"]) / 3600
        exact = Decimal(expected.numerator) / Decimal(expected.denominator)
        assert job.service_units == exact.quantize(Decimal("0.000001")), row["JobID"]
        checked += 1
    assert checked == 225


def test_slurm_billing_matches_the_formula_except_where_memory_dominates(testbed):
    """The sample's billing_check.csv: Slurm's billing TRES vs the portal's hourly rate.

    Slurm takes max(cpu*Wcpu, mem*Wmem, gpu*Wgpu) over the job's totals and truncates; the
    portal rounds memory up to whole core-equivalents per node (eq 9). So they agree exactly
    when cores or GPUs dominate and the portal is higher by at most w/C per node (plus one SU
    for Slurm's float artefact) when memory dominates.
    """
    _import(testbed, "sacct_allocations.psv")
    jobs = {job.job_id: job for job in Job.objects.select_related("partition_version")}
    with (SAMPLE / "billing_check.csv").open() as handle:
        checks = list(csv.DictReader(handle))
    equal = memory_bound = 0
    uneven_split = set()
    for check in checks:
        job = jobs[check["JobID"]]
        version = job.partition_version
        rate = Decimal(check["formula_rate_even"])
        assert Decimal(job.billing or 0) == Decimal(check["slurm_billing"])
        if job.elapsed_seconds:
            hours = Decimal(job.elapsed_seconds) / 3600
            assert abs(job.service_units - rate * hours) < Decimal("0.000001"), check["JobID"]
        if rate == Decimal(check["slurm_billing"]):
            equal += 1
            continue
        memory_bound += 1
        assert job.dominant_resource == "memory", check["JobID"]
        if check["dominant"] != "mem":
            # Bound by CPUs on the true per-node split (Slurm packed 70+1+1+1 cores), but the
            # even split sacct's totals allow puts a quarter of the memory on every node, and
            # its per-node ceiling then dominates: the cost of not knowing the true split.
            assert Decimal(check["formula_rate_pernode"]) == Decimal(check["slurm_billing"])
            uneven_split.add(check["JobID"])
        per_node_step = version.weight / version.cores_per_node
        assert 0 < rate - Decimal(check["slurm_billing"]) <= job.nnodes * per_node_step + 1
    assert (equal, memory_bound) == (192, 33)
    assert uneven_split == {"1332703", "1332704", "1332768"}


def test_importing_the_same_file_twice_gives_the_same_ledger(testbed):
    first = _import(testbed, "sacct_all_duplicates.psv")
    ledger = _ledger()
    second = _import(testbed, "sacct_all_duplicates.psv")
    assert _ledger() == ledger
    assert second.charged == second.updated == second.pending == 0
    assert second.imported == first.charged + first.imported


def test_requeued_runs_are_charged_once_each(testbed):
    _import(testbed, "sacct_all_duplicates.psv")
    runs = Job.objects.filter(job_id_raw="1332601").order_by("start")
    assert [job.state for job in runs] == ["REQUEUED", "COMPLETED"]
    assert runs[0].run != runs[1].run == ""
    assert all(job.service_units > 0 for job in runs)


def test_an_interrupted_import_rerun_gives_the_same_ledger_as_an_uninterrupted_one(testbed):
    _import(testbed, "sacct_all.psv")
    reference = _ledger()
    Job.objects.all().delete()
    UsageDaily.objects.all().delete()

    def dies_midway(path, after):
        with path.open() as handle:
            for number, line in enumerate(handle):
                if number == after:
                    raise KeyboardInterrupt("worker killed")
                yield line

    with pytest.raises(KeyboardInterrupt):
        jobs_import(
            cluster=testbed,
            lines=dies_midway(SAMPLE / "sacct_all.psv", 400),
            source="x",
            batch_size=50,
        )
    assert 0 < Job.objects.count() < 225
    assert ImportRun.objects.filter(status=ImportRun.Status.FAILED).count() == 1
    _import(testbed, "sacct_all.psv", batch_size=50)
    assert _ledger() == reference


def test_running_jobs_are_pending_charges_until_they_finish(testbed):
    midrun = _import(testbed, "midrun/sacct_midrun_allocations.psv")
    assert midrun.pending > 0
    running = Job.objects.filter(state="RUNNING")
    assert running.exists()
    assert all(job.charge_state == "pending" and job.service_units == 0 for job in running)
    assert any(job.pending_service_units > 0 for job in running)
    assert (
        UsageDaily.objects.aggregate(jobs=Sum("jobs"))["jobs"]
        == Job.objects.exclude(charge_state="pending").count()
    )
    final = _import(testbed, "sacct_allocations.psv")
    assert final.charged >= midrun.pending - 9  # jobs that never started stay uncharged
    assert not Job.objects.filter(state="RUNNING").exists()


def test_an_older_dump_read_after_a_newer_one_does_not_reopen_finished_jobs(testbed):
    _import(testbed, "sacct_allocations.psv")
    ledger = _ledger()
    stale = _import(testbed, "midrun/sacct_midrun_allocations.psv")
    assert stale.updated == stale.pending == 0
    # The one new charge is a real run the newer dump (without --duplicates) no longer shows:
    # job 1332659's first incarnation, REQUEUED at the time of the older dump.
    assert stale.charged == 1
    new_rows = set(_ledger()[0]) - set(ledger[0])
    assert [(row[0], row[2]) for row in new_rows] == [("1332659", "REQUEUED")]
    assert set(ledger[0]) <= set(_ledger()[0])


def test_rollups_equal_the_sum_of_charged_jobs(testbed):
    _import(testbed, "sacct_all_duplicates.psv")
    by_job = Job.objects.values("project__code").annotate(su=Sum("service_units")).order_by()
    by_day = UsageDaily.objects.values("project__code").annotate(su=Sum("service_units")).order_by()
    assert {row["project__code"]: row["su"] for row in by_job} == {
        row["project__code"]: row["su"] for row in by_day
    }
    assert UsageDaily.objects.aggregate(n=Sum("jobs"))["n"] == Job.objects.count()


def test_het_job_components_are_charged_on_their_own_partitions(testbed):
    _import(testbed, "sacct_allocations.psv")
    components = {job.job_id: job for job in Job.objects.filter(het_job_id="1332628")}
    assert components["1332628+0"].partition.name == "work"
    assert components["1332628+1"].partition.name == "gpu"
    assert components["1332628+1"].dominant_resource in {"gpus", "cores"}


def test_an_unknown_account_is_quarantined_then_charged_once_the_project_exists(testbed):
    Project.objects.filter(code="pawsey0004").delete()
    summary = _import(testbed, "sacct_allocations.psv")
    held = QuarantinedRecord.objects.filter(resolved_at__isnull=True)
    assert summary.quarantined == held.count() > 0
    record = held.first()
    assert record.reason == "unknown project (Slurm account 'pawsey0004')"
    assert record.line_number > 1
    assert record.raw.split("|")[4] == "pawsey0004"
    Project.objects.create(code="pawsey0004")
    retried = quarantine_retry(cluster=testbed)
    assert retried.charged + retried.imported == summary.quarantined
    assert not QuarantinedRecord.objects.filter(resolved_at__isnull=True).exists()
    assert Job.objects.filter(project__code="pawsey0004").count() == summary.quarantined


def test_an_unknown_partition_is_charged_when_the_partition_is_added(
    testbed, django_capture_on_commit_callbacks
):
    document = json.loads(SPEC.read_text())
    document["name"] = "slurm-testbed"
    gpu = document["partitions"].pop()
    Job.objects.all().delete()
    summary = _import(testbed, "sacct_allocations.psv")
    gpu_lines = sum(row["Partition"] == "gpu" for row in _data_lines("sacct_allocations.psv"))
    assert summary.quarantined == 0  # the gpu partition exists from the fixture
    # A cluster that lacks the partition quarantines its jobs until cluster_apply adds it.
    document["name"] = "testbed-two"
    cluster_apply(definition=cluster_definition_parse(document))
    two = Cluster.objects.get(name="testbed-two")
    summary = _import(two, "sacct_allocations.psv")
    assert summary.quarantined == gpu_lines
    assert (
        QuarantinedRecord.objects.filter(cluster=two)
        .first()
        .reason.startswith("unknown partition 'gpu'")
    )
    document["partitions"].append(gpu)
    with django_capture_on_commit_callbacks(execute=True):
        cluster_apply(definition=cluster_definition_parse(document))
    assert not QuarantinedRecord.objects.filter(cluster=two, resolved_at__isnull=True).exists()
    assert Job.objects.filter(cluster=two, partition__name="gpu").count() == gpu_lines


def test_a_pools_own_slurm_account_books_to_its_project(testbed):
    """Where the GPU pool gives projects accounts of their own (pawsey0001-gpu, see
    docs/slurm.md), their jobs book to the project, exactly as if the account were the code."""
    from tests.factories import ResourcePoolFactory

    ResourcePoolFactory.create(
        cluster=testbed, partitions=["gpu"], slurm_account_suffix="-gpu",
    )  # fmt: skip
    plain = _import(testbed, "sacct_allocations.psv")
    reference = _ledger()
    Job.objects.all().delete()
    UsageDaily.objects.all().delete()
    ImportRun.objects.all().delete()
    text = (SAMPLE / "sacct_allocations.psv").read_text().splitlines()
    columns = text[0].split("|")
    account, partition = columns.index("Account"), columns.index("Partition")
    renamed = [text[0]]
    for line in text[1:]:
        fields = line.split("|")
        if fields[partition] == "gpu":
            fields[account] += "-gpu"
        renamed.append("|".join(fields))
    assert sum("-gpu|" in line for line in renamed) > 0

    summary = jobs_import(cluster=testbed, lines=iter(renamed), source="gpu accounts")[1]

    assert summary.quarantined == plain.quarantined == 0
    assert _ledger() == reference
    assert not Project.objects.filter(code__endswith="-gpu").exists()


def test_create_projects_option_creates_missing_projects_instead_of_quarantining(testbed):
    Project.objects.all().delete()
    summary = _import(testbed, "sacct_allocations.psv", create_projects=True)
    assert summary.quarantined == 0
    assert set(Project.objects.values_list("code", flat=True)) == set(ACCOUNTS)


HEADER = (
    "JobID|JobIDRaw|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|NNodes|NodeList|"
    "AllocTRES"
)


def _line(
    job,
    state,
    *,
    start="2026-03-01T10:00:00",
    end="2026-03-01T11:00:00",
    tres="cpu=128,mem=245000M,node=1",
):
    return f"{job}|{job}|alice|pawsey0001|work|{state}|{start}|{start}|{end}|3600|1|nid1001|{tres}"


def test_node_failures_are_refunded_by_policy_and_charged_without_it(testbed):
    lines = [HEADER, _line("9001", "NODE_FAIL"), _line("9002", "COMPLETED")]
    jobs_import(cluster=testbed, lines=lines, source="t")
    assert Job.objects.get(job_id_raw="9001").charge_state == "refunded"
    assert Job.objects.get(job_id_raw="9001").service_units == 0
    assert Job.objects.get(job_id_raw="9002").service_units == Decimal(128)
    Cluster.objects.filter(pk=testbed.pk).update(refund_node_failures=False)
    testbed.refresh_from_db()
    jobs_import(cluster=testbed, lines=[HEADER, _line("9003", "NODE_FAIL")], source="t")
    assert Job.objects.get(job_id_raw="9003").service_units == Decimal(128)


def test_times_are_read_in_the_cluster_time_zone_and_stored_in_utc(testbed):
    Cluster.objects.filter(pk=testbed.pk).update(timezone="Australia/Perth")
    testbed.refresh_from_db()
    jobs_import(cluster=testbed, lines=[HEADER, _line("9010", "COMPLETED")], source="t")
    job = Job.objects.get(job_id_raw="9010")
    assert job.start == datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
    assert UsageDaily.objects.get().day.isoformat() == "2026-03-01"


def test_bad_lines_are_quarantined_with_line_number_and_reason_and_nothing_is_lost(testbed):
    lines = [
        HEADER,
        _line("9020", "COMPLETED"),
        "9021|9021|alice|pawsey0001|work|COMPLETED|garbage",
        _line("9022", "COMPLETED", tres="cpu=999,mem=1M,node=1"),
        _line("9023", "COMPLETED", start="2026-03-01T12:00:00"),
    ]
    summary = jobs_import(cluster=testbed, lines=lines, source="t")[1]
    assert summary.as_dict() == {
        "lines": 4, "blank": 0, "other_clusters": 0, "steps_skipped": 0, "imported": 0,
        "updated": 0, "charged": 1, "pending": 0, "quarantined": 3,
    }  # fmt: skip
    reasons = dict(QuarantinedRecord.objects.values_list("line_number", "reason"))
    assert set(reasons) == {3, 4, 5}
    assert "fields" in reasons[3]
    assert "cannot be charged" in reasons[4]
    assert reasons[5] == "Start is after End"
    again = jobs_import(cluster=testbed, lines=lines, source="t")[1]
    assert again.quarantined == 3
    assert QuarantinedRecord.objects.count() == 3


def test_input_without_a_usable_header_is_fatal_and_recorded(testbed):
    with pytest.raises(ImportFatal, match="lacks required columns"):
        jobs_import(cluster=testbed, lines=["Cluster|Account|User\n", "a|b|c\n"], source="t")
    run = ImportRun.objects.get()
    assert run.status == "failed"
    assert "required columns" in run.error


def test_states_of_the_sample_are_all_recorded(testbed):
    _import(testbed, "sacct_allocations_allstates.psv")
    states = dict(Job.objects.values_list("state").annotate(n=Count("id")))
    assert {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"} <= set(states)
    never_started = Job.objects.filter(start__isnull=True)
    assert never_started.count() == 9
    assert all(job.service_units == 0 for job in never_started)

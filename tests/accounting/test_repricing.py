"""Re-pricing a project's charged jobs at the rates in force on a date (issue 28, a reviewer's
record): the shape roll-ups the import keeps on every path that writes charged jobs, and
``reprice_project``'s figures on a hand-built ledger, its month edges and its rate version."""

from __future__ import annotations

import importlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db.models import Sum

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import jobs_import, quarantine_retry
from accounting.ledger.repricing import RepricedPartition, reprice_project
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    PartitionVersion,
    UsageShapeDaily,
    UsageShapeMonthly,
)
from benchmarks.sacct_generator import write_sacct_file
from projects.models import Project
from tests.conftest import needs_real_services
from tests.factories import PartitionFactory, PartitionVersionFactory

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
PERTH = ZoneInfo("Australia/Perth")  # UTC+8 all year: a local day is not the UTC day

pytestmark = pytest.mark.django_db

HEADER = (
    "JobID|JobIDRaw|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|NNodes|NodeList|"
    "AllocTRES"
)
SHAPE = ("partition_id", "nnodes", "cpus", "gpus", "memory_mb")


def _line(
    job: str,
    *,
    partition: str = "work",
    state: str = "COMPLETED",
    end: str = "2026-03-01T11:00:00",
    seconds: int = 3600,
    nodes: int = 1,
    tres: str = "cpu=64,mem=1000M,node=1",
    account: str = "pawsey0001",
) -> str:
    start = (datetime.fromisoformat(end) - timedelta(seconds=seconds)).isoformat()
    nodelist = "nid[1001-1002]" if nodes == 2 else "nid1001"
    return (
        f"{job}|{job}|alice|{account}|{partition}|{state}|{start}|{start}|{end}|{seconds}|"
        f"{nodes}|{nodelist}|{tres}"
    )


def _import(cluster: Cluster, *lines: str) -> None:
    jobs_import(cluster=cluster, lines=[HEADER, *lines], source="test")


# --- The roll-ups equal a GROUP BY over the charged jobs, on every write path ---------------


def _by_shape(period: str) -> dict[tuple, tuple]:
    """The charged jobs grouped as the roll-up of ``period`` (day or month) groups them."""
    sums: dict[tuple, list] = {}
    for job in Job.objects.filter(charge_state=Job.ChargeState.CHARGED).select_related("cluster"):
        assert job.end is not None
        day = job.end.astimezone(job.cluster.zoneinfo).date()
        when = day if period == "day" else day.replace(day=1)
        key = (job.project_id, when, *(getattr(job, name) for name in SHAPE))
        current = sums.setdefault(key, [0, 0, Decimal(0)])
        current[0] += 1
        current[1] += job.elapsed_seconds
        current[2] += job.service_units
    return {key: tuple(value) for key, value in sums.items()}


def _kept(model: type[UsageShapeDaily] | type[UsageShapeMonthly], period: str) -> dict:
    rows = model.objects.exclude(jobs=0).values_list(
        "project_id", period, *SHAPE, "jobs", "elapsed_seconds", "service_units"
    )
    return {tuple(row[:7]): tuple(row[7:]) for row in rows}


def _assert_rollups_are_the_jobs() -> None:
    expected_days = _by_shape("day")
    assert expected_days
    assert _kept(UsageShapeDaily, "day") == expected_days
    assert _kept(UsageShapeMonthly, "month") == _by_shape("month")


@pytest.fixture
def testbed() -> Cluster:
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    return Cluster.objects.get(name="slurm-testbed")


def test_the_shape_rollups_are_the_charged_jobs_after_an_import_and_its_rerun(testbed):
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=testbed, lines=lines, source="sample")
    _assert_rollups_are_the_jobs()
    kept = (_kept(UsageShapeDaily, "day"), _kept(UsageShapeMonthly, "month"))

    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=testbed, lines=lines, source="sample again")

    assert (_kept(UsageShapeDaily, "day"), _kept(UsageShapeMonthly, "month")) == kept


def test_a_job_refunded_or_charged_again_is_taken_back_from_its_old_shape(testbed):
    _import(testbed, _line("9001"), _line("9002"), _line("9003", end="2026-04-02T11:00:00"))
    _assert_rollups_are_the_jobs()

    # 9001's line changes to a node failure (refunded: out of the roll-up); 9002 ran on two
    # nodes for longer (a new shape); 9003 moves to the month before.
    _import(
        testbed,
        _line("9001", state="NODE_FAIL"),
        _line("9002", seconds=7200, nodes=2, tres="cpu=256,mem=2000M,node=2"),
        _line("9003", end="2026-03-31T11:00:00"),
    )

    assert Job.objects.get(job_id_raw="9001").charge_state == Job.ChargeState.REFUNDED
    _assert_rollups_are_the_jobs()
    assert not UsageShapeMonthly.objects.filter(month=date(2026, 4, 1)).exclude(jobs=0).exists()


def test_memory_finer_than_the_ledger_keeps_is_one_shape_when_its_line_changes(testbed):
    # 1500K is 1.46484375 MB; the ledger keeps 1.465, and a changed line's old row reads back so.
    _import(testbed, _line("9101", tres="cpu=1,mem=1500K,node=1"))
    _import(testbed, _line("9101", tres="cpu=1,mem=1500K,node=1", seconds=1800))

    assert Job.objects.get(job_id_raw="9101").memory_mb == Decimal("1.465")
    _assert_rollups_are_the_jobs()


def test_quarantined_lines_charged_on_retry_are_added_to_the_shape_rollups(testbed):
    Project.objects.filter(code="pawsey0004").delete()
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=testbed, lines=lines, source="sample")
    before = Job.objects.filter(charge_state=Job.ChargeState.CHARGED).count()
    Project.objects.create(code="pawsey0004")

    quarantine_retry(cluster=testbed)

    assert Job.objects.filter(charge_state=Job.ChargeState.CHARGED).count() > before
    _assert_rollups_are_the_jobs()


@pytest.mark.django_db(transaction=True)
def test_the_shape_rollups_are_the_charged_jobs_after_an_import_in_two_processes(testbed, tmp_path):
    needs_real_services("an import by two processes")
    dump = write_sacct_file(tmp_path / "sacct.psv", lines=12_000, seed=5, allocations=True)

    call_command(
        "import_sacct", str(dump), "--cluster", "slurm-testbed", "--workers", "2",
        stdout=StringIO(),
    )  # fmt: skip

    assert ImportRun.objects.count() == 1
    _assert_rollups_are_the_jobs()


def test_the_migration_fills_the_shape_rollups_of_the_jobs_already_charged(testbed):
    backfill = importlib.import_module("accounting.migrations.0021_usage_shape_monthly")
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=testbed, lines=lines, source="sample")
    kept = (_kept(UsageShapeDaily, "day"), _kept(UsageShapeMonthly, "month"))
    UsageShapeDaily.objects.all().delete()
    UsageShapeMonthly.objects.all().delete()

    from django.db import connection

    backfill.shapes_backfill(apps, connection.schema_editor())

    assert (_kept(UsageShapeDaily, "day"), _kept(UsageShapeMonthly, "month")) == kept


# --- reprice_project on a hand-built ledger ----------------------------------------------------
#
# Cluster "desk" in Perth. work: 2 x 64 cores, w = 128; from 1 July a weight of 192 on the same
# hardware, so every work job costs 1.5 times what it was charged. gpu: 64 cores and 4 GPUs,
# w = 4 * 280 W / 280 W * 64 = 256 (eq 15); from 1 July 2 GPUs, w = 128, so a 4-GPU job no longer
# fits.

JULY = datetime(2026, 7, 1, tzinfo=PERTH)


@pytest.fixture
def desk() -> Cluster:
    cluster = Cluster.objects.create(name="desk", timezone="Australia/Perth")
    work = PartitionFactory(cluster=cluster, name="work")
    gpu = PartitionFactory(cluster=cluster, name="gpu")
    PartitionVersionFactory(partition=work, effective_from=datetime(2026, 1, 1, tzinfo=PERTH))
    PartitionVersionFactory(
        partition=work, number=2, effective_from=JULY, weight_override=Decimal(192),
        weight_override_reason="the round's rates",
    )  # fmt: skip
    gpu_node = {
        "sockets": 1, "cores_per_socket": 64, "cpu_tdp_watts": Decimal(280),
        "gpu_tdp_watts": Decimal(280),
    }  # fmt: skip
    PartitionVersionFactory(
        partition=gpu, effective_from=datetime(2026, 1, 1, tzinfo=PERTH), gpus=4,
        derived_weight=Decimal(256), **gpu_node,
    )  # fmt: skip
    PartitionVersionFactory(
        partition=gpu, number=2, effective_from=JULY, gpus=2, derived_weight=Decimal(128),
        **gpu_node,
    )  # fmt: skip
    Project.objects.create(code="pawsey0001")
    Project.objects.create(code="pawsey0002")
    return cluster


def _desk_jobs(desk: Cluster) -> Project:
    _import(
        desk,
        # work: half a node for an hour (64 SU) and two whole nodes for two hours (512 SU)
        _line("1", end="2026-03-10T12:00:00"),
        _line("2", end="2026-04-10T12:00:00", seconds=7200, nodes=2,
              tres="cpu=256,mem=2000M,node=2"),
        # gpu: a quarter of the node (64 SU; half of the new node: 64 SU again) and the whole
        # node (256 SU; 4 GPUs do not fit the new node)
        _line("3", partition="gpu", end="2026-04-20T12:00:00",
              tres="cpu=16,mem=1000M,node=1,gres/gpu=1"),
        _line("4", partition="gpu", end="2026-05-05T12:00:00",
              tres="cpu=64,mem=1000M,node=1,gres/gpu=4"),
        # another project's job is not this project's
        _line("5", end="2026-04-10T12:00:00", account="pawsey0002"),
    )  # fmt: skip
    return Project.objects.get(code="pawsey0001")


def _partition(repricing, name: str) -> RepricedPartition:
    (found,) = [row for row in repricing.partitions if row.partition_name == f"desk/{name}"]
    return found


def test_the_round_rates_reprice_each_partition_exactly(desk):
    project = _desk_jobs(desk)

    repricing = reprice_project(project.pk, date(2026, 1, 1), date(2027, 1, 1), at=date(2026, 7, 1))

    work, gpu = _partition(repricing, "work"), _partition(repricing, "gpu")
    assert [row.partition_name for row in repricing.partitions] == ["desk/gpu", "desk/work"]
    assert (work.jobs, work.charged_su, work.repriced_su, work.unpriced_jobs) == (
        2, Decimal(576), Decimal(864), 0
    )  # fmt: skip
    assert work.repriced_su == work.charged_su * Decimal(192) / Decimal(128)
    assert (gpu.jobs, gpu.charged_su, gpu.repriced_su, gpu.unpriced_jobs) == (
        2, Decimal(320), Decimal(64), 1
    )  # fmt: skip
    assert work.version_id == PartitionVersion.objects.get(partition__name="work", number=2).pk
    assert (work.version_label, gpu.version_label) == (
        "work from 2026-07-01",
        "gpu from 2026-07-01",
    )
    assert repricing.charged_su == Decimal(896)
    assert repricing.repriced_su == Decimal(928)
    assert (
        repricing.charged_su
        == Job.objects.filter(project=project).aggregate(su=Sum("service_units"))["su"]
    )


def test_the_version_in_force_is_the_one_of_the_end_of_that_day_in_the_clusters_zone(desk):
    project = _desk_jobs(desk)
    # 1 July 00:00 in Perth is 30 June 16:00 UTC: on 30 June (local) the July rates are not in
    # force yet, though they are by the end of 30 June in UTC.
    assert JULY.astimezone(UTC) == datetime(2026, 6, 30, 16, tzinfo=UTC)

    before = reprice_project(project.pk, date(2026, 1, 1), date(2027, 1, 1), at=date(2026, 6, 30))

    assert before.repriced_su == before.charged_su == Decimal(896)
    assert {row.version_label for row in before.partitions} == {
        "work from 2026-01-01", "gpu from 2026-01-01"
    }  # fmt: skip
    # A version from the last minute of the day is in force that day.
    work = PartitionVersion.objects.get(partition__name="work", number=2)
    PartitionVersion.objects.filter(pk=work.pk).update(
        effective_from=datetime(2026, 6, 30, 23, 59, tzinfo=PERTH)
    )
    late = reprice_project(project.pk, date(2026, 1, 1), date(2027, 1, 1), at=date(2026, 6, 30))
    assert _partition(late, "work").version_id == work.pk
    assert _partition(late, "work").version_label == "work from 2026-06-30 23:59"


def test_a_partition_without_a_version_at_that_date_counts_its_jobs_unpriced(desk):
    project = _desk_jobs(desk)

    repricing = reprice_project(project.pk, date(2026, 1, 1), date(2027, 1, 1), at=date(2025, 6, 1))

    for row in repricing.partitions:
        assert row.version_id is None
        assert row.unpriced_jobs == row.jobs > 0
        assert row.repriced_su == 0
        assert row.version_label.endswith(": no rate version")


def test_a_project_without_jobs_in_the_period_has_no_partitions(desk):
    project = _desk_jobs(desk)

    repricing = reprice_project(project.pk, date(2025, 1, 1), date(2026, 1, 1), at=date(2026, 7, 1))

    assert repricing.partitions == ()
    assert repricing.charged_su == repricing.repriced_su == Decimal(0)


# --- Month edges: whole months from the monthly rows, the days at either end from the daily ---

EDGE_ENDS = [  # local end times in Perth
    "2026-03-14T23:30:00", "2026-03-15T00:10:00", "2026-03-31T23:50:00", "2026-04-01T00:05:00",
    "2026-04-17T12:00:00", "2026-04-30T23:59:00", "2026-05-01T08:00:00", "2026-05-09T23:59:00",
    "2026-05-10T00:01:00", "2026-06-01T00:00:00",
]  # fmt: skip


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (date(2026, 3, 15), date(2026, 5, 10)),  # two partial months around a whole one
        (date(2026, 3, 1), date(2026, 5, 1)),  # whole months only
        (date(2026, 3, 15), date(2026, 4, 1)),  # a partial month that ends at a month's end
        (date(2026, 4, 1), date(2026, 4, 18)),  # a partial month from its first day
        (date(2026, 3, 31), date(2026, 4, 2)),  # two partial months, no whole one
        (date(2026, 4, 17), date(2026, 4, 17)),  # empty
        (date(2026, 1, 1), date(2027, 1, 1)),  # everything
    ],
)
def test_a_period_counts_exactly_the_jobs_that_ended_on_its_local_days(desk, start, end):
    _import(desk, *(_line(str(100 + n), end=moment) for n, moment in enumerate(EDGE_ENDS)))
    project = Project.objects.get(code="pawsey0001")
    expected = [
        moment for moment in EDGE_ENDS if start <= datetime.fromisoformat(moment).date() < end
    ]

    repricing = reprice_project(project.pk, start, end, at=date(2026, 7, 1))

    jobs = sum(row.jobs for row in repricing.partitions)
    assert jobs == len(expected)
    assert repricing.charged_su == Decimal(64) * len(expected)
    assert repricing.repriced_su == Decimal(96) * len(expected)


def test_the_record_reads_the_rollups_not_the_jobs(desk, django_assert_max_num_queries):
    project = _desk_jobs(desk)

    with django_assert_max_num_queries(4) as captured:
        reprice_project(project.pk, date(2026, 3, 15), date(2027, 3, 15), at=date(2026, 7, 1))

    assert not any("accounting_job" in query["sql"] for query in captured.captured_queries)

"""Importing what jobs used: TotalCPU from the allocation's line, memory peaks from its steps,
the right-sized charge, and the efficiency roll-ups, through the importer's real entry point."""

from __future__ import annotations

import importlib
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from django.db.models import Sum
from django.db.models.functions import TruncMonth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting.clusters.efficiency import job_efficiency
from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import BUCKETS, jobs_import
from accounting.ledger.rollups import bucket_of
from accounting.ledger.sacct import USAGE_FIELDS, parse_total_cpu
from accounting.ledger.usage import held_of, usage_of
from accounting.models import (
    Cluster,
    EfficiencyBucket,
    EfficiencyDaily,
    EfficiencyMonthly,
    EfficiencySums,
    Job,
    UsageDaily,
)
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"

pytestmark = pytest.mark.django_db


@pytest.fixture
def testbed() -> Cluster:
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    return Cluster.objects.get(name="slurm-testbed")


def _lines(**options) -> list[str]:
    return list(sacct_lines(lines=600, seed=11, usage=True, **options))


def _import(cluster: Cluster, lines: list[str], **options):
    return jobs_import(cluster=cluster, lines=iter(lines), source="usage", **options)[1]


def _ledger():
    return sorted(
        Job.objects.values_list(
            "job_id_raw", "cpu_seconds_used", "memory_peak_mb", "right_sized_service_units",
            "service_units",
        )
    )  # fmt: skip


def _rollups():
    daily = sorted(
        EfficiencyDaily.objects.values_list(
            "project_id", "username", "day", "jobs", "service_units", "right_sized_service_units",
            "core_hours_used", "memory_mb_hours_used",
        )
    )  # fmt: skip
    # (A bucket that a changed job left keeps its row, at 0 jobs.)
    buckets = sorted(
        EfficiencyBucket.objects.exclude(jobs=0).values_list("month", "metric", "bucket", "jobs")
    )
    return daily, buckets


def _forget_everything() -> None:
    for model in (Job, UsageDaily, EfficiencyDaily, EfficiencyMonthly, EfficiencyBucket):
        model.objects.all().delete()


def _assert_months_are_their_days() -> None:
    """Every EfficiencyMonthly row is the sum of its month's UsageDaily jobs and SU and of its
    EfficiencyDaily rows, and no month is missing: what a period of whole months reads is what
    its days would give."""
    keys = ("project_id", "partition_id", "username", "month")
    sums = [field.name for field in EfficiencySums._meta.fields]
    expected: dict[tuple, dict[str, object]] = {}
    charged = (
        UsageDaily.objects.annotate(month=TruncMonth("day")).values(*keys)
        .annotate(all_jobs=Sum("jobs"), charged_service_units=Sum("service_units")).order_by()
    )  # fmt: skip
    for row in charged:
        expected.setdefault(tuple(row[key] for key in keys), dict.fromkeys(sums, 0)).update(
            all_jobs=row["all_jobs"], charged_service_units=row["charged_service_units"]
        )
    measured = (
        EfficiencyDaily.objects.annotate(month=TruncMonth("day")).values(*keys)
        .annotate(**{name: Sum(name) for name in sums}).order_by()
    )  # fmt: skip
    for row in measured:
        expected[tuple(row[key] for key in keys)].update({name: row[name] for name in sums})
    kept = (*sums, "all_jobs", "charged_service_units")
    found = {
        tuple(row[:4]): dict(zip(kept, row[4:], strict=True))
        for row in EfficiencyMonthly.objects.values_list(*keys, *kept)
        if any(row[4:])
    }
    assert found == expected
    assert expected


def _steps_by_job(lines: list[str]) -> dict[str, list[list[str]]]:
    header = lines[0].rstrip("\n").split("|")
    steps: dict[str, list[list[str]]] = {}
    for line in lines[1:]:
        fields = line.rstrip("\n").split("|")
        job_id_raw = fields[header.index("JobIDRaw")]
        if "." in job_id_raw:
            steps.setdefault(job_id_raw.partition(".")[0], []).append(fields)
    return steps


def test_each_job_gets_its_cpu_time_and_the_largest_memory_peak_of_its_steps(testbed):
    lines = _lines()

    summary = _import(testbed, lines)

    assert summary.quarantined == 0
    header = lines[0].rstrip("\n").split("|")
    mem = header.index("TRESUsageInTot")
    steps = _steps_by_job(lines)
    jobs = Job.objects.exclude(charge_state=Job.ChargeState.PENDING)
    assert jobs.count() > 50
    for job in jobs:
        assert job.cpu_seconds_used is not None
        peaks = [
            Decimal(fields[mem].split("mem=")[1].split("K")[0]) / 1024
            for fields in steps.get(job.job_id_raw, [])
        ]
        if peaks:
            assert job.memory_peak_mb == max(peaks).quantize(Decimal("0.001"))
        assert 0 <= job.right_sized_service_units <= job.service_units


def test_the_roll_ups_are_the_sums_of_the_measured_jobs_and_every_one_is_in_one_bucket(testbed):
    _import(testbed, _lines())

    measured = Job.objects.filter(right_sized_service_units__isnull=False)
    totals = EfficiencyDaily.objects.aggregate(
        jobs=Sum("jobs"), su=Sum("service_units"), right=Sum("right_sized_service_units")
    )
    assert totals["jobs"] == measured.count() > 0
    assert totals["su"] == measured.aggregate(s=Sum("service_units"))["s"]
    assert totals["right"] == measured.aggregate(s=Sum("right_sized_service_units"))["s"]
    expected = Counter()
    for job in measured:
        ratios = job_efficiency(held_of(job.__dict__), usage_of(job.__dict__))
        for metric in ("cpu", "memory", "gpu", "walltime"):
            ratio = getattr(ratios, metric)
            if ratio is not None:
                expected[(metric, bucket_of(ratio))] += 1
    found = Counter()
    for metric, bucket, jobs in EfficiencyBucket.objects.values_list("metric", "bucket", "jobs"):
        found[(metric, bucket)] += jobs
    assert found == expected
    _assert_months_are_their_days()


def test_small_batches_never_part_a_job_from_its_steps_and_a_second_import_changes_nothing(
    testbed,
):
    lines = _lines()
    _import(testbed, lines)
    reference = _ledger(), _rollups()
    _forget_everything()

    _import(testbed, lines, batch_size=7)
    again = _import(testbed, lines, batch_size=7)

    assert (_ledger(), _rollups()) == reference
    assert again.charged == again.updated == 0
    _assert_months_are_their_days()


def test_a_running_job_gets_its_usage_when_it_is_read_again_finished(testbed):
    lines = _lines()
    first = next(
        i
        for i, line in enumerate(lines[1:], 1)
        if "|COMPLETED|" in line and "." not in line.split("|")[1]
    )
    job_id_raw = lines[first].split("|")[1]
    job_lines = [lines[0]] + [
        line for line in lines[1:] if line.split("|")[1].partition(".")[0] == job_id_raw
    ]
    # The same job while it ran: no steps yet, no end, no TotalCPU.
    running = job_lines[1].split("|")
    header = lines[0].rstrip("\n").split("|")
    running[header.index("State")] = "RUNNING"
    running[header.index("End")] = "Unknown"
    running[header.index("TotalCPU")] = ""
    _import(testbed, [lines[0], "|".join(running)])
    assert Job.objects.get(job_id_raw=job_id_raw).cpu_seconds_used is None
    assert not EfficiencyDaily.objects.exists()

    summary = _import(testbed, job_lines)

    job = Job.objects.get(job_id_raw=job_id_raw)
    assert summary.charged == 1
    assert job.cpu_seconds_used is not None
    assert job.memory_peak_mb is not None
    assert EfficiencyDaily.objects.get().jobs == 1


def test_a_finished_job_read_again_with_other_usage_moves_its_days_and_months_alike(testbed):
    """A changed line takes the job's old share back and adds its new one, in the days and
    in the months: the roll-ups are those of a first import of the changed lines."""
    lines = _lines()
    _import(testbed, lines)
    header = lines[0].rstrip("\n").split("|")
    total_cpu = header.index("TotalCPU")
    changed, edited = list(lines), 0
    for number, line in enumerate(lines[1:], 1):
        fields = line.rstrip("\n").split("|")
        if "|COMPLETED|" in line and "." not in fields[1] and edited < 5:
            fields[total_cpu] = "99-00:00:00"  # above its steps' sum: it is what counts
            changed[number] = "|".join(fields) + "\n"
            edited += 1

    summary = _import(testbed, changed)

    assert summary.updated == 5
    _assert_months_are_their_days()
    again = _ledger(), _rollups()
    _forget_everything()
    _import(testbed, changed)
    assert (_ledger(), _rollups()) == again
    _assert_months_are_their_days()


def test_without_usage_columns_jobs_say_nothing_was_measured_and_no_roll_up_is_written(testbed):
    lines = list(sacct_lines(lines=300, seed=11))

    _import(testbed, lines)

    assert Job.objects.filter(cpu_seconds_used__isnull=False).count() == 0
    assert Job.objects.filter(right_sized_service_units__isnull=False).count() == 0
    assert not EfficiencyDaily.objects.exists()
    assert not EfficiencyBucket.objects.exists()


def test_a_bad_total_cpu_is_a_warning_and_the_steps_cpu_times_stand_in(testbed):
    lines = _lines()
    header = lines[0].rstrip("\n").split("|")
    index = next(i for i, line in enumerate(lines[1:], 1) if "." not in line.split("|")[1])
    fields = lines[index].rstrip("\n").split("|")
    fields[header.index("TotalCPU")] = "soon"
    lines[index] = "|".join(fields) + "\n"

    summary = _import(testbed, lines)

    job = Job.objects.get(job_id_raw=fields[1])
    assert summary.quarantined == 0
    # The steps' CPU times stand in for the allocation's sum, and the job says why.
    steps = _steps_by_job(lines)[fields[1]]
    cpu = header.index("TotalCPU")
    assert job.cpu_seconds_used == sum(parse_total_cpu(step[cpu]) for step in steps)
    assert job.right_sized_service_units is not None
    assert any("TotalCPU" in warning for warning in job.warnings)


def test_a_usage_value_beyond_its_column_is_left_out_with_a_warning(testbed):
    lines = _lines()
    header = lines[0].rstrip("\n").split("|")
    index = next(i for i, line in enumerate(lines[1:], 1) if "." not in line.split("|")[1])
    job_id_raw = lines[index].split("|")[1]
    step = next(i for i, line in enumerate(lines) if line.split("|")[1] == f"{job_id_raw}.batch")
    fields = lines[step].rstrip("\n").split("|")
    tot = header.index("TRESUsageInTot")
    fields[tot] = fields[tot].replace("mem=", "mem=99999999999999999999")
    lines[step] = "|".join(fields) + "\n"

    summary = _import(testbed, lines)

    job = Job.objects.get(job_id_raw=job_id_raw)
    assert summary.quarantined == 0
    assert job.memory_peak_mb is None
    assert any("TRESUsageInTot" in warning and "left out" in warning for warning in job.warnings)


# --- fuzz: junk in the usage columns, through the importer's entry point ------------------------

REAL = (Path(__file__).resolve().parents[1] / "data" / "efficiency" / "sacct_usage.psv").read_text()
USAGE_JUNK = st.sampled_from(
    [
        "", "soon", "-1", "1:2:3:4", "99:99.999", "1-99:00:00", "00:03.6x8", "NaN",
        "99999999999999999999T", "99999999999999999999", "mem=", "mem=abcK", "mem=-5K",
        "cpu=00:00:01,mem=", "energy=0", "gres/gpuutil=ten", "gres/gpumem=1Q", "x" * 5000,
        "mem=1K,mem=2K", "\u00b2K",
    ]
)  # fmt: skip


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_junk_in_the_usage_columns_never_costs_a_charge_and_keeps_every_invariant(
    testbed, data: st.DataObject
):
    """Whatever the usage columns hold, every line lands in one bucket, the same jobs are
    charged the same SU, no efficiency leaves 0..1, no right-sized charge exceeds its charge,
    and the roll-ups stay the sums of the jobs."""
    Project.objects.get_or_create(code="root")
    lines = REAL.splitlines()
    header = lines[0].split("|")
    usage = [header.index(name) for name in USAGE_FIELDS]
    jobs_import(cluster=testbed, lines=iter(lines), source="clean")
    reference = sorted(Job.objects.values_list("job_id_raw", "charge_state", "service_units"))
    _forget_everything()
    for _ in range(data.draw(st.integers(1, 12))):
        number = data.draw(st.integers(1, len(lines) - 1))
        fields = lines[number].split("|")
        fields[data.draw(st.sampled_from(usage))] = data.draw(USAGE_JUNK)
        lines[number] = "|".join(fields)

    summary = jobs_import(cluster=testbed, lines=iter(lines), source="junk", batch_size=5)[1]

    assert sum(getattr(summary, name) for name in BUCKETS) == summary.lines == len(lines) - 1
    assert summary.quarantined == 0
    assert sorted(Job.objects.values_list("job_id_raw", "charge_state", "service_units")) == (
        reference
    )
    for job in Job.objects.all():
        if job.right_sized_service_units is not None:
            assert 0 <= job.right_sized_service_units <= job.service_units
        ratios = job_efficiency(held_of(job.__dict__), usage_of(job.__dict__))
        for ratio in (ratios.cpu, ratios.memory, ratios.gpu, ratios.walltime):
            assert ratio is None or 0 <= ratio <= 1
    measured = Job.objects.filter(right_sized_service_units__isnull=False)
    totals = EfficiencyDaily.objects.aggregate(jobs=Sum("jobs"), su=Sum("service_units"))
    assert (totals["jobs"] or 0) == measured.count()
    assert (totals["su"] or 0) == (measured.aggregate(s=Sum("service_units"))["s"] or 0)
    _assert_months_are_their_days()


def test_the_migration_fills_the_months_of_the_days_already_rolled_up(testbed):
    """An upgraded portal has daily roll-ups and no monthly ones: the migration's backfill
    makes them, the same as the import would have."""
    from django.apps import apps

    backfill = importlib.import_module("accounting.migrations.0017_efficiency_monthly")
    _import(testbed, _lines())
    kept = sorted(EfficiencyMonthly.objects.values_list(*_MONTHLY))
    EfficiencyMonthly.objects.all().delete()

    backfill.months_backfill(apps, None)

    assert sorted(EfficiencyMonthly.objects.values_list(*_MONTHLY)) == kept
    _assert_months_are_their_days()


_MONTHLY = ("project_id", "username", "month", "all_jobs", "charged_service_units", "jobs",
            "right_sized_service_units", "memory_mb_hours_used")  # fmt: skip


def test_every_list_of_the_efficiency_sums_is_the_models():
    """The sums are named beside the code that depends on their order or may not import the
    model: the import's write order (it adds by position), the frozen migration, and the
    benchmark's SQL fill (run before Django is set up)."""
    from accounting.ledger import rollups
    from benchmarks import bench_efficiency_api

    backfill = importlib.import_module("accounting.migrations.0017_efficiency_monthly")
    model = tuple(field.name for field in EfficiencySums._meta.fields)
    assert rollups._EFFICIENCY_SUMS == backfill.SUMS == bench_efficiency_api.SUMS == model

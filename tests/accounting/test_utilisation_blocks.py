"""Q(T) columns kept in the cache month by month (``utilisation_columns_get``, issue 33).

The blocks (``month_blocks``) tile the window with the window's own buckets; the columns put
together from cached and computed blocks equal ``utilisation_columns`` of the whole window's
series, value for value; an import recomputes only the blocks of the months it touched; the
import's month stamps (``UtilisationMonth``) equal the sums of the hourly rows, and so does the
migration's backfill.
"""

from __future__ import annotations

import importlib
import itertools
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.core.cache import cache as shared_cache
from django.db import connection
from django.db.models import Sum
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load, cluster_definition_parse
from accounting.ledger.pipeline import jobs_import
from accounting.ledger.rollups import hourly_apply
from accounting.models import Cluster, Partition, UtilisationHourly, UtilisationMonth
from accounting.utilisation.quality import (
    Step,
    bucket_boundaries,
    month_blocks,
    utc_text,
    utilisation_columns,
)
from accounting.utilisation.selectors import utilisation_columns_get, utilisation_report_get
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sacct"
GIGA = 10**9
ZONES = ("UTC", "Australia/Sydney", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe")

# --------------------------------------------------------------------------------------------
# The blocks (pure)


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    step=st.sampled_from(list(Step)),
    first_hour=st.integers(min_value=0, max_value=400 * 24),
    hours=st.integers(min_value=1, max_value=500 * 24),
)
def test_blocks_tile_the_window_with_the_windows_own_buckets(zone, step, first_hour, hours):
    tz = ZoneInfo(zone)
    base = datetime(2025, 1, 1, tzinfo=tz).astimezone(UTC)
    # Local hour boundaries: whole hours after local midnight of 1 January (Lord Howe's
    # half-hour DST shifts move them, so they are found from the local clock).
    start = _local_hour(base, first_hour, tz)
    end = _local_hour(base, first_hour + hours, tz)
    whole = bucket_boundaries(start=start, end=end, step=step, timezone=tz)
    blocks = month_blocks(start=start, end=end, step=step, timezone=tz)
    assert blocks[0][0] == start
    assert blocks[-1][1] == end
    assert all(left[1] == right[0] for left, right in itertools.pairwise(blocks))
    pieces = [
        bucket_boundaries(start=low, end=high, step=step, timezone=tz) for low, high in blocks
    ]
    joined = [pieces[0][0], *(edge for piece in pieces for edge in piece[1:])]
    assert joined == list(whole)
    # The block edges are exactly the first bucket edges at or after each local month start
    # and each local day start of the last local month.
    starts = _local_month_starts(start, end, tz) + _last_months_days(start, end, tz)
    cuts = {_first_edge_at_or_after(whole, moment) for moment in starts} - {start}
    assert {low for low, _ in blocks[1:]} == cuts - {end}


def _local_hour(base: datetime, hours: int, tz: ZoneInfo) -> datetime:
    moment = base + timedelta(hours=hours)
    local = moment.astimezone(tz)
    return (moment - timedelta(minutes=local.minute, seconds=local.second)).astimezone(UTC)


def _local_month_starts(low: datetime, high: datetime, tz: ZoneInfo) -> list[datetime]:
    day = low.astimezone(tz).date().replace(day=1)
    found: list[datetime] = []
    while True:
        day = (day + timedelta(days=32)).replace(day=1)
        moment = datetime(day.year, day.month, 1, tzinfo=tz).astimezone(UTC)
        if moment >= high:
            return found
        found.append(moment)


def _last_months_days(low: datetime, high: datetime, tz: ZoneInfo) -> list[datetime]:
    final = (high - timedelta(seconds=1)).astimezone(tz).date()
    days = [final.replace(day=number) for number in range(2, final.day + 1)]
    midnights = [datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC) for day in days]
    return [moment for moment in midnights if low < moment]


def _first_edge_at_or_after(edges, moment):
    return next(edge for edge in edges if edge >= moment)


def test_closed_months_are_a_block_each_and_the_last_month_a_block_a_day():
    tz = ZoneInfo("Europe/Berlin")
    start, end = datetime(2026, 2, 1, tzinfo=tz), datetime(2026, 4, 3, 15, tzinfo=tz)
    blocks = month_blocks(start=start, end=end, step="hour", timezone=tz)
    local = [datetime(2026, 3, 1, tzinfo=tz), *(datetime(2026, 4, d, tzinfo=tz) for d in (1, 2, 3))]
    assert [high for _, high in blocks] == [moment.astimezone(UTC) for moment in local] + [
        end.astimezone(UTC)
    ]
    # By month, the last month stays whole: buckets are never cut.
    by_month = month_blocks(start=start, end=end, step="month", timezone=tz)
    assert [high for _, high in by_month] == [
        local[0].astimezone(UTC),
        local[1].astimezone(UTC),
        end,
    ]


def test_a_week_across_a_month_start_stays_whole_in_one_block():
    # 2026-04-01 is a Wednesday: the week of Monday 30 March ends the March block; in May (the
    # last month) no Monday falls before the end.
    blocks = month_blocks(
        start=datetime(2026, 3, 2, tzinfo=UTC), end=datetime(2026, 5, 4, tzinfo=UTC),
        step="week", timezone="UTC",
    )  # fmt: skip
    assert blocks == (
        (datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 4, 6, tzinfo=UTC)),
        (datetime(2026, 4, 6, tzinfo=UTC), datetime(2026, 5, 4, tzinfo=UTC)),
    )


# --------------------------------------------------------------------------------------------
# Cached columns against the uncached ones (PostgreSQL or SQLite)


def spec(zone: str, cpu_nodes: str = "n[01-10]") -> dict:
    common = {"sockets": 1, "cores_per_socket": 4, "memory_mb": 16000, "cpu_tdp_watts": 100,
              "cpu_peak_flops": 4 * GIGA}  # fmt: skip
    return {
        "name": "blocks",
        "timezone": zone,
        "partitions": [
            {"name": "cpu", "nodelist": cpu_nodes, **common},
            {"name": "gpu", "nodelist": "g01", **common, "gpus": 2, "gpu_tdp_watts": 300,
             "gpu_peak_flops": 10 * GIGA},
        ],
    }  # fmt: skip


def _cluster(zone: str) -> Cluster:
    """Two partitions since 2025; ``cpu`` grows from 10 to 20 nodes on 10 April 2026, 13:00."""
    tz = ZoneInfo(zone)
    cluster_apply(definition=cluster_definition_parse(spec(zone)))
    cluster_apply(
        definition=cluster_definition_parse(spec(zone, "n[01-20]")),
        effective_from=datetime(2026, 4, 10, 13, tzinfo=tz),
    )
    return Cluster.objects.get(name="blocks")


def _fill(cluster: Cluster, start: datetime, end: datetime, *, seed: int) -> None:
    """Hourly rows through the import's writer (``hourly_apply``), which keeps the stamps."""
    chooser = random.Random(seed)
    partitions = {p.name: p.pk for p in cluster.partitions.all()}
    hours: dict = {}
    moment = start
    while moment < end:
        if chooser.random() < 0.8:
            hours[(partitions["cpu"], moment)] = [chooser.randrange(0, 40 * 3600), 0]
        if chooser.random() < 0.5:
            hours[(partitions["gpu"], moment)] = [
                chooser.randrange(0, 4 * 3600),
                chooser.randrange(0, 2 * 3600),
            ]
        moment += timedelta(hours=1)
    hourly_apply(hours)


def _uncached(cluster: Cluster, start: datetime, end: datetime, step: str, partition=None):
    report = utilisation_report_get(
        cluster=cluster, start=start, end=end, step=step, partition=partition
    )
    names = [peaks.name for peaks in report.peaks]
    return [utc_text(window.start) for window in report.windows], utilisation_columns(
        report.windows, names
    )


def _cached(cluster: Cluster, start: datetime, end: datetime, step: str, partition=None):
    report = utilisation_columns_get(
        cluster=cluster, start=start, end=end, step=step, partition=partition
    )
    return (report.starts, report.series), report.blocks_computed


WINDOWS = [
    # (first local day, hour; last local day, hour): whole months, and cut mid-month
    ((2026, 1, 1, 0), (2026, 7, 1, 0)),
    ((2026, 2, 14, 7), (2026, 5, 3, 17)),
]


@pytest.mark.django_db
@pytest.mark.parametrize("zone", ["Australia/Sydney", "Europe/Berlin"])
@pytest.mark.parametrize("step", ["hour", "day", "week", "month"])
@pytest.mark.parametrize("window", WINDOWS)
def test_cached_columns_equal_the_whole_windows_columns(zone, step, window):
    cluster = _cluster(zone)
    tz = ZoneInfo(zone)
    _fill(cluster, datetime(2025, 12, 20, tzinfo=UTC), datetime(2026, 7, 5, tzinfo=UTC), seed=7)
    start, end = (datetime(*window[0], tzinfo=tz), datetime(*window[1], tzinfo=tz))
    expected = _uncached(cluster, start, end, step)
    first, computed = _cached(cluster, start, end, step)
    assert first == expected
    assert computed == len(month_blocks(start=start, end=end, step=step, timezone=tz))
    again, computed = _cached(cluster, start, end, step)
    assert again == expected
    assert computed == 0
    cpu = Partition.objects.get(cluster=cluster, name="cpu")
    assert _cached(cluster, start, end, step, cpu)[0] == _uncached(cluster, start, end, step, cpu)


@pytest.mark.django_db
def test_an_import_into_one_month_recomputes_that_month_only():
    cluster = _cluster("Australia/Sydney")
    tz = ZoneInfo("Australia/Sydney")
    _fill(cluster, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC), seed=3)
    start, end = datetime(2026, 1, 1, tzinfo=tz), datetime(2026, 6, 1, tzinfo=tz)
    blocks = month_blocks(start=start, end=end, step="hour", timezone=tz)
    assert _cached(cluster, start, end, "hour")[1] == len(blocks) == 4 + 31
    cpu = cluster.partitions.get(name="cpu")
    # Into the open month (the window's last): the block of the day alone.
    hourly_apply({(cpu.pk, datetime(2026, 5, 15, 2, tzinfo=UTC)): [3600, 0]})
    after, computed = _cached(cluster, start, end, "hour")
    assert computed == 1
    assert after == _uncached(cluster, start, end, "hour")
    # Into the middle of an earlier UTC month: the blocks of the local months that overlap it
    # (Sydney is ahead of UTC: local March from 28 February 13:00 UTC, local April from 31 March
    # 13:00 UTC both hold hours of UTC March).
    hourly_apply({(cpu.pk, datetime(2026, 3, 15, 2, tzinfo=UTC)): [3600, 0]})
    after, computed = _cached(cluster, start, end, "hour")
    assert computed == 2
    assert after == _uncached(cluster, start, end, "hour")
    # Seconds moved between two hours of one month leave its sums as they were: the count of
    # batches still moves the stamp (UTC April: local April's block; May's days have their own
    # keys, of their rows).
    hour = datetime(2026, 4, 15, 2, tzinfo=UTC)
    april = UtilisationMonth.objects.get(partition=cpu, month=hour.date().replace(day=1))
    hourly_apply({(cpu.pk, hour): [-600, 0], (cpu.pk, hour + timedelta(hours=1)): [600, 0]})
    april_after = UtilisationMonth.objects.get(pk=april.pk)
    assert april_after.core_seconds == april.core_seconds
    assert april_after.changes == april.changes + 1
    moved, computed = _cached(cluster, start, end, "hour")
    assert computed == 1
    assert moved == _uncached(cluster, start, end, "hour")
    # Seconds moved between two hours of a day of the open month: that day's block.
    hour = datetime(2026, 5, 20, 2, tzinfo=UTC)
    hourly_apply({(cpu.pk, hour): [-600, 0], (cpu.pk, hour + timedelta(hours=1)): [600, 0]})
    moved, computed = _cached(cluster, start, end, "hour")
    assert computed == 1
    assert moved == _uncached(cluster, start, end, "hour")


@pytest.fixture
def testbed() -> Cluster:
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.create(code=code)
    return Cluster.objects.get(name="slurm-testbed")


def _hourly_by_month() -> dict:
    sums: dict = {}
    for partition, hour, core, gpu in UtilisationHourly.objects.values_list(
        "partition_id", "hour_start", "core_seconds", "gpu_seconds"
    ):
        key = (partition, hour.astimezone(UTC).date().replace(day=1))
        total = sums.setdefault(key, [0, 0])
        total[0] += core
        total[1] += gpu
    return {key: tuple(value) for key, value in sums.items()}


def _stamps() -> dict:
    return {
        (partition, month): (core, gpu)
        for partition, month, core, gpu in UtilisationMonth.objects.values_list(
            "partition_id", "month", "core_seconds", "gpu_seconds"
        )
    }


@pytest.mark.django_db
def test_a_real_import_recomputes_its_month_only_and_equals_a_fresh_computation(testbed):
    work = testbed.partitions.get(name="work")
    _fill_work(work, datetime(2026, 9, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
    start, end = datetime(2026, 9, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)
    for step in ("hour", "day"):
        assert _cached(testbed, start, end, step)[1] == 2 + 30  # September, October, 30 days
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=testbed, lines=lines, source="sample")
    for step in ("hour", "day"):
        columns, computed = _cached(testbed, start, end, step)
        assert computed == 1  # 22 November's block; the others from the cache
        assert columns == _uncached(testbed, start, end, step)
        assert columns[1]["total"]["core_seconds"] != [0] * len(columns[0])
    assert _stamps() == _hourly_by_month()


def _fill_work(work: Partition, start: datetime, end: datetime) -> None:
    hours = {}
    moment = start
    while moment < end:
        hours[(work.pk, moment)] = [(moment.hour + 1) * 100, 0]
        moment += timedelta(hours=1)
    hourly_apply(hours)


HEADER = (SAMPLE / "sacct_allocations.psv").read_text().splitlines()[0]


def _moved(line: str, start: str, end: str, elapsed: int) -> str:
    fields = line.split("|")
    names = HEADER.split("|")
    fields[names.index("Start")], fields[names.index("End")] = start, end
    fields[names.index("ElapsedRaw")] = str(elapsed)
    hours, rest = divmod(elapsed, 3600)
    fields[names.index("Elapsed")] = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return "|".join(fields)


@pytest.mark.django_db
def test_the_stamps_equal_the_hourly_sums_after_imports_and_a_job_moved_between_months(
    testbed,
):
    with (SAMPLE / "midrun/sacct_midrun_allocations.psv").open() as lines:
        jobs_import(cluster=testbed, lines=lines, source="midrun")
    assert _stamps() == _hourly_by_month()
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=testbed, lines=lines, source="final")
    assert _stamps() == _hourly_by_month()
    first = (SAMPLE / "sacct_allocations.psv").read_text().splitlines()[1]
    # The same job again, its run now from 31 October to 1 November: hours leave November's
    # rows and join October's and November's first.
    moved = _moved(first, "2026-10-31T22:30:00", "2026-11-01T01:15:00", 9900)
    jobs_import(cluster=testbed, lines=[HEADER, moved], source="moved")
    stamps = _stamps()
    assert stamps == _hourly_by_month()
    work = testbed.partitions.get(name="work")
    assert stamps[(work.pk, datetime(2026, 10, 1).date())][0] > 0
    months = UtilisationMonth.objects.filter(partition=work)
    assert months.get(month=datetime(2026, 11, 1).date()).changes >= 3


@pytest.mark.django_db
def test_the_migrations_backfill_equals_what_the_import_keeps(testbed):
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=testbed, lines=lines, source="final")
    work = testbed.partitions.get(name="work")
    _fill_work(work, datetime(2026, 9, 20, tzinfo=UTC), datetime(2026, 10, 10, tzinfo=UTC))
    kept = _stamps()
    assert len(kept) >= 3
    migration = importlib.import_module("accounting.migrations.0029_utilisation_months")
    UtilisationMonth.objects.all().delete()
    migration.backfill_months(connection)
    assert _stamps() == kept == _hourly_by_month()
    assert set(UtilisationMonth.objects.values_list("changes", flat=True)) == {1}
    assert (
        UtilisationMonth.objects.aggregate(total=Sum("core_seconds"))["total"]
        == (UtilisationHourly.objects.aggregate(total=Sum("core_seconds"))["total"])
    )


@pytest.mark.django_db
def test_a_process_answers_the_same_window_from_what_it_joined_until_its_rows_move():
    cluster = _cluster("Australia/Sydney")
    tz = ZoneInfo("Australia/Sydney")
    _fill(cluster, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC), seed=5)
    start, end = datetime(2026, 1, 1, tzinfo=tz), datetime(2026, 4, 1, tzinfo=tz)

    def columns():
        return utilisation_columns_get(cluster=cluster, start=start, end=end, step="hour")

    first = columns()
    shared_cache.clear()  # the blocks are gone from the cache: the joined text is not
    again = columns()
    assert (again.identity, again.blocks_computed) == (first.identity, 0)
    assert (again.starts_json, again.series_json) == (first.starts_json, first.series_json)

    cpu = cluster.partitions.get(name="cpu")
    hourly_apply({(cpu.pk, datetime(2026, 3, 20, 2, tzinfo=UTC)): [3600, 0]})
    moved = columns()
    assert moved.identity != first.identity
    assert moved.blocks_computed >= 1
    assert (moved.starts, moved.series) == _uncached(cluster, start, end, "hour")

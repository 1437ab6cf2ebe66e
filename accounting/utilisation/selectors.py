"""Read-side queries of utilisation: peak timelines from rate versions and Q(T) reports from
the hourly roll-ups the import keeps.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.cache import cache as shared_cache
from django.db import connection
from django.db.models import (
    BigIntegerField,
    Func,
    Q,
)
from django.utils import timezone

from accounting.clusters.specs import CpuPeak, GpuPeak
from accounting.models import (
    Cluster,
    Job,
    Partition,
    PartitionVersion,
    UtilisationHourly,
    UtilisationMonth,
)
from accounting.utilisation.peak import (
    PeakError,
    PeakPeriod,
    PeakTimeline,
    epoch_seconds,
    node_peak,
    peak_timeline,
)
from accounting.utilisation.quality import (
    HourRow,
    PeakInForce,
    Step,
    UtilisationWindow,
    month_blocks,
    peak_at,
    peaks_in_window,
    utc_text,
    utilisation_columns,
    utilisation_series_from_hour_rows,
)
from kit.kept import Kept


def _peak_period(version: PartitionVersion) -> PeakPeriod:
    """A rate version as a period of P_peak: its node count and its nodes' peak (eqs 1-8)."""
    cpu_parameters = (
        CpuPeak(
            n_stream=version.cpu_peak_n_stream,
            n_unit=version.cpu_peak_n_unit or 1,
            frequency_hz=version.cpu_peak_frequency_hz or Decimal(0),
        )
        if version.cpu_peak_n_stream
        else None
    )
    gpu_parameters = (
        GpuPeak(
            n_cuda=version.gpu_peak_n_cuda,
            n_tensor=version.gpu_peak_n_tensor or 0,
            matrix_order=version.gpu_peak_matrix_order or 0,
            frequency_hz=version.gpu_peak_frequency_hz or Decimal(0),
        )
        if version.gpu_peak_n_cuda is not None
        else None
    )
    try:
        node = node_peak(
            sockets=version.sockets, cores_per_socket=version.cores_per_socket,
            gpus=version.gpus, cpu_parameters=cpu_parameters,
            cpu_vendor_flops=version.cpu_peak_flops, gpu_parameters=gpu_parameters,
            gpu_vendor_flops=version.gpu_peak_flops,
        )  # fmt: skip
    except PeakError as error:
        raise PeakError(f"{version.partition} v{version.number}: {error}") from None
    return PeakPeriod(
        effective_from=version.effective_from, node_count=version.node_count, node=node
    )


def partition_peak_timeline(*, partition: Partition) -> PeakTimeline:
    """P_peak of a partition over time, one period per version (node counts change)."""
    return partition_peak_timelines(partitions=[partition])[partition.name]


def partition_peak_timelines(*, partitions: Sequence[Partition]) -> dict[str, PeakTimeline]:
    """P_peak over time of each partition (of one cluster), by name, in one query."""
    versions: dict[int, list[PeakPeriod]] = {partition.pk: [] for partition in partitions}
    by_id = {partition.pk: partition for partition in partitions}
    for version in PartitionVersion.objects.filter(partition__in=partitions).order_by(
        "partition_id", "effective_from"
    ):
        version.partition = by_id[version.partition_id]  # for messages, without a query
        versions[version.partition_id].append(_peak_period(version))
    timelines = {}
    for partition in partitions:
        try:
            timelines[partition.name] = peak_timeline(versions[partition.pk])
        except PeakError as error:
            raise PeakError(f"{partition}: {error}") from None
    return timelines


class _EpochSeconds(Func):
    """Whole seconds since the Unix epoch of a datetime column, as a bigint: converting 10,000s
    of timestamps into ``datetime`` objects costs more than all the Q(T) arithmetic."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)::bigint"
    output_field = BigIntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Django keeps datetimes in SQLite as UTC text; '%%%%s' reaches SQLite as '%s'.
        template = "CAST(strftime('%%%%s', %(expressions)s) AS INTEGER)"
        return self.as_sql(compiler, connection, template=template, **extra)


def _cluster_partitions(*, cluster: Cluster, partition: Partition | None) -> list[Partition]:
    if partition is not None:
        return [partition]
    return list(cluster.partitions.order_by("name"))


def _hour_rows(
    *, partitions: Sequence[Partition], ranges: Sequence[tuple[datetime, datetime]]
) -> list[HourRow]:
    """The hourly rows of ``partitions`` inside any of ``ranges`` ``[since, until)``, in one
    query, as :data:`HourRow` tuples."""
    inside = Q()
    for since, until in ranges:
        inside |= Q(hour_start__gte=since, hour_start__lt=until)
    query = (
        UtilisationHourly.objects.filter(inside, partition__in=partitions)
        .annotate(hour=_EpochSeconds("hour_start"))
        .order_by()
        .values_list("partition__name", "hour", "core_seconds", "gpu_seconds")
    )
    # The rows as the cursor gives them (str, int, int, int): the ORM's per-row converters
    # would cost half as much again as the fetch.
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _utilisation_windows(
    *,
    cluster: Cluster,
    partitions: Sequence[Partition],
    timelines: Mapping[str, PeakTimeline],
    start: datetime,
    end: datetime,
    step: Step | str,
) -> tuple[UtilisationWindow, ...]:
    rows = _hour_rows(partitions=partitions, ranges=[(start, end)])
    return utilisation_series_from_hour_rows(
        rows=rows, partitions=timelines, start=start, end=end, step=step,
        timezone=cluster.zoneinfo,
    )  # fmt: skip


def utilisation_series_get(
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    step: Step | str,
    partition: Partition | None = None,
) -> tuple[UtilisationWindow, ...]:
    """Q(T) (eq 12) and core/GPU-hour utilisation per bucket, from the hourly rows the import
    keeps: never a scan of the jobs. ``start`` and ``end`` must fall on the cluster's hours.
    Partitions are keyed by name; the total is over those asked for (all of the cluster's)."""
    partitions = _cluster_partitions(cluster=cluster, partition=partition)
    timelines = partition_peak_timelines(partitions=partitions)
    return _utilisation_windows(
        cluster=cluster, partitions=partitions, timelines=timelines, start=start, end=end,
        step=step,
    )  # fmt: skip


@dataclass(frozen=True)
class PartitionPeaks:
    """What the utilisation page says about one partition's P_peak."""

    name: str
    now: PeakInForce | None  # the hardware in force now (None: no version yet)
    in_window: list[PeakInForce]  # at the window's start and each change inside it


@dataclass(frozen=True)
class UtilisationReport:
    """A Q(T) series with what it was computed from (for the page and the API)."""

    cluster: Cluster
    partition: Partition | None  # None: every partition of the cluster
    start: datetime
    end: datetime
    step: Step
    windows: tuple[UtilisationWindow, ...]
    peaks: list[PartitionPeaks]


def _partition_peaks(
    timelines: Mapping[str, PeakTimeline], start: datetime, end: datetime, now: datetime | None
) -> list[PartitionPeaks]:
    moment = now or timezone.now()
    return [
        PartitionPeaks(
            name=name,
            now=peak_at(timeline, moment),
            in_window=peaks_in_window(timeline, start, end),
        )
        for name, timeline in timelines.items()
    ]


def utilisation_report_get(
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    step: Step | str,
    partition: Partition | None = None,
    now: datetime | None = None,
) -> UtilisationReport:
    """:func:`utilisation_series_get` with each partition's peak source, P_peak now and the
    node-count changes inside the window (from the rate versions). Three queries."""
    partitions = _cluster_partitions(cluster=cluster, partition=partition)
    timelines = partition_peak_timelines(partitions=partitions)
    windows = _utilisation_windows(
        cluster=cluster, partitions=partitions, timelines=timelines, start=start, end=end,
        step=step,
    )  # fmt: skip
    return UtilisationReport(
        cluster=cluster, partition=partition, start=start, end=end, step=Step(step),
        windows=windows, peaks=_partition_peaks(timelines, start, end, now),
    )  # fmt: skip


Columns = dict[str, dict[str, list[str | int | None]]]
"""Per series (each partition, then ``total``) one list per figure: what
:func:`accounting.utilisation.quality.utilisation_columns` gives."""


@dataclass(frozen=True)
class UtilisationColumnsReport:
    """A Q(T) series as columns (the API's ``columns`` shape), with what it was computed
    from: :class:`UtilisationReport` with the columns in place of the windows.

    The columns come as JSON text, as the cache keeps them (a year of hours is about 4 MB of
    JSON; put together from the blocks' texts it is never parsed nor printed again):
    ``starts_json`` the array of each bucket's start (UTC ISO 8601 with Z), ``series_json``
    the object of :data:`Columns`. :attr:`starts` and :attr:`series` parse them."""

    cluster: Cluster
    partition: Partition | None
    start: datetime
    end: datetime
    step: Step
    starts_json: str
    series_json: str
    peaks: list[PartitionPeaks]
    blocks_computed: int  # blocks not found in the cache (what a first view recomputed)
    identity: str = ""  # the columns' text is a function of it (their blocks' keys, in order)

    @property
    def starts(self) -> list[str]:
        starts: list[str] = json.loads(self.starts_json)
        return starts

    @property
    def series(self) -> Columns:
        series: Columns = json.loads(self.series_json)
        return series


# A key holds every input of its block (it is never stale); this only bounds what is kept.
QT_BLOCK_SECONDS = 30 * 86400
_QT_BLOCK_VERSION = 3  # the cached value's layout; a new one leaves the old keys unread


def utilisation_columns_get(
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    step: Step | str,
    partition: Partition | None = None,
    now: datetime | None = None,
) -> UtilisationColumnsReport:
    """:func:`utilisation_report_get` as columns, kept in the cache block by block.

    The window's buckets are cut into one block per local month, and per local day in its last
    month (``month_blocks``); a block's columns are cached as JSON text under a key of
    everything they are computed from: the partitions (id and name), the block's edges, the
    step, the zone, the partitions' peak timelines (the rate versions) and the block's hourly
    data: for a closed month the stamps the import keeps of every UTC month the block overlaps
    (``UtilisationMonth``: sums and a count of the batches that touched it, moved in the same
    transaction as the hourly rows), for a day of the last month its hourly rows, read for the
    month in one query. A block whose key is cached is served from it; the others (after an
    import, the days it touched) are computed from their hourly rows, read in one query, and
    kept. The columns equal ``utilisation_columns`` of the whole window's series, value for
    value (tests/accounting/test_utilisation_blocks.py). Docs: docs/utilisation.md.
    """
    step = Step(step)
    partitions = _cluster_partitions(cluster=cluster, partition=partition)
    timelines = partition_peak_timelines(partitions=partitions)
    blocks = month_blocks(start=start, end=end, step=step, timezone=cluster.zoneinfo)
    stamps = _month_stamps(partitions=partitions, start=start, end=end)
    # The last month's blocks (a day each) are keyed by their hourly rows, read in one query:
    # a change in the open month leaves its other days' blocks in the cache.
    last_month = _local_month_start(end, cluster)
    open_blocks = [block for block in blocks if block[0] >= last_month]
    rows_of = _rows_by_block(partitions=partitions, blocks=open_blocks)
    shared = (
        _QT_BLOCK_VERSION, [(p.pk, p.name) for p in partitions], str(step), cluster.timezone,
        hashlib.sha256(repr(list(timelines.items())).encode()).hexdigest(),
    )  # fmt: skip
    keys = {
        block: "qt-columns:" + hashlib.sha256(
            repr((
                shared, *_block_seconds(block),
                sorted(rows_of[block]) if block in rows_of else _block_stamps(block, stamps),
            )).encode()
        ).hexdigest()
        for block in blocks
    }  # fmt: skip
    # Every block's key holds all its text is computed from, so the keys in order name the
    # whole columns' text: a process that joined them already answers from what it kept.
    identity = hashlib.sha256("\n".join(keys.values()).encode()).hexdigest()
    joined = _joined_kept.get(identity)
    if joined is not None:
        return UtilisationColumnsReport(
            cluster=cluster, partition=partition, start=start, end=end, step=step,
            starts_json=joined[0], series_json=joined[1],
            peaks=_partition_peaks(timelines, start, end, now), blocks_computed=0,
            identity=identity,
        )  # fmt: skip
    cached = shared_cache.get_many(list(keys.values()))
    missing = [block for block, key in keys.items() if key not in cached]
    closed = [block for block in missing if block not in rows_of]
    rows_of.update(_rows_by_block(partitions=partitions, blocks=closed))
    fresh = _blocks_columns(
        cluster=cluster, timelines=timelines, rows_of={block: rows_of[block] for block in missing},
        step=step,
    )  # fmt: skip
    if fresh:
        shared_cache.set_many({keys[block]: fresh[block] for block in missing}, QT_BLOCK_SECONDS)
    parts = [cached[keys[block]] if keys[block] in cached else fresh[block] for block in blocks]
    starts_json, series_json = _joined(parts)
    _joined_kept.put(identity, (starts_json, series_json))
    return UtilisationColumnsReport(
        cluster=cluster, partition=partition, start=start, end=end, step=step,
        starts_json=starts_json, series_json=series_json,
        peaks=_partition_peaks(timelines, start, end, now), blocks_computed=len(missing),
        identity=identity,
    )  # fmt: skip


# The last few windows' joined columns, per process (a year by the hour is about 3 MB of text:
# fetching its forty blocks from the cache and joining them again cost a few milliseconds of
# every view). Keyed on the blocks' keys, so never stale.
_joined_kept: Kept[str, tuple[str, str]] = Kept(4)


BlockText = tuple[str, dict[str, dict[str, str]]]
"""A block's columns as the cache keeps them: the JSON of its buckets' starts and, per series
and figure, of its values, each without the array's brackets (blocks are joined by commas)."""


def _block_text(starts: list[str], columns: Columns) -> BlockText:
    def items(values: list[Any]) -> str:
        return renderer_json(values)[1:-1]

    return items(starts), {
        name: {field: items(values) for field, values in figures.items()}
        for name, figures in columns.items()
    }


def renderer_json(value: Any) -> str:
    """JSON as DRF's ``JSONRenderer`` writes it (compact, UTF-8 as it is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _joined(parts: Sequence[BlockText]) -> tuple[str, str]:
    """The blocks' texts end to end: the JSON of all the starts and of all the series."""
    starts = "[" + ",".join(block[0] for block in parts) + "]"
    first = parts[0][1]
    series = ",".join(
        renderer_json(name) + ":{" + ",".join(
            renderer_json(field) + ":[" + ",".join(block[1][name][field] for block in parts) + "]"
            for field in figures
        ) + "}"
        for name, figures in first.items()
    )  # fmt: skip
    return starts, "{" + series + "}"


def _block_seconds(block: tuple[datetime, datetime]) -> tuple[int, int]:
    return epoch_seconds(block[0]), epoch_seconds(block[1])


def _utc_month(when: datetime) -> date:
    utc = when.astimezone(UTC)
    return date(utc.year, utc.month, 1)


def _month_stamps(
    *, partitions: Sequence[Partition], start: datetime, end: datetime
) -> list[tuple[int, date, int, int, int]]:
    """The import's stamps of every UTC month the window overlaps, in one small query."""
    return list(
        UtilisationMonth.objects.filter(
            partition__in=partitions,
            month__gte=_utc_month(start),
            month__lte=_utc_month(end - _ONE_SECOND),
        )
        .order_by("month", "partition_id")
        .values_list("partition_id", "month", "core_seconds", "gpu_seconds", "changes")
    )


def _block_stamps(
    block: tuple[datetime, datetime], stamps: list[tuple[int, date, int, int, int]]
) -> list[tuple[int, date, int, int, int]]:
    """The stamps of the UTC months ``[since, until)`` overlaps: those its hourly rows are in."""
    first, last = _utc_month(block[0]), _utc_month(block[1] - _ONE_SECOND)
    return [stamp for stamp in stamps if first <= stamp[1] <= last]


_ONE_SECOND = timedelta(seconds=1)


def _local_month_start(end: datetime, cluster: Cluster) -> datetime:
    """Local midnight of the first day of the month ``[..., end)`` ends in."""
    last = (end - _ONE_SECOND).astimezone(cluster.zoneinfo)
    return datetime(last.year, last.month, 1, tzinfo=cluster.zoneinfo)


Block = tuple[datetime, datetime]


def _rows_by_block(
    *, partitions: Sequence[Partition], blocks: Sequence[Block]
) -> dict[Block, list[HourRow]]:
    """The hourly rows of each of ``blocks`` (in time order), read in one query."""
    if not blocks:
        return {}
    rows = _hour_rows(partitions=partitions, ranges=_merged(blocks))
    edges = [_block_seconds(block)[0] for block in blocks]
    rows_of: dict[Block, list[HourRow]] = {block: [] for block in blocks}
    for row in rows:
        index = bisect.bisect_right(edges, row[1]) - 1
        if index >= 0:
            rows_of[blocks[index]].append(row)
    return rows_of


def _blocks_columns(
    *,
    cluster: Cluster,
    timelines: Mapping[str, PeakTimeline],
    rows_of: Mapping[Block, list[HourRow]],
    step: Step,
) -> dict[Block, BlockText]:
    """Each block's columns as JSON text, from the block's hourly rows."""
    names = list(timelines)
    computed = {}
    for block, block_rows in rows_of.items():
        windows = utilisation_series_from_hour_rows(
            rows=block_rows, partitions=timelines, start=block[0], end=block[1], step=step,
            timezone=cluster.zoneinfo,
        )  # fmt: skip
        starts = [utc_text(window.start) for window in windows]
        computed[block] = _block_text(starts, utilisation_columns(windows, names))
    return computed


def _merged(blocks: Sequence[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Adjacent blocks as one range (the missing blocks are mostly a run: one range to read)."""
    ranges: list[tuple[datetime, datetime]] = []
    for since, until in blocks:
        if ranges and ranges[-1][1] == since:
            ranges[-1] = (ranges[-1][0], until)
        else:
            ranges.append((since, until))
    return ranges


def jobs_in_window(
    *,
    cluster: Cluster,
    partition: Partition | None,
    start: datetime,
    end: datetime,
    limit: int = 20,
) -> list[Job]:
    """The jobs of ``cluster`` (``partition``) that ran during [start, end), the widest first:
    what a flagged, over-committed window is made of."""
    jobs = Job.objects.filter(cluster=cluster, start__lt=end, end__gt=start)
    if partition is not None:
        jobs = jobs.filter(partition=partition)
    return list(jobs.select_related("partition").order_by("-cpus", "start", "pk")[:limit])

"""The jobs ledger, partitioned by month on PostgreSQL (docs/importing.md, "A hundred million
jobs").

Migration 0013 turns ``accounting_job`` into a table partitioned by range of ``end``: one
partition per calendar month (UTC), named ``accounting_job_pYYYY_MM``, and a default partition,
``accounting_job_open``, for the jobs still running (no end yet) and for any month that has no
partition of its own yet. PostgreSQL can enforce a unique key on a partitioned table only when
the key holds the partition key, and a job's end changes while it runs, so the ledger's key
(cluster, JobIDRaw, run) lives in a narrow table of its own, ``accounting_job_key``, which
triggers on the ledger keep in step (insert, update, delete, truncate). Its unique constraint
is the one a concurrent import runs into; rows elsewhere that point at a job (adjustments,
profiling coefficients, fair shares) point at the key, so the database still refuses a
reference to a job that does not exist. Since migration 0022 the import writes the key rows of
its batches itself, set-wise (:func:`keys_insert`, :func:`keys_update_from`), and the triggers
skip its statements (:func:`key_table_kept_here`).

SQLite (the demo) keeps one plain table; every function here does nothing there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection, transaction
from psycopg.copy import QueuedLibpqWriter

from kit.pg_copy import rows_copy

TABLE = "accounting_job"
KEY_TABLE = "accounting_job_key"
OPEN_PARTITION = "accounting_job_open"
# pg_advisory_xact_lock key of partition changes: two importers that both meet a new month
# create its partition once, one after the other. Batches that write the ledger hold it
# shared (ledger_write_lock), so the DDL and the writes are ordered by this one lock first.
_LOCK_KEY = 0x5055_4A4F  # "PUJO"
# What the key table keeps of a job beside its id (migrations 0013, 0020 and 0025: ``end``,
# the ledger's partition key, so that a job found by id is read from its partition alone).
KEY_COLUMNS = (
    "cluster_id", "job_id_raw", "run", "source_hash", "charge_state", "project_id",
    "partition_id", "pending_service_units", "reserved_service_units", "end",
)  # fmt: skip
# Of those, what an update can change (the key itself never changes).
_KEY_CHANGING = KEY_COLUMNS[3:]


@dataclass(frozen=True)
class LedgerPartition:
    name: str
    month: date | None  # None: the open (default) partition
    rows: int  # PostgreSQL's estimate (pg_class.reltuples); -1 before the first ANALYZE


def is_partitioned() -> bool:
    """True on PostgreSQL once migration 0013 has partitioned the ledger. Asked once per
    database and process: a ledger once partitioned stays so."""
    if connection.vendor != "postgresql":
        return False
    database = str(connection.settings_dict["NAME"])
    if database in _PARTITIONED:
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s))",
            [TABLE],
        )
        row = cursor.fetchone()
    if row and row[0]:
        _PARTITIONED.add(database)
        return True
    return False


_PARTITIONED: set[str] = set()


def month_of(moment: datetime) -> date:
    """The first day of the UTC month a job that ended at ``moment`` is kept in."""
    utc = moment.astimezone(UTC)
    return date(utc.year, utc.month, 1)


LAST_MONTH = date(9999, 12, 1)


def month_after(month: date) -> date:
    """The first day of the month after ``month``'s; ValueError after December 9999, Python's
    last month (the partition bounds below do without it)."""
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _month_after_or_none(month: date) -> date | None:
    return None if month >= LAST_MONTH else month_after(month)


def partition_name(month: date) -> str:
    return f"{TABLE}_p{month.year:04d}_{month.month:02d}"


def _bound(month: date | None) -> str:
    # PostgreSQL counts years beyond 9999: the bound after December 9999 (None: no Python
    # date) is written out, so a job that ended in December 9999 has a partition too.
    return "10000-01-01 00:00:00+00" if month is None else f"{month.isoformat()} 00:00:00+00"


def ledger_write_lock() -> None:
    """Inside a transaction that writes the ledger: wait for any partition change in flight and
    keep new ones out until the commit. Taken before any table lock, it orders writers and the
    DDL of :func:`partitions_ensure` by one lock, so they cannot deadlock. (Without it, a writer
    holding a project row it created and waiting for the open partition, and an ATTACH holding
    the open partition and waiting for the project table's foreign-key lock, did, with
    ``--workers 2``.) Writers hold it shared: they never wait for each other."""
    if is_partitioned():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s)", [_LOCK_KEY])


def partitions_ensure(months: Iterable[date]) -> list[str]:
    """Create the monthly partitions the given months lack, and return their names.

    Rows the open partition holds for such a month (jobs written before its partition
    existed) move into the new partition in the same transaction: PostgreSQL refuses a new
    partition while the default one still holds rows of its range. Call this outside a batch's
    transaction: the DDL waits for the transactions that write the ledger.
    """
    wanted = sorted({date(m.year, m.month, 1) for m in months})
    if not wanted or not is_partitioned():
        return []
    missing = _missing(wanted)
    created = []
    for month in missing:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
            if not _missing([month]):  # another process made it meanwhile
                continue
            name, low, high = (
                partition_name(month),
                _bound(month),
                _bound(_month_after_or_none(month)),
            )
            cursor.execute(
                f'SELECT EXISTS (SELECT 1 FROM {OPEN_PARTITION} WHERE "end" >= %s AND "end" < %s)',  # noqa: S608
                [low, high],
            )
            row = cursor.fetchone()
            if row and row[0]:
                cursor.execute(
                    f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
                )
                cursor.execute(
                    f"WITH moved AS (DELETE FROM {OPEN_PARTITION} "  # noqa: S608
                    f'WHERE "end" >= %s AND "end" < %s RETURNING *) '
                    f"INSERT INTO {name} SELECT * FROM moved",
                    [low, high],
                )
                cursor.execute(
                    f"ALTER TABLE {TABLE} ATTACH PARTITION {name} "
                    f"FOR VALUES FROM ('{low}') TO ('{high}')"
                )
            else:
                cursor.execute(
                    f"CREATE TABLE {name} PARTITION OF {TABLE} "
                    f"FOR VALUES FROM ('{low}') TO ('{high}')"
                )
            created.append(name)
    return created


def _missing(months: list[date]) -> list[date]:
    """The months without a partition, read from ``pg_class`` as a table (a snapshot of what is
    committed now), not with ``to_regclass``: that reads the backend's catalogue cache, which a
    backend refreshes only when it takes a table lock. A process that waited on the advisory
    lock while another made the partition would otherwise still see it missing, and make it
    again ("already exists", seen with ``--workers 2``)."""
    names = [partition_name(month) for month in months]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = ANY(%s)",
            [names],
        )
        present = {name for (name,) in cursor.fetchall()}
    return [month for month in months if partition_name(month) not in present]


def months_between(first: date, last: date) -> list[date]:
    """The months from ``first``'s to ``last``'s, both included."""
    month: date | None = date(first.year, first.month, 1)
    months: list[date] = []
    while month is not None and month <= last:
        months.append(month)
        month = _month_after_or_none(month)
    return months


def partitions_ahead(*, today: date, months: int = 3) -> list[str]:
    """This month's partition and those of the next ``months - 1`` months (the beat task)."""
    wanted = [date(today.year, today.month, 1)]
    while len(wanted) < months and (after := _month_after_or_none(wanted[-1])) is not None:
        wanted.append(after)
    return partitions_ensure(wanted)


def partitions_list() -> list[LedgerPartition]:
    """The ledger's partitions, oldest month first and the open partition last."""
    if not is_partitioned():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.reltuples::bigint FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s) "
            "ORDER BY c.relname",
            [TABLE],
        )
        rows = cursor.fetchall()
    found = []
    for name, estimate in rows:
        month = None
        if name != OPEN_PARTITION:
            year, number = name.removeprefix(f"{TABLE}_p").split("_")
            month = date(int(year), int(number), 1)
        found.append(LedgerPartition(name=name, month=month, rows=int(estimate)))
    return sorted(found, key=lambda p: (p.month is None, p.month or date.min))


@contextmanager
def key_table_kept_here(cursor: Any) -> Iterator[None]:
    """Inside a transaction on the partitioned ledger: the statements run in this block write
    the key table's rows themselves, so its insert and update triggers skip them (their
    ``WHEN`` clause reads ``portal.ledger_import``, migration 0022). Every other writer keeps
    the triggers. The setting is transaction-local and is unset again at the block's end."""
    cursor.execute("SELECT set_config('portal.ledger_import', 'on', true)")
    yield
    cursor.execute("SELECT set_config('portal.ledger_import', 'off', true)")


def job_ids_reserve(cursor: Any, count: int) -> list[int]:
    """``count`` new job ids from the ledger's identity sequence, for rows written with COPY
    whose key rows are written beside them."""
    # The sequence's name is looked up once, not for each id.
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [TABLE])
    (sequence,) = cursor.fetchone()
    cursor.execute("SELECT nextval(%s::regclass) FROM generate_series(1, %s)", [sequence, count])
    return [pk for (pk,) in cursor.fetchall()]


def keys_insert(
    cursor: Any,
    rows: Iterable[Mapping[str, Any]],
    text: bytes = b"",
    *,
    during: Callable[[], None] | None = None,
) -> None:
    """The key rows of new jobs (each row holds ``id`` and :data:`KEY_COLUMNS`), and any
    more given as ``COPY`` ``text`` in those columns, in one COPY. A key a concurrent import
    wrote first fails on the unique key, as the ledger's insert would have. ``during`` runs
    while the server reads them (a worker thread sends what was written)."""
    columns = ", ".join(("job_id", *(_quoted(name) for name in KEY_COLUMNS)))
    sql = f"COPY {KEY_TABLE} ({columns}) FROM STDIN"
    with cursor.cursor.copy(sql, writer=QueuedLibpqWriter(cursor.cursor)) as copy:
        rows_copy(copy, list(rows), ("id", *KEY_COLUMNS))
        if text:
            copy.write(text)
        if during is not None:
            during()


def keys_update_from(cursor: Any, changes: str) -> None:
    """Bring the key rows of changed jobs in step with ``changes``, a table of the changed
    ledger rows (``id`` and at least the key table's changing columns), in one ``UPDATE``."""
    assignments = ", ".join(f"{_quoted(name)} = c.{_quoted(name)}" for name in _KEY_CHANGING)
    cursor.execute(
        f"UPDATE {KEY_TABLE} AS k SET {assignments} FROM {changes} AS c "  # noqa: S608
        "WHERE k.job_id = c.id"
    )


def _quoted(column: str) -> str:
    return connection.ops.quote_name(column)


def job_ends_of(pks: Iterable[int]) -> dict[int, datetime | None]:
    """:func:`job_end_of` of many jobs in one read: the jobs the key table holds, with their
    ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT job_id, "end" FROM {KEY_TABLE} WHERE job_id = ANY(%s)',  # noqa: S608
            [list(pks)],
        )
        return dict(cursor.fetchall())


def job_end_of(pk: int) -> tuple[bool, datetime | None]:
    """Whether the key table holds job ``pk``, and its end as the key table keeps it (None:
    still running, or a key row written before migration 0025). One read of the key table's
    primary key: the ledger's partitions are not touched."""
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "end" FROM {KEY_TABLE} WHERE job_id = %s', [pk])  # noqa: S608
        row = cursor.fetchone()
    return (False, None) if row is None else (True, row[0])

"""The jobs ledger partitioned by month on PostgreSQL (accounting/ledger_storage.py): rows in
the partition of their month, the key still unique across partitions, references to jobs still
checked, and the queries users run touching only the partitions they need."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accounting.ledger import selectors
from accounting.ledger.pipeline import jobs_import
from accounting.ledger_storage import (
    KEY_TABLE,
    OPEN_PARTITION,
    is_partitioned,
    month_after,
    month_of,
    partition_name,
    partitions_ahead,
    partitions_ensure,
    partitions_list,
)
from accounting.models import Job
from accounting.tasks import ledger_partitions_ahead
from allocations.models import ProfilingCoefficient
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project
from tests.conftest import needs_real_services
from tests.factories import example_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgresql_only():
    needs_real_services("the partitioned ledger")


@pytest.fixture
def testbed():
    cluster = example_cluster("slurm-testbed")
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    return cluster


def _where() -> dict[int, str]:
    """Each job's partition, by primary key."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, tableoid::regclass::text FROM {Job._meta.db_table}")  # noqa: S608
        return dict(cursor.fetchall())


def _keys() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT job_id, cluster_id, job_id_raw, run, source_hash, charge_state "  # noqa: S608
            f"FROM {KEY_TABLE} ORDER BY job_id"
        )
        return cursor.fetchall()


def _ledger_keys() -> list[tuple]:
    return list(
        Job.objects.order_by("pk").values_list(
            "pk", "cluster_id", "job_id_raw", "run", "source_hash", "charge_state"
        )
    )


def _history(now: datetime, lines: int = 120, running: int = 0) -> list[str]:
    """Eight months of allocations ending before ``now``; the last ``running`` of them printed
    as sacct prints a job still running (RUNNING, End Unknown)."""
    dump = list(
        sacct_lines(
            lines=lines, seed=3, start=now - timedelta(days=240), mean_gap_seconds=2 * 86400,
            now=now, allocations=True,
        )
    )  # fmt: skip
    columns = dump[0].rstrip("\n").split("|")
    state, end = columns.index("State"), columns.index("End")
    for index in range(len(dump) - running, len(dump)):
        fields = dump[index].rstrip("\n").split("|")
        fields[state], fields[end] = "RUNNING", "Unknown"
        dump[index] = "|".join(fields) + "\n"
    return dump


def test_the_ledger_is_partitioned_by_month_with_this_month_and_the_next_two_ready():
    assert is_partitioned()
    names = [p.name for p in partitions_list()]
    this_month = month_of(timezone.now())
    for month in (this_month, month_after(this_month), month_after(month_after(this_month))):
        assert partition_name(month) in names
    assert names[-1] == OPEN_PARTITION


def test_an_import_puts_each_job_in_the_partition_of_the_month_it_ended(testbed):
    now = timezone.now().replace(microsecond=0)
    _, summary = jobs_import(cluster=testbed, lines=_history(now, running=5), source="history")
    assert summary.charged > 50
    assert summary.pending == 5

    where = _where()
    for job in Job.objects.all():
        if job.end is None:
            assert where[job.pk] == OPEN_PARTITION, job.job_id
        else:
            assert where[job.pk] == partition_name(month_of(job.end)), job.job_id
    months = {month_of(end) for end in Job.objects.exclude(end=None).values_list("end", flat=True)}
    assert len(months) >= 8  # the import made the partitions its months lacked
    assert _keys() == _ledger_keys()


def test_a_running_job_that_finishes_moves_to_its_month_and_its_key_follows(testbed):
    now = timezone.now().replace(microsecond=0)
    jobs_import(cluster=testbed, lines=_history(now, running=5), source="while running")
    running = Job.objects.filter(end=None, charge_state=Job.ChargeState.PENDING)
    pks = set(running.values_list("pk", flat=True))
    assert len(pks) == 5
    assert {_where()[pk] for pk in pks} == {OPEN_PARTITION}

    # The next dump shows them finished.
    _, summary = jobs_import(cluster=testbed, lines=_history(now), source="after")
    assert summary.charged == 5

    where = _where()
    for job in Job.objects.filter(pk__in=pks):
        assert job.end is not None
        assert job.charge_state != Job.ChargeState.PENDING
        assert where[job.pk] == partition_name(month_of(job.end))
    assert _keys() == _ledger_keys()


def test_the_key_is_unique_across_partitions(testbed):
    now = timezone.now().replace(microsecond=0)
    jobs_import(cluster=testbed, lines=_history(now, lines=30), source="history")
    job = Job.objects.exclude(end=None).earliest("end")
    twin = Job.objects.get(pk=job.pk)
    twin.pk = None
    twin.end = job.end + timedelta(days=62)  # another month, another partition
    twin.start = job.start
    with pytest.raises(IntegrityError, match="job_unique_run_per_cluster"), transaction.atomic():
        twin.save(force_insert=True)


def test_a_month_written_before_its_partition_existed_moves_out_of_the_open_partition(testbed):
    jobs_import(cluster=testbed, lines=_history(timezone.now(), lines=10), source="x")
    old = datetime(2019, 3, 14, 12, tzinfo=UTC)
    job = Job.objects.exclude(end=None).first()
    assert job is not None
    # Written by the ORM (the admin, a data fix), not the importer: the month has no
    # partition yet, so the row waits in the open partition.
    Job.objects.filter(pk=job.pk).update(start=old - timedelta(hours=1), end=old)
    assert _where()[job.pk] == OPEN_PARTITION

    assert partitions_ensure([date(2019, 3, 1)]) == ["accounting_job_p2019_03"]
    assert _where()[job.pk] == "accounting_job_p2019_03"
    assert partitions_ensure([date(2019, 3, 1)]) == []  # idempotent
    assert _keys() == _ledger_keys()


def test_the_beat_task_keeps_the_coming_months_ready():
    far = date(2031, 5, 20)
    assert partitions_ahead(today=far, months=2) == [
        "accounting_job_p2031_05",
        "accounting_job_p2031_06",
    ]
    assert partitions_ahead(today=far, months=2) == []
    result = ledger_partitions_ahead.apply().get()
    assert result == {"created": []}  # the migration made this month and the next two


def test_a_reference_to_a_job_is_checked_against_the_ledger_key(testbed):
    jobs_import(cluster=testbed, lines=_history(timezone.now(), lines=10), source="x")
    project = Project.objects.get(code="pawsey0001")
    job = Job.objects.first()
    assert job is not None

    def coefficient(job_id: int) -> None:
        ProfilingCoefficient.objects.create(
            cluster=testbed, project=project, job_id=job_id, k_prof=Decimal("1.5"),
            source=ProfilingCoefficient.Source.API,
        )  # fmt: skip
        with connection.cursor() as cursor:  # the check is deferred to the commit
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    with pytest.raises(IntegrityError, match=KEY_TABLE), transaction.atomic():
        coefficient(987654321)  # no such job
    coefficient(job.pk)
    with pytest.raises(IntegrityError, match=KEY_TABLE):
        _delete_past_the_orm(job.pk)


def _delete_past_the_orm(pk: int) -> None:
    """Delete a job with SQL, past the ORM's PROTECT, as a hand-made data fix would."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {Job._meta.db_table} WHERE id = %s", [pk])  # noqa: S608
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_the_job_list_of_a_month_reads_only_that_months_partition(testbed):
    now = timezone.now().replace(microsecond=0)
    jobs_import(cluster=testbed, lines=_history(now, running=3), source="history")
    project = Project.objects.get(code="pawsey0001")
    month = month_of(now - timedelta(days=90))
    jobs = selectors.jobs_of_project(
        project=project,
        filters=selectors.JobFilters(
            ended_from=datetime(month.year, month.month, 1, tzinfo=UTC),
            ended_before=datetime(*month_after(month).timetuple()[:3], tzinfo=UTC),
        ),
    )
    plan = _plan(jobs[:50])
    assert partition_name(month) in plan
    touched = {name for name in _partition_names() if name in plan}
    assert touched == {partition_name(month)}, plan


def _plan(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _partition_names() -> list[str]:
    return [p.name for p in partitions_list()]


def test_the_command_lists_the_partitions_and_makes_those_of_a_range():
    out = StringIO()
    call_command("ledger_partitions", "--from", "2018-11", "--to", "2019-01", "--json", stdout=out)
    body = json.loads(out.getvalue())
    assert body["created"] == [
        "accounting_job_p2018_11",
        "accounting_job_p2018_12",
        "accounting_job_p2019_01",
    ]
    months = [p["month"] for p in body["partitions"]]
    assert months[:3] == ["2018-11", "2018-12", "2019-01"]
    assert months[-1] is None  # the open partition, last

    out = StringIO()
    call_command("ledger_partitions", stdout=out)
    assert "accounting_job_p2018_12      2018-12  not analysed yet" in out.getvalue()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--from", "2019-01"], "give both --from and --to"),
        (["--from", "2019-02", "--to", "2019-01"], "--to is before --from"),
        (["--from", "January", "--to", "2019-01"], "'January' is not a month"),
        (["--from", "1000-01", "--to", "3000-01"], "more than a hundred years"),
    ],
)
def test_the_command_refuses_a_range_it_cannot_mean(arguments, message):
    with pytest.raises(CommandError, match=message):
        call_command("ledger_partitions", *arguments)


@pytest.mark.django_db(transaction=True)
def test_a_new_partition_waits_for_the_batches_in_flight_and_never_deadlocks_with_them():
    """Writers take the partition lock shared before any table lock, so a partition change
    (whose ATTACH locks the open partition, then the tables its foreign keys point at) waits
    for every batch in flight instead of holding half of what a batch needs. `--workers 2`
    deadlocked on exactly that (a batch held a project it created and wanted the open
    partition). Waiting is observed in pg_locks, not assumed after a sleep."""
    import threading

    from django.db import connections

    from accounting.ledger_storage import ledger_write_lock

    month = date(2031, 5, 1)  # no partition yet
    in_batch, release, done = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def batch():
        try:
            with transaction.atomic():
                ledger_write_lock()
                in_batch.set()
                release.wait(timeout=60)
        except BaseException as error:  # reported in the test's thread
            errors.append(error)
        finally:
            connections.close_all()

    def new_month():
        try:
            partitions_ensure([month])
            done.set()
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    writer = threading.Thread(target=batch)
    writer.start()
    assert in_batch.wait(timeout=30)
    creator = threading.Thread(target=new_month)
    creator.start()

    def waiting_for_the_lock() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            )
            return cursor.fetchone()[0] == 1

    deadline = timezone.now() + timedelta(seconds=30)
    while not waiting_for_the_lock():
        assert timezone.now() < deadline, "the partition change never waited for the batch"
        done.wait(timeout=0.05)
    assert not done.is_set()  # it waits for the batch to commit
    release.set()
    writer.join(timeout=30)
    creator.join(timeout=30)
    assert errors == []
    assert done.is_set()
    assert partition_name(month) in {p.name for p in partitions_list()}


@pytest.mark.django_db(transaction=True)
def test_a_partition_made_by_another_process_while_one_waited_is_seen_once_the_lock_is_held():
    """`--workers 2` failed now and then with 'relation accounting_job_pYYYY_MM already exists':
    both processes found a month missing, one made it while the other waited for the lock, and
    the waiting one, looking again with ``to_regclass`` (the catalogue cache, which a backend
    refreshes only when it takes a table lock, and an advisory lock is none), still saw it
    missing and made it again. Here the waiting process is a transaction that looked before
    the other committed; it must see the partition when it looks again."""
    import threading

    from django.db import connections

    from accounting.ledger_storage import _missing

    month = date(2032, 7, 1)  # no partition yet
    seen: list[list[date]] = []
    looked, made, errors = threading.Event(), threading.Event(), []

    def waiting_process():
        try:
            with transaction.atomic():
                seen.append(_missing([month]))  # before the other made it
                looked.set()
                assert made.wait(timeout=30)
                seen.append(_missing([month]))  # after: it is there
        except BaseException as error:  # reported in the test's thread
            errors.append(error)
        finally:
            connections.close_all()

    waiter = threading.Thread(target=waiting_process)
    waiter.start()
    assert looked.wait(timeout=30)
    assert partitions_ensure([month]) == [partition_name(month)]
    made.set()
    waiter.join(timeout=30)
    assert errors == []
    assert seen == [[month], []]

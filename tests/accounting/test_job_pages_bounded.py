"""The job pages read a bounded part of the ledger however many months it holds (issue 33):
the project page's costliest jobs from the budget period's partitions and its SU index, the
jobs API by keyset cursor a few months at a time, a job by id from its own partition (the key
table keeps its end, migration 0025)."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from accounting.ledger import selectors
from accounting.ledger.cursor import JobCursor, cursor_decode, cursor_encode
from accounting.ledger.pipeline import jobs_import
from accounting.ledger_storage import (
    KEY_TABLE,
    OPEN_PARTITION,
    months_between,
    partition_name,
    partitions_ensure,
)
from accounting.models import Job, Partition
from benchmarks.sacct_generator import sacct_lines
from kit.calendar import add_months
from projects.models import Membership, Project
from tests.conftest import needs_real_services
from tests.factories import UserFactory, api_token, example_cluster

pytestmark = pytest.mark.django_db

PARTITION_NAME = re.compile(rf"\b({re.escape(Job._meta.db_table)}_(?:p\d{{4}}_\d\d|open))\b")
_numbers = itertools.count(1)


@pytest.fixture(autouse=True)
def _postgresql_only():
    needs_real_services("the partitioned ledger")


@pytest.fixture
def ledger():
    """Six years of monthly partitions (74, as a backfilled centre's ledger) and a project."""
    cluster = example_cluster("slurm-testbed")
    this_month = timezone.now().date().replace(day=1)
    first = add_months(this_month, -70)
    partitions_ensure(months_between(first, add_months(this_month, 3)))
    project, _ = Project.objects.get_or_create(code="pawsey0001")
    work = Partition.objects.get(cluster=cluster, name="work")
    return {"cluster": cluster, "project": project, "partition": work, "first": first}


def _job(ledger, *, end: datetime | None, service_units: str = "1", project=None) -> Job:
    number = str(next(_numbers))
    return Job.objects.create(
        cluster=ledger["cluster"], job_id_raw=number, job_id=number,
        project=project or ledger["project"], username="carol", partition=ledger["partition"],
        state="COMPLETED" if end else "RUNNING", state_raw="COMPLETED",
        start=(end or timezone.now()) - timedelta(hours=1), end=end, nnodes=1, cpus=4,
        memory_mb=Decimal(1000), gpus=0, nodelist="nid1",
        charge_state=Job.ChargeState.CHARGED if end else Job.ChargeState.PENDING,
        service_units=Decimal(service_units) if end else Decimal(0),
    )  # fmt: skip


def _at(month: date, day: int, hour: int = 0) -> datetime:
    return datetime(month.year, month.month, day, hour, tzinfo=UTC)


def _touched(sql: str, params=None) -> set[str]:
    """The ledger partitions the plan of ``sql`` names."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return set(PARTITION_NAME.findall(plan))


# --- The costliest jobs --------------------------------------------------------------------


def test_the_costliest_jobs_are_the_unbounded_querys_with_ties_in_su_and_end(ledger):
    first = ledger["first"]
    for index in range(240):  # four SU values and shared ends: ties at every rank
        month = add_months(first, index % 30)
        _job(ledger, end=_at(month, 1 + index % 3), service_units=str(10 * (1 + index % 4)))
    _job(ledger, end=None)  # running: no SU yet, never listed
    _job(ledger, end=_at(add_months(first, 5), 9), service_units="0")  # free: never listed
    other, _ = Project.objects.get_or_create(code="pawsey0002")
    _job(ledger, end=_at(add_months(first, 6), 2), service_units="999", project=other)
    every = list(Job.objects.all())
    for since, until, limit in ((0, 30, 10), (5, 17, 10), (6, 7, 25), (12, 13, 3)):
        ended_from = _at(add_months(first, since), 1)
        ended_before = _at(add_months(first, until), 1)
        wanted = sorted(
            (
                job
                for job in every
                if job.project_id == ledger["project"].pk
                and job.end is not None
                and ended_from <= job.end < ended_before
                and job.service_units > 0
            ),
            key=lambda job: (-job.service_units, -job.end.timestamp(), -job.pk),
        )[:limit]
        found = selectors.top_jobs(
            project=ledger["project"], ended_from=ended_from, ended_before=ended_before,
            limit=limit,
        )  # fmt: skip
        assert [job.pk for job in found] == [job.pk for job in wanted], (since, until)


def _ledger_reads(queries) -> list[set[str]]:
    return [touched for query in queries.captured_queries if (touched := _touched(query["sql"]))]


def test_the_costliest_jobs_plans_name_only_the_months_of_the_period(ledger):
    first = ledger["first"]
    for index in range(40):
        _job(ledger, end=_at(add_months(first, index), 3), service_units=str(index + 1))
    since, until = add_months(first, 20), add_months(first, 23)  # three months
    with CaptureQueriesContext(connection) as queries:
        found = selectors.top_jobs(
            project=ledger["project"], ended_from=_at(since, 1), ended_before=_at(until, 1)
        )
    assert [job.service_units for job in found] == [Decimal(23), Decimal(22), Decimal(21)]
    wanted = {partition_name(month) for month in months_between(since, until - timedelta(days=1))}
    # Which jobs: one query naming each month's partition once; then those jobs, by id,
    # from the months they ended in alone.
    ranking, fetch = _ledger_reads(queries)
    assert ranking == wanted
    assert fetch <= wanted


def test_a_cached_view_reads_no_job_and_an_import_has_only_its_months_read_again(ledger):
    first = ledger["first"]
    this_month = timezone.now().date().replace(day=1)
    for index in range(50, 75):
        _job(ledger, end=_at(add_months(first, index), 2), service_units=str(index))
    window = {
        "project": ledger["project"],
        "ended_from": _at(add_months(this_month, -11), 1),
        "ended_before": timezone.now() + timedelta(days=1),
    }
    with CaptureQueriesContext(connection) as cold:
        before = selectors.top_jobs(**window)
    twelve_months = {partition_name(add_months(this_month, -n)) for n in range(12)}
    ranking, fetch = _ledger_reads(cold)
    assert ranking == twelve_months
    assert fetch <= twelve_months
    with CaptureQueriesContext(connection) as warm:
        assert selectors.top_jobs(**window) == before
    assert _ledger_reads(warm) == []  # the roll-ups only

    for code in ("pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    now = timezone.now()
    dump = sacct_lines(
        lines=200, seed=8, start=now - timedelta(days=3), mean_gap_seconds=1200, now=now,
        allocations=True,
    )  # fmt: skip
    jobs_import(cluster=ledger["cluster"], lines=dump, source="an import")
    imported_months = {
        end.astimezone(UTC).date().replace(day=1)
        for end in Job.objects.filter(
            project=ledger["project"], import_run__isnull=False
        ).values_list("end", flat=True)
        if end is not None
    }
    with CaptureQueriesContext(connection) as after_import:
        after = selectors.top_jobs(**window)
    reads = _ledger_reads(after_import)
    assert reads  # the import's months are read again, and only they
    assert set().union(*reads) <= {partition_name(month) for month in imported_months}
    # what a view with nothing cached finds
    cache.clear()
    assert after == selectors.top_jobs(**window)


# --- A job by id ---------------------------------------------------------------------------


def _key_end(pk: int):
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "end" FROM {KEY_TABLE} WHERE job_id = %s', [pk])  # noqa: S608
        return cursor.fetchone()[0]


def test_a_job_is_read_from_its_own_partition_only(ledger):
    month = add_months(ledger["first"], 33)
    job = _job(ledger, end=_at(month, 14, 6))
    running = _job(ledger, end=None)
    projects = Project.objects.filter(pk=ledger["project"].pk)
    for wanted, partition in ((job, partition_name(month)), (running, OPEN_PARTITION)):
        with CaptureQueriesContext(connection) as queries:
            found = selectors.job_get(pk=wanted.pk, projects=projects)
        assert found is not None
        assert found.pk == wanted.pk
        ledger_reads = [q["sql"] for q in queries.captured_queries if _touched(q["sql"])]
        assert [_touched(sql) for sql in ledger_reads] == [{partition}]
    assert selectors.job_get(pk=job.pk, projects=Project.objects.none()) is None
    assert selectors.job_get(pk=10**15, projects=projects) is None


def test_jobs_by_id_are_read_from_their_partitions_only(ledger):
    months = [add_months(ledger["first"], n) for n in (3, 40, 41)]
    jobs = [_job(ledger, end=_at(month, 9)) for month in months] + [_job(ledger, end=None)]
    _job(ledger, end=_at(add_months(ledger["first"], 50), 9))  # not asked for
    with CaptureQueriesContext(connection) as queries:
        found = selectors.jobs_by_id(pks=[job.pk for job in jobs] + [10**15])
    assert set(found) == {job.pk for job in jobs}
    ledger_reads = [q["sql"] for q in queries.captured_queries if _touched(q["sql"])]
    assert [_touched(sql) for sql in ledger_reads] == [
        {partition_name(month) for month in months} | {OPEN_PARTITION}
    ]


def test_a_job_is_found_when_it_ended_between_the_two_reads(ledger):
    running = _job(ledger, end=None)
    assert _key_end(running.pk) is None
    ended = timezone.now().replace(microsecond=0)
    with connection.cursor() as cursor:  # the ledger moved on; the key row has not yet
        cursor.execute("SELECT set_config('portal.ledger_import', 'on', true)")
        table = Job._meta.db_table
        cursor.execute(f'UPDATE {table} SET "end" = %s WHERE id = %s', [ended, running.pk])  # noqa: S608
        cursor.execute("SELECT set_config('portal.ledger_import', 'off', true)")
    found = selectors.job_get(pk=running.pk, projects=Project.objects.all())
    assert found is not None
    assert found.end == ended


def test_the_key_table_keeps_each_jobs_end_for_every_writer(ledger):
    job = _job(ledger, end=None)
    assert _key_end(job.pk) is None
    job.end = timezone.now()
    job.save()
    assert _key_end(job.pk) == job.end

    # The import writes its own key rows (insert and update): the end goes with them.
    now = timezone.now().replace(microsecond=0)
    dump = list(
        sacct_lines(
            lines=40, seed=5, start=now - timedelta(days=90), mean_gap_seconds=86400, now=now,
            allocations=True,
        )
    )  # fmt: skip
    for code in ("pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    jobs_import(cluster=ledger["cluster"], lines=dump, source="key ends")
    imported = Job.objects.filter(import_run__isnull=False)
    assert imported.count() > 20
    for pk, end in imported.values_list("pk", "end"):
        assert _key_end(pk) == end


# --- The jobs API by cursor ----------------------------------------------------------------


@pytest.fixture
def member_client(ledger):
    user = UserFactory(username="carol")
    Membership.objects.create(project=ledger["project"], user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user)}")
    return client


def _walk(client, url: str, between=None) -> list[dict]:
    seen: list[dict] = []
    while url:
        body = client.get(url).json()
        seen += body["results"]
        url = body["next"]
        if between is not None:
            between()
    return seen


def _keyset_order(rows: list[dict]) -> list[tuple]:
    """Each row's place in the keyset order, largest first: running, then the newest end."""
    return [
        (row["end"] is None, datetime.fromisoformat(row["end"] or "0001-01-01T00:00Z"), row["id"])
        for row in rows
    ]


def test_walking_the_pages_by_cursor_gives_each_job_once_in_order_while_jobs_arrive(
    ledger, member_client
):
    first = ledger["first"]
    for index in range(90):  # two years and a half of months, shared ends, some running
        _job(ledger, end=_at(add_months(first, 40 + index % 30), 1 + index % 2))
    for _ in range(4):
        _job(ledger, end=None)
    before = set(Job.objects.values_list("pk", flat=True))
    arrivals = itertools.count()

    def new_jobs_arrive():
        step = next(arrivals)
        _job(ledger, end=None)  # newer than any cursor: not on a later page
        _job(ledger, end=timezone.now())
        _job(ledger, end=_at(add_months(first, step % 70), 4))  # a backfill: may be ahead

    rows = _walk(member_client, "/api/v1/jobs/?project=pawsey0001&page_size=7", new_jobs_arrive)
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids))  # nobody twice
    assert before <= set(ids)  # everybody there at the start
    running = [row for row in rows if row["end"] is None]
    assert rows[: len(running)] == running  # running jobs first, then newest end first
    order = _keyset_order(rows)
    assert order == sorted(order, reverse=True)


def test_the_walk_is_the_same_on_the_ledger_of_one_month(ledger, member_client):
    month = add_months(ledger["first"], 50)
    for index in range(25):
        _job(ledger, end=_at(month, 1 + index % 5))
    rows = _walk(member_client, "/api/v1/jobs/?page_size=4")
    wanted = list(Job.objects.order_by(*selectors.KEYSET_ORDER).values_list("pk", flat=True))
    assert [row["id"] for row in rows] == wanted


def test_each_query_of_a_page_plans_a_few_partitions_of_the_74(ledger, member_client):
    first = ledger["first"]
    for index in range(0, 72, 3):
        _job(ledger, end=_at(add_months(first, index), 2))
    url = "/api/v1/jobs/?project=pawsey0001&page_size=5"
    while url:
        with CaptureQueriesContext(connection) as queries:
            body = member_client.get(url).json()
        for query in queries.captured_queries:
            if Job._meta.db_table in query["sql"]:
                assert len(_touched(query["sql"])) <= 17, query["sql"]  # 16 months and open
        url = body["next"]


def test_the_count_is_exact_where_the_filters_bound_it_and_null_elsewhere(ledger, member_client):
    month = add_months(ledger["first"], 60)
    for index in range(30):
        _job(ledger, end=_at(month, 1 + index % 20))
    body = member_client.get("/api/v1/jobs/?project=pawsey0001&page_size=10").json()
    assert body["count"] is None
    assert body["next"]
    since, until = _at(month, 1).isoformat(), _at(add_months(month, 1), 1).isoformat()
    bounded = member_client.get(
        "/api/v1/jobs/", {"project": "pawsey0001", "start": since, "end": until, "page_size": 10}
    ).json()
    assert bounded["count"] == 30
    whole = member_client.get("/api/v1/jobs/?project=pawsey0001&page_size=100").json()
    assert whole["count"] == 30  # one page holds them all
    assert whole["next"] is None


@pytest.mark.parametrize(
    "cursor", ["x", "", "bm90IGEgY3Vyc29y", cursor_encode(JobCursor(end=None, pk=1))[:-2] + "!!"]
)
def test_a_cursor_the_api_did_not_write_is_a_400_saying_so(member_client, cursor):
    response = member_client.get("/api/v1/jobs/", {"cursor": cursor})
    assert response.status_code == 400
    body = response.json()
    assert list(body["errors"]) == ["cursor"]
    assert "start again without it" in body["message"]


def test_a_cursor_reads_back_what_it_holds():
    for end in (None, datetime(2026, 3, 1, 12, 30, 0, 123456, tzinfo=UTC)):
        cursor = JobCursor(end=end, pk=42)
        assert cursor_decode(cursor_encode(cursor)) == cursor

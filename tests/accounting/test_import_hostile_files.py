"""Whole files of valid generated sacct lines salted with hostile ones, through the importer's
real entry point (``sacct_stream_import``: what ``import_sacct FILE`` and uploads run) on
PostgreSQL with the COPY path. Whatever the file holds: no exception, every line in exactly
one bucket, every quarantined line kept with its reason, and the ledger's balance identity
(per project, the jobs' service units equal their daily roll-ups), and no utilisation above
100 % that is not flagged as over-committed."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models import Max, Min, Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger.pipeline import BUCKETS
from accounting.ledger.sources import sacct_stream_import
from accounting.models import Cluster, Job, QuarantinedRecord, UsageDaily
from accounting.utilisation.selectors import utilisation_series_get
from benchmarks.sacct_generator import USERS, sacct_lines
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"

pytestmark = pytest.mark.django_db

HEADER, *VALID = (line.rstrip("\n") for line in sacct_lines(lines=300, seed=7, usage=True))
COLUMNS = HEADER.split("|")
TIME_COLUMNS = [COLUMNS.index(name) for name in ("Submit", "Start", "End")]
HOSTILE_TIMES = [
    "9999-12-31T23:59:59", "9999-12-31T00:00:00", "10000-01-01T00:00:00", "2999-01-01T00:00:00",
    "0001-01-01T00:00:00", "1969-12-31T23:59:59", "2026-13-01T00:00:00",
]  # fmt: skip
HUGE = ["9" * 30, str(2**63), str(2**64 - 2), "4294967294", "-1", "1e400", "NaN"]
ODD_TEXT = [
    "", " ", "\t", "\x00", "a\x00b", "\u2028", "\ufeff", "x" * 65, "y" * 300, "é" * 70, "\ud800",
]  # fmt: skip


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    """One line spoiled in one of the ways real and crafted files are."""
    fields = draw(st.sampled_from(VALID)).split("|")
    kind = draw(
        st.sampled_from(["long", "time", "huge", "odd", "delimiters", "bytes", "lone_cr", "blank"])
    )
    at = draw(st.integers(0, len(fields) - 1))
    if kind == "long":
        fields[at] = draw(st.sampled_from(["9", "x", "ä"])) * draw(st.integers(65, 400))
    elif kind == "time":
        fields[draw(st.sampled_from(TIME_COLUMNS))] = draw(st.sampled_from(HOSTILE_TIMES))
    elif kind == "huge":
        fields[at] = draw(st.sampled_from(HUGE))
    elif kind == "odd":
        fields[at] = draw(st.sampled_from(ODD_TEXT))
    elif kind == "delimiters":
        if draw(st.booleans()):
            fields.insert(at, draw(st.sampled_from(["", "x"])))
        else:
            del fields[at]
    elif kind == "blank":
        return draw(st.sampled_from([b"", b"   ", b"\t"]))
    text = "|".join(fields)
    data = text.encode("utf-8", "surrogatepass")
    if kind == "bytes":
        cut = draw(st.integers(0, len(data)))
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xfe\xff"]))
        data = data[:cut] + junk + data[cut:]
    elif kind == "lone_cr":
        cut = draw(st.integers(0, len(data)))
        data = data[:cut] + b"\r" + data[cut:]
    return data


@st.composite
def salted_files(draw: st.DrawFn) -> bytes:
    valid = draw(st.lists(st.sampled_from(VALID), min_size=1, max_size=40))
    lines = [line.encode() for line in valid]
    for _ in range(draw(st.integers(1, 8))):
        lines.insert(draw(st.integers(0, len(lines))), draw(hostile_lines()))
    ending = draw(st.sampled_from([b"\n", b"\r\n"]))
    tail = draw(st.sampled_from([b"", ending]))
    return ending.join([HEADER.encode(), *lines]) + tail


def _lines_read(data: bytes) -> int:
    """The data lines a reader of the file sees: what the summary must account for."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline="")
    return sum(1 for _ in text) - 1


@pytest.fixture
def cluster():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in sorted({account for accounts in USERS.values() for account in accounts}):
        Project.objects.create(code=code, title=f"Project {code}")
    return Cluster.objects.get(name="slurm-testbed")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=salted_files())
def test_a_salted_file_never_crashes_and_every_line_lands_in_one_bucket(cluster, data):
    run, summary = sacct_stream_import(io.BytesIO(data), cluster=cluster, source="hostile")

    assert run.status == "succeeded", run.error
    assert summary.lines == _lines_read(data)
    assert sum(getattr(summary, name) for name in BUCKETS) == summary.lines
    kept = QuarantinedRecord.objects.filter(import_run=run)
    assert not kept.filter(reason="").exists()
    if summary.quarantined:
        assert QuarantinedRecord.objects.filter(cluster=cluster, resolved_at__isnull=True).exists()
    jobs = dict(
        Job.objects.values("project__code")
        .annotate(total=Sum("service_units"))
        .values_list("project__code", "total")
    )
    rollups = dict(
        UsageDaily.objects.values("project__code")
        .annotate(total=Sum("service_units"))
        .values_list("project__code", "total")
    )
    assert {code: total for code, total in jobs.items() if total} == {
        code: total for code, total in rollups.items() if total
    }
    _utilisation_at_most_full_unless_flagged(cluster)


def _utilisation_at_most_full_unless_flagged(cluster: Cluster) -> None:
    """What a user checks on the utilisation page: over the booked jobs' months, no figure
    above 100 % unless its window is flagged as over-committed (a file can claim jobs that
    overlap on a node; the page must say so, never plot it silently)."""
    span = Job.objects.filter(cluster=cluster, start__isnull=False, end__isnull=False).aggregate(
        first=Min("start"), last=Max("end")
    )
    if span["first"] is None:
        return
    zone = cluster.zoneinfo
    first = span["first"].astimezone(zone).replace(minute=0, second=0, microsecond=0)
    last = span["last"].astimezone(zone).replace(minute=0, second=0, microsecond=0)
    windows = utilisation_series_get(
        cluster=cluster, start=first, end=last + timedelta(hours=1), step="month"
    )
    read = 0
    for window in windows:
        for figures in (window.total, *window.partitions.values()):
            if figures.overcommitted:
                continue
            for percent in (figures.q_percent, figures.core_percent, figures.gpu_percent):
                assert percent is None or percent <= 100, (window.start, percent)
                read += percent is not None
    assert read, "no utilisation figure to check"

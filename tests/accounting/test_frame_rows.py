"""The pieces of the import's frame of new rows (accounting.ledger.frame_rows and
rollups.rollups_add_frame) against the per-row rules they stand in for, and the import's
first pass taking its new lines through the frame (docs/importing.md, "Columns end to end").
Whole imports both ways, every column compared, are in test_columnar.py."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.carbon import footprint
from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger import frame_rows
from accounting.ledger.pipeline import jobs_import
from accounting.ledger.rollups import _day_of, _half_even_quotient, local_day_numbers
from accounting.models import Cluster, Job
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ZONES = [
    "UTC", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe", "America/St_Johns",
    "Pacific/Chatham", "Australia/Perth",
]  # fmt: skip
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(
    ends=st.lists(st.integers(86_400, 2_208_988_800), min_size=1, max_size=40),
    zone=st.sampled_from(ZONES),
)
def test_the_local_day_of_each_end_is_the_per_row_rule(ends, zone):
    tz = ZoneInfo(zone)
    days = local_day_numbers(pl.Series(ends, dtype=pl.Int64), tz).to_list()
    expected = [(_day_of(EPOCH + timedelta(seconds=end), tz) - EPOCH.date()).days for end in ends]
    assert days == expected


@pytest.mark.parametrize("zone", ZONES)
def test_the_local_day_around_every_offset_change_of_a_year(zone):
    """Each second either side of midnight and of every change of the zone's offset in 2026."""
    tz = ZoneInfo(zone)
    ends: list[int] = []
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    while moment.year == 2026:
        later = moment + timedelta(minutes=15)
        if moment.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            at = int(later.timestamp())
            ends += range(at - 1800, at + 1800, 299)
        moment = later
    for day in range(0, 365, 7):
        midnight = datetime(2026, 1, 1, tzinfo=tz) + timedelta(days=day)
        at = int(midnight.timestamp())
        ends += [at - 1, at, at + 1]
    days = local_day_numbers(pl.Series(ends, dtype=pl.Int64), tz).to_list()
    expected = [(_day_of(EPOCH + timedelta(seconds=end), tz) - EPOCH.date()).days for end in ends]
    assert days == expected


@settings(max_examples=500, deadline=None)
@given(joules=st.integers(1, 10**18 - 1))
def test_measured_energy_in_columns_is_footprints_rule(joules):
    frame = pl.DataFrame({"j": [joules]}, schema={"j": pl.Int128})
    (quanta,) = frame.select(_half_even_quotient(pl.col("j") * 10**6, 3600)).to_series().to_list()
    assert footprint.measured_energy_wh(joules).scaleb(6) == quanta


def test_copy_text_escapes_what_copy_reads_specially():
    frame = pl.DataFrame({"a": ["back\\slash", "tab\there", "cr\rlf\n", None]})
    text = frame_rows.copy_text(frame.select(frame_rows._escaped(pl.col("a"))))
    assert text == b"back\\\\slash\ntab\\there\ncr\\rlf\\n\n\\N\n"


@pytest.fixture
def testbed(db):
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003"):
        Project.objects.create(code=code, title=f"Project {code}")
    return Cluster.objects.get(name="slurm-testbed")


def test_a_first_import_writes_its_new_lines_through_the_frame(testbed, monkeypatch):
    """The generated month's new finished jobs are priced, copied and rolled up as one frame
    per batch; the lines it leaves (unknown account, a cost model...) take the other paths."""
    if connection.vendor != "postgresql":
        pytest.skip("the frame is written with PostgreSQL's COPY")
    taken: list[int] = []
    priced = frame_rows.new_rows_priced

    def counting(pricer, lines, **kwargs):
        rows = priced(pricer, lines, **kwargs)
        taken.append(rows.frame.height)
        return rows

    monkeypatch.setattr(frame_rows, "new_rows_priced", counting)
    text = "".join(sacct_lines(lines=3000, seed=5, allocations=True))
    _, summary = jobs_import(cluster=testbed, lines=io.StringIO(text), source="t")
    assert sum(taken) > 0.7 * 3000
    assert summary.charged == Job.objects.count()
    # A second pass finds every line booked as read: nothing is priced into a frame.
    taken.clear()
    _, again = jobs_import(cluster=testbed, lines=io.StringIO(text), source="t")
    assert sum(taken) == 0
    assert again.charged == again.updated == 0

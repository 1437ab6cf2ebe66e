"""``sacct --json`` records priced per shape (``columnar.fast_records``) book exactly what the
per-line path books: every column of every ledger row, every roll-up and every bucket, on the
real JSON files of several Slurm versions, on a generated month, and on generated jobs salted
with awkward values (hypothesis). docs/importing.md, "Columnar pricing"."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.ledger import columnar
from accounting.ledger.pipeline import jobs_import
from accounting.ledger.sacct import SacctRecord
from accounting.ledger.sacct_json import parse_sacct_json
from accounting.models import Cluster
from benchmarks.sacct_generator import sacct_lines, write_sacct_json
from projects.models import Project
from tests.accounting.test_columnar import ACCOUNTS, SPEC, _clear, _state

ROOT = Path(__file__).resolve().parents[2]
REAL_JSON = [
    ROOT / "examples" / "sacct" / "sacct.json",
    *sorted((ROOT / "tests" / "data" / "sacct_versions").glob("*.json")),
    *sorted((ROOT / "tests" / "data" / "efficiency").glob("sacct_usage*.json")),
    *sorted((ROOT.parent / "shared" / "data" / "sacct").glob("sacct.json")),
]

pytestmark = pytest.mark.django_db


@pytest.fixture
def testbed():
    cluster_apply(definition=cluster_definition_load(SPEC))
    for code in ACCOUNTS[:3]:  # pawsey0004 stays unknown: its jobs are quarantined
        Project.objects.create(code=code, title=f"Project {code}")
    return Cluster.objects.get(name="slurm-testbed")


def _both_ways(cluster, payload: bytes):
    """Import ``payload`` per line, then (on an empty ledger) per shape; return both."""
    _, by_line = jobs_import(
        cluster=cluster, json_stream=io.BytesIO(payload), source="t", columnar_pricing=False
    )
    per_line = _state()
    _clear()
    _, by_shape = jobs_import(cluster=cluster, json_stream=io.BytesIO(payload), source="t")
    return (by_line, per_line), (by_shape, _state())


def _fast_records(cluster, payload: bytes) -> int:
    items = parse_sacct_json(
        io.BytesIO(payload),
        tz=cluster.zoneinfo,
        cluster=cluster.slurm_name,
        steps=False,
        reader=columnar.read_entries,
    )
    return sum(isinstance(item, columnar.FastLine) for item in items)


def _generated(tmp_path: Path, cluster, *, lines: int, seed: int) -> dict[str, Any]:
    psv = tmp_path / f"generated-{seed}.psv"
    psv.write_text("".join(sacct_lines(lines=lines, seed=seed, allocations=True)))
    out = write_sacct_json(psv, tmp_path / f"generated-{seed}.json", cluster=cluster.slurm_name)
    return json.loads(out.read_text())


@pytest.mark.parametrize("path", REAL_JSON, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_json_books_the_same_rows_per_shape_as_line_by_line(testbed, path):
    payload = path.read_bytes()
    per_line, by_shape = _both_ways(testbed, payload)
    assert by_shape == per_line


def test_a_generated_month_in_json_books_the_same_and_most_records_take_the_fast_path(
    testbed, tmp_path
):
    Project.objects.create(code="pawsey0004", title="p4")
    payload = json.dumps(_generated(tmp_path, testbed, lines=1500, seed=7)).encode()
    per_line, by_shape = _both_ways(testbed, payload)
    assert by_shape == per_line
    assert per_line[0].charged > 1100
    assert _fast_records(testbed, payload) > 0.9 * 1500


def _set(path: tuple[str, ...], value: Any):
    def apply(job: dict[str, Any]) -> None:
        target = job
        for name in path[:-1]:
            target = target[name]
        target[path[-1]] = value

    return apply


NO_VAL = {"set": False, "infinite": False, "number": 4294967294}
# Each must leave the fast path or give the same row.
AWKWARD_JSON = [
    _set(("name",), "n" * 257),
    _set(("name",), "a\u0000b"),  # read without the NUL, with a warning
    _set(("name",), "x\ud800y"),  # a lone surrogate: left out, with a warning
    _set(("tres", "requested"), [{"type": "cpu", "name": "", "id": 1, "count": -5}]),
    _set(("qos",), "q" * 65),
    _set(("user",), "u" * 65),
    _set(("account",), "pawsey0004"),
    _set(("account",), "nobody"),
    _set(("account",), ""),
    _set(("partition",), "nope"),
    _set(("partition",), "gpu"),
    _set(("state", "current"), ["RUNNING"]),
    _set(("state", "current"), ["REQUEUED"]),
    _set(("state", "current"), ["NODE_FAIL"]),
    _set(("state", "current"), ["PENDING"]),
    _set(("time", "start"), NO_VAL),
    _set(("time", "end"), NO_VAL),
    _set(("time", "elapsed"), 99999999999999999999),
    _set(("time", "elapsed"), 0),
    _set(("time", "limit"), {"set": True, "infinite": True, "number": 0}),
    _set(("allocation_nodes",), 0),
    _set(("allocation_nodes",), 2000000000),
    _set(("nodes",), "None assigned"),
    _set(("nodes",), "nid[1001-1002]"),
    _set(("array", "task_id"), {"set": True, "infinite": False, "number": 4}),
    _set(("tres", "allocated"), []),
    _set(("tres", "allocated"), [{"type": "cpu", "name": "", "id": 1, "count": 10**30}]),
]


@st.composite
def salted_json(draw):
    seed = draw(st.integers(0, 10**6))
    jobs = [json.loads(line.rstrip(",\n")) for line in _generated_lines(seed)]
    picker = random.Random(draw(st.integers(0, 10**6)))
    for _ in range(draw(st.integers(0, 12))):
        job = picker.choice(jobs)
        draw(st.sampled_from(AWKWARD_JSON))(job)
    if draw(st.booleans()):  # a repeated job id
        jobs.append(json.loads(json.dumps(picker.choice(jobs))))
    return json.dumps({"meta": {"plugin": {"data_parser": "v0.0.40"}}, "errors": [], "jobs": jobs})


_GENERATED: dict[int, list[str]] = {}


def _generated_lines(seed: int) -> list[str]:
    """The job objects of a generated 30-line file, one per line (write_sacct_json's layout)."""
    import tempfile

    if seed not in _GENERATED:
        with tempfile.TemporaryDirectory() as scratch:
            psv = Path(scratch) / "g.psv"
            psv.write_text("".join(sacct_lines(lines=30, seed=seed, allocations=True)))
            text = write_sacct_json(psv, Path(scratch) / "g.json", cluster="setonix")
            _GENERATED[seed] = [
                line for line in text.read_text().splitlines() if line.startswith('{"cluster"')
            ]
    return _GENERATED[seed]


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(payload=salted_json(), zone=st.sampled_from(["UTC", "Europe/Berlin", "Australia/Perth"]))
def test_salted_json_books_the_same_rows_per_shape_as_line_by_line(testbed, payload, zone):
    testbed.timezone = zone  # JSON times are UTC whatever the cluster's zone
    testbed.save(update_fields=["timezone"])
    _clear()
    per_line, by_shape = _both_ways(testbed, payload.encode())
    assert by_shape == per_line
    assert _fast_records(testbed, payload.encode()) > 0  # the fast path was taken


def test_a_record_with_a_warning_stays_on_the_per_line_path(testbed, tmp_path):
    jobs = _generated(tmp_path, testbed, lines=3, seed=5)["jobs"]
    jobs[0]["name"] = "a\u0000b"  # read without the NUL, with a warning
    payload = json.dumps({"meta": {}, "errors": [], "jobs": jobs}).encode()
    items = list(
        parse_sacct_json(
            io.BytesIO(payload),
            tz=testbed.zoneinfo,
            cluster=testbed.slurm_name,
            steps=False,
            reader=columnar.read_entries,
        )
    )
    records = [item for item in items if isinstance(item, (SacctRecord, columnar.FastLine))]
    assert isinstance(records[0], SacctRecord)
    assert all(isinstance(item, columnar.FastLine) for item in records[1:])
    assert records[1].parsed().job_id_raw == records[1].job_id_raw

"""A page of the jobs API computes each job shape's per-node fractions once per process: the
answer is what the job's own model gives, for every value it is computed from, and each row
gets copies of its own."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from accounting.ledger.selectors import (
    JOB_FRACTION_COLUMNS,
    _node_fractions,
    job_node_fractions_of_row,
)
from accounting.models import PartitionVersion
from tests.factories import PartitionVersionFactory

pytestmark = pytest.mark.django_db


def _row(version: PartitionVersion, **shape: Any) -> dict[str, Any]:
    """A job of ``version`` as the jobs API reads it (``values(*JOB_FRACTION_COLUMNS)``)."""
    row: dict[str, Any] = {
        "nnodes": 2, "cpus": 64, "memory_mb": Decimal(120000), "gpus": 0,
        "nodelist": "nid[1001-1002]", "start": datetime(2026, 11, 1, tzinfo=UTC),
        "partition_version_id": version.pk, "partition__name": version.partition.name,
    }  # fmt: skip
    for column in JOB_FRACTION_COLUMNS:
        if column.startswith("partition_version__"):
            row[column] = getattr(version, column.removeprefix("partition_version__"))
    row.update(shape)
    assert set(row) == set(JOB_FRACTION_COLUMNS)
    return row


def _expected(version: PartitionVersion, row: dict[str, Any]) -> list[dict[str, str]]:
    return _node_fractions(
        version, nnodes=row["nnodes"], cpus=row["cpus"], memory_mb=row["memory_mb"],
        gpus=row["gpus"], ran=bool(row["nodelist"]) and row["start"] is not None,
    )  # fmt: skip


@pytest.mark.parametrize(
    "shape",
    [{}, {"nnodes": 1, "cpus": 3}, {"memory_mb": Decimal(245000)}, {"nodelist": ""},
     {"start": None}, {"nnodes": 0}],
)  # fmt: skip
def test_a_row_s_fractions_are_its_model_s(shape):
    version = PartitionVersionFactory.create(node_local={"nvme_gb": "3500"})
    row = _row(version, **shape)
    assert job_node_fractions_of_row(row) == _expected(version, row)
    assert job_node_fractions_of_row(row) == _expected(version, row)  # from the kept answer


def test_a_version_with_other_node_local_resources_is_another_answer():
    small = PartitionVersionFactory.create(node_local={"nvme_gb": "3500"})
    large = PartitionVersionFactory.create(
        partition=small.partition, number=2, node_local={"scratch_gb": "35"},
        effective_from=datetime(2026, 6, 1, tzinfo=UTC),
    )  # fmt: skip
    # Everything else alike, and the version's id left out of the comparison's way: only the
    # node-local resources tell the two apart.
    rows = [_row(version, nnodes=1, cpus=1) for version in (small, large)]
    rows[1]["partition_version_id"] = rows[0]["partition_version_id"]
    answers = [job_node_fractions_of_row(row) for row in rows]
    assert answers == [_expected(small, rows[0]), _expected(large, rows[1])]
    assert answers[0] != answers[1]


def test_each_row_gets_copies_of_its_own():
    version = PartitionVersionFactory.create()
    row = _row(version)
    first = job_node_fractions_of_row(row)
    first[0]["cores"] = "changed"
    first.append({"nodes": "9"})
    assert job_node_fractions_of_row(row) == _expected(version, row)

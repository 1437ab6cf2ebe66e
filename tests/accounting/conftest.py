"""Fixtures shared by the accounting tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.models import Cluster
from projects.models import Project

TESTBED_SPEC = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "slurm-testbed.json"


@pytest.fixture
def testbed():
    """The testbed cluster of examples/clusters with four projects, pawsey0001 to pawsey0004
    (a test module's own ``testbed`` fixture, where it has one, takes its place)."""
    cluster_apply(definition=cluster_definition_load(TESTBED_SPEC))
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.create(code=code, title=code)
    return Cluster.objects.get(name="slurm-testbed")

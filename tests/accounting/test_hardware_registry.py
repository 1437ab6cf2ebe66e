"""One registry of partition hardware (accounting/clusters/hardware.py): every place that names
a partition's hardware takes the names from it, so adding a figure is one entry (plus the
model column and its migration) and cannot be forgotten in one layer."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from django.db import models

from accounting.admin import PartitionVersionForm
from accounting.clusters import charging, specs
from accounting.clusters.hardware import HARDWARE, HARDWARE_NAMES
from accounting.clusters.serializers import PartitionSpecSerializer
from accounting.clusters.services import _version_fields
from accounting.clusters.specs import cluster_definition_load
from accounting.models import PartitionVersion

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"


def test_every_registry_entry_is_a_column_of_a_rate_version_and_a_field_of_the_engines_spec():
    columns = {field.name: field for field in PartitionVersion._meta.concrete_fields}
    engine = set(charging.PartitionSpec.__dataclass_fields__)
    for entry in HARDWARE:
        assert entry.name in columns, f"PartitionVersion has no column {entry.name}"
        expected = models.IntegerField if entry.kind == "int" else models.DecimalField
        assert isinstance(columns[entry.name], expected)
        assert entry.name in engine


def test_spec_files_the_api_and_the_admin_take_every_registry_entry():
    assert set(HARDWARE_NAMES) <= specs._PARTITION_KEYS
    assert set(HARDWARE_NAMES) <= set(PartitionSpecSerializer().fields)
    assert set(HARDWARE_NAMES) <= set(PartitionVersionForm._meta.fields or ())


def test_the_apis_bounds_are_the_registrys():
    fields = PartitionSpecSerializer().fields
    for entry in HARDWARE:
        field = fields[entry.name]
        assert field.min_value == entry.minimum
        assert field.max_value == entry.maximum
        assert field.required == (entry.required and entry.default is None)


@pytest.mark.parametrize("name", ["slurm-testbed", "setonix", "paper-test-system"])
def test_a_spec_file_reaches_the_rate_version_and_back_unchanged(name, db):
    definition = cluster_definition_load(EXAMPLES / f"{name}.json")
    for partition in definition.partitions:
        copied = _version_fields(partition)
        assert {n: copied[n] for n in HARDWARE_NAMES} == {
            n: getattr(partition.charging, n) for n in HARDWARE_NAMES
        }
        version = PartitionVersion(**{n: copied[n] for n in HARDWARE_NAMES}, node_local={})
        version.partition = _partition_named(partition.name)
        spec = version.spec
        for n in HARDWARE_NAMES:
            assert getattr(spec, n) == getattr(partition.charging, n)


def test_a_node_local_resource_is_data_and_enters_the_max_of_eq_1():
    """NVMe needs no registry entry: a capacity in node_local, and a job's use of it is one
    more share in max() (IV-E)."""
    spec = charging.PartitionSpec(
        name="nvme", sockets=2, cores_per_socket=64, memory_mb=256_000,
        cpu_tdp_watts=Decimal(280), node_local={"nvme_gb": Decimal(3500)},
    )  # fmt: skip
    usage = charging.split_evenly(
        nodes=1, cores=1, memory_mb=0, node_local={"nvme_gb": Decimal(1750)}
    )
    charge = charging.charge(spec, usage, elapsed_seconds=3600)
    assert charge.dominant_resource == "nvme_gb"
    assert charge.service_units == Decimal(64)  # half the node's NVMe: half of w = 128


def _partition_named(name):
    from accounting.models import Partition

    return Partition(name=name)

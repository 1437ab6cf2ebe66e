"""Cluster spec files: the shipped ones load, a bad one names file, partition and field."""

import json
from decimal import Decimal
from pathlib import Path

import pytest

from accounting.clusters.specs import (
    SpecFileError,
    cluster_definition_load,
    cluster_definition_parse,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"


def _setonix():
    return json.loads((EXAMPLES / "setonix.json").read_text())


@pytest.mark.parametrize("name", ["paper-test-system", "setonix", "slurm-testbed"])
def test_every_shipped_spec_file_loads(name):
    definition = cluster_definition_load(EXAMPLES / f"{name}.json")
    assert definition.name == name
    assert definition.partitions


def test_setonix_node_counts_come_from_the_hostlists():
    counts = {
        p.name: p.node_count for p in cluster_definition_load(EXAMPLES / "setonix.json").partitions
    }
    assert counts == {"work": 1592, "highmem": 8, "gpu": 154}


def test_peak_parameters_are_read():
    gpu = cluster_definition_load(EXAMPLES / "setonix.json").partitions[2]
    assert gpu.cpu_peak is not None
    assert gpu.cpu_peak.n_unit == 16
    assert gpu.charging.gpu_peak_flops == Decimal("23950000000000")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cores_per_socket", 0, "field 'cores_per_socket': must be at least 1"),
        ("cores_per_socket", -4, "field 'cores_per_socket': must be at least 1"),
        ("memory_mb", "lots", "field 'memory_mb': must be a whole number"),
        # json.loads reads NaN and Infinity (a rate draft's file): refused, not a crash
        ("sockets", float("inf"), "field 'sockets': must be a whole number"),
        ("sockets", float("nan"), "field 'sockets': must be a whole number"),
        ("sockets", 2.5, "field 'sockets': must be a whole number"),
        ("cpu_tdp_watts", None, "field 'cpu_tdp_watts': is required"),
        ("nodelist", "nid[1-", "field 'nodelist': is not a Slurm hostlist"),
        ("gpu_tdp_watts", 300, "field 'gpu_tdp_watts': is given but the partition has no GPUs"),
        ("weight_override", 100, "field 'weight_override_reason': is required"),
        ("cores_per_sockets", 4, "unknown field 'cores_per_sockets'"),
    ],
)
def test_a_bad_field_is_reported_with_file_partition_and_field(field, value, message):
    document = _setonix()
    document["partitions"][0][field] = value
    with pytest.raises(SpecFileError) as raised:
        cluster_definition_parse(document, source="setonix.json")
    text = str(raised.value)
    assert text.startswith("setonix.json: partitions[0]: partition 'work'")
    assert message in text


def test_a_gpu_partition_without_gpu_tdp_is_refused():
    document = _setonix()
    del document["partitions"][2]["gpu_tdp_watts"]
    with pytest.raises(SpecFileError, match="partition 'gpu': field 'gpu_tdp_watts': is required"):
        cluster_definition_parse(document, source="setonix.json")


def test_unknown_time_zone_and_duplicate_partitions_are_refused():
    document = _setonix()
    document["timezone"] = "Mars/Olympus"
    with pytest.raises(SpecFileError, match="unknown time zone"):
        cluster_definition_parse(document)
    document = _setonix()
    document["partitions"].append(document["partitions"][0])
    with pytest.raises(SpecFileError, match="'work' is defined twice"):
        cluster_definition_parse(document)


def test_invalid_json_names_the_file_and_line(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x",\n "partitions": [}\n')
    with pytest.raises(SpecFileError, match=r"broken.json: line 2: not valid JSON"):
        cluster_definition_load(broken)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SpecFileError, match="cannot be read"):
        cluster_definition_load(tmp_path / "nope.json")

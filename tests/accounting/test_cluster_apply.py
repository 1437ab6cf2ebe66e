"""cluster_apply: idempotent, versioned, all-or-nothing."""

import json
from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounting.clusters.selectors import partition_version_at
from accounting.clusters.services import VersionConflict, cluster_apply
from accounting.clusters.specs import cluster_definition_load, cluster_definition_parse
from accounting.models import Cluster, Partition, PartitionVersion

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 7, 1, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def _apply(document, when):
    return cluster_apply(definition=cluster_definition_parse(document), effective_from=when)


def test_all_shipped_spec_files_apply_and_derive_the_weights():
    call_command("cluster_apply", *sorted(EXAMPLES.glob("*.json")), stdout=StringIO())
    weights = {
        str(v.partition): v.derived_weight
        for v in PartitionVersion.objects.select_related("partition__cluster")
    }
    assert weights["setonix/work"] == Decimal(128)
    assert weights["setonix/gpu"] == Decimal(512)
    assert weights["paper-test-system/gpu"] == Decimal(192)
    assert weights["paper-test-system/cpu"] == Decimal(36)


def test_applying_the_same_file_twice_changes_nothing():
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    _apply(document, T0)
    second = _apply(document, T1)
    assert not second.changed
    assert second.unchanged == ["work", "highmem", "gpu"]
    assert PartitionVersion.objects.count() == 3


def test_a_changed_tdp_adds_a_version_and_keeps_the_old_one_for_old_jobs():
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    _apply(document, T0)
    document["partitions"][2]["gpu_tdp_watts"] = 350
    result = _apply(document, T1)
    assert result.versioned == ["gpu"]
    gpu = Partition.objects.get(cluster__name="setonix", name="gpu")
    assert (
        partition_version_at(partition=gpu, at=datetime(2026, 3, 1, tzinfo=UTC)).derived_weight
        == 512
    )
    newer = partition_version_at(partition=gpu, at=datetime(2026, 8, 1, tzinfo=UTC))
    assert newer.number == 2
    assert newer.derived_weight == Decimal(640)


def test_a_version_cannot_be_slipped_in_before_an_existing_one():
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    _apply(document, T1)
    document["partitions"][0]["memory_mb"] = 256000
    with pytest.raises(VersionConflict, match="must start after version 1"):
        _apply(document, T0)


def test_a_version_starts_on_the_hour_of_the_clusters_clock():
    # Utilisation is kept per hour: an hour must be priced with one hardware.
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    _apply(document, T0)
    document["partitions"][0]["memory_mb"] = 256000
    with pytest.raises(VersionConflict, match="starts on the hour"):
        _apply(document, datetime(2026, 3, 1, 10, 30, tzinfo=UTC))
    assert PartitionVersion.objects.count() == 3


def test_an_hour_of_a_half_hour_zone_is_its_own_not_utcs():
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    document["timezone"] = "Asia/Kolkata"  # UTC+05:30
    with pytest.raises(VersionConflict, match="starts on the hour"):
        _apply(document, T0)
    _apply(document, datetime(2026, 1, 1, 0, 30, tzinfo=UTC))
    document["partitions"][0]["memory_mb"] = 256000
    with pytest.raises(VersionConflict, match="starts on the hour"):
        _apply(document, datetime(2026, 3, 1, 10, 0, tzinfo=UTC))
    assert _apply(document, datetime(2026, 3, 1, 10, 30, tzinfo=UTC)).versioned == ["work"]


def test_without_a_date_a_new_version_starts_at_the_next_hour(monkeypatch):
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    _apply(document, T0)
    document["partitions"][0]["memory_mb"] = 256000
    monkeypatch.setattr(
        "accounting.clusters.services.timezone.now",
        lambda: datetime(2026, 3, 1, 10, 17, 5, tzinfo=UTC),
    )
    cluster_apply(definition=cluster_definition_parse(document))
    newest = PartitionVersion.objects.filter(partition__name="work").latest()
    zone = newest.partition.cluster.zoneinfo
    assert newest.effective_from.astimezone(zone).minute == 0
    assert datetime(2026, 3, 1, 10, 17, 5, tzinfo=UTC) < newest.effective_from
    assert newest.effective_from <= datetime(2026, 3, 1, 11, 17, 5, tzinfo=UTC)


def test_a_weight_override_is_recorded_with_its_reason_beside_the_derived_value():
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    document["partitions"][2]["weight_override"] = 480
    document["partitions"][2]["weight_override_reason"] = "board decision 2026-05: GPU uptake"
    _apply(document, T0)
    version = PartitionVersion.objects.get(
        partition__name="gpu", partition__cluster__name="setonix"
    )
    assert version.weight == Decimal(480)
    assert version.derived_weight == Decimal(512)
    assert version.weight_override_reason.startswith("board decision")


def test_partitions_missing_from_the_file_are_kept_and_reported():
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    _apply(document, T0)
    document["partitions"] = document["partitions"][:1]
    result = _apply(document, T1)
    assert result.not_in_file == ["gpu", "highmem"]
    assert Partition.objects.filter(cluster__name="setonix").count() == 3


def test_the_command_reports_a_bad_file_and_changes_nothing(tmp_path):
    good = EXAMPLES / "paper-test-system.json"
    bad = tmp_path / "bad.json"
    document = json.loads((EXAMPLES / "setonix.json").read_text())
    document["partitions"][1]["sockets"] = 0
    bad.write_text(json.dumps(document))
    with pytest.raises(
        CommandError, match=r"bad.json: partitions\[1\]: partition 'highmem': field 'sockets'"
    ):
        call_command("cluster_apply", good, bad, stdout=StringIO())
    assert Cluster.objects.count() == 0


def test_dry_run_reports_but_changes_nothing():
    out = StringIO()
    call_command("cluster_apply", EXAMPLES / "setonix.json", "--dry-run", stdout=out)
    assert "cluster setonix: created" in out.getvalue()
    assert "dry run" in out.getvalue()
    assert Cluster.objects.count() == 0


def test_spec_loaded_from_file_equals_engine_spec_of_the_stored_version():
    definition = cluster_definition_load(EXAMPLES / "paper-test-system.json")
    cluster_apply(definition=definition, effective_from=T0)
    stored = PartitionVersion.objects.get(partition__name="gpu")
    assert stored.spec == definition.partitions[1].charging

"""slurm.conf lines that make Slurm's billing follow the portal's weights."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from accounting.clusters.services import cluster_apply
from accounting.clusters.slurmconf import tres_billing_weights
from accounting.clusters.specs import cluster_definition_load

ROOT = Path(__file__).resolve().parents[2]


def _specs():
    definition = cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json")
    return {p.name: p.charging for p in definition.partitions}


def test_weights_match_the_ones_the_sample_cluster_ran_with():
    # examples/sacct/README.md: CPU=1.0,Mem=0.0005224489795918367 (work) and
    # CPU=8.0,Mem=0.0020897959183673468,GRES/gpu=64.0 (gpu); memory weights are rounded up
    # in their last digit so a whole node's memory reaches the node's rate in floating point.
    specs = _specs()
    assert tres_billing_weights(specs["work"]) == "CPU=1,Mem=0.0005224489795919"
    assert tres_billing_weights(specs["gpu"]) == "CPU=8,Mem=0.0020897959183674,GRES/gpu=64"


def test_a_whole_nodes_memory_bills_the_whole_node_in_floating_point():
    weight = float(tres_billing_weights(_specs()["work"]).split("Mem=")[1])
    assert int(245000 * weight) == 128  # Slurm truncates; the exact weight gives 127


@pytest.mark.django_db
def test_the_command_prints_the_flag_and_one_line_per_partition():
    cluster_apply(definition=cluster_definition_load(ROOT / "examples/clusters/slurm-testbed.json"))
    out = StringIO()
    call_command("slurm_billing_config", "--cluster", "slurm-testbed", stdout=out)
    text = out.getvalue()
    assert "PriorityFlags=MAX_TRES" in text
    assert 'PartitionName=gpu TRESBillingWeights="CPU=8,Mem=0.0020897959183674,GRES/gpu=64"' in text
    assert "# The portal charges sum over nodes" in text

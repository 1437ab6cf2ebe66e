"""Which system the cost ratio explorer opens on when a centre has no jobs, or no cluster at all
(the module's own database: the shared scenario has both)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from tests.factories import PartitionVersionFactory, UserFactory, example_cluster
from tests.pages.conftest import client_for


def _opening_system(user) -> str:
    page = client_for(user).get(reverse("accounting:cost-ratio"))
    assert page.status_code == 200
    return page.context["form"]["system"].value()


@pytest.mark.django_db
def test_without_jobs_the_cluster_with_the_newest_partition_version_opens():
    user = UserFactory()
    example_cluster("paper-test-system")
    testbed = example_cluster("slurm-testbed")
    # Both first versions start at the beginning: the first cluster by name opens.
    assert _opening_system(user) == "paper-test-system/cpu+gpu"
    gpu = testbed.partitions.get(name="gpu")
    PartitionVersionFactory(
        partition=gpu, number=2, effective_from=datetime(2026, 6, 1, tzinfo=UTC),
        nodelist="nid[2001-2002]", node_count=2, gpus=8, gpu_tdp_watts=Decimal(280),
    )  # fmt: skip
    assert _opening_system(user) == "slurm-testbed/work+gpu"


@pytest.mark.django_db
def test_a_version_that_has_not_started_does_not_count_as_newest():
    user = UserFactory()
    example_cluster("paper-test-system")
    testbed = example_cluster("slurm-testbed")
    PartitionVersionFactory(
        partition=testbed.partitions.get(name="gpu"), number=2,
        effective_from=datetime(2999, 1, 1, tzinfo=UTC), nodelist="nid[2001-2002]",
        node_count=2, gpus=8, gpu_tdp_watts=Decimal(280),
    )  # fmt: skip
    assert _opening_system(user) == "paper-test-system/cpu+gpu"


@pytest.mark.django_db
def test_with_no_cluster_configured_the_explorer_opens_on_the_papers_reference_system():
    page = client_for(UserFactory()).get(reverse("accounting:cost-ratio"))
    assert page.context["form"]["system"].value() == "paper"
    assert page.context["system_label"].startswith("Reference system")


@pytest.mark.django_db
def test_a_newer_cluster_without_gpus_is_passed_over_for_one_that_can_be_compared():
    user = UserFactory()
    example_cluster("paper-test-system")
    PartitionVersionFactory(effective_from=datetime(2026, 6, 1, tzinfo=UTC))  # CPU nodes only
    assert _opening_system(user) == "paper-test-system/cpu+gpu"

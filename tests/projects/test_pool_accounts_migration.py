"""projects 0003: pools of a cluster that shared a Slurm account suffix get one each, so each
pool is an account of its own with its own limit (docs/slurm.md, "One Slurm limit per pool")."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.factories import ClusterFactory, example_cluster

BEFORE = [("projects", "0002_project_archived")]
AFTER = [("projects", "0003_pool_accounts")]


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


@pytest.mark.django_db(transaction=True)
def test_pools_that_shared_a_suffix_get_one_each_and_the_oldest_keeps_it() -> None:
    cluster, other = example_cluster(), ClusterFactory.create()
    try:
        old = _migrate(BEFORE).loader.project_state(BEFORE).apps
        pool = old.get_model("projects", "ResourcePool")
        made = {
            name: pool.objects.create(name=name, cluster_id=where.pk, slurm_account_suffix=suffix)
            for name, where, suffix in (
                ("setonix CPU", cluster, ""),
                ("setonix GPU", cluster, ""),
                ("setonix highmem GPU", cluster, ""),
                ("other CPU", other, ""),
                ("setonix debug", cluster, "-GPU"),
            )
        }

        new = _migrate(AFTER).loader.project_state(AFTER).apps
        after = dict(
            new.get_model("projects", "ResourcePool")
            .objects.filter(pk__in=[row.pk for row in made.values()])
            .values_list("name", "slurm_account_suffix")
        )
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert after == {
        "setonix CPU": "",  # the oldest keeps the shared (blank) suffix
        "setonix GPU": "-gpu",
        "setonix highmem GPU": "-setonix-highmem",
        "other CPU": "",  # another cluster: its own blank suffix
        "setonix debug": "-debug",  # -GPU in lower case is taken by now
    }

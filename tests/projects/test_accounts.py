"""One rule for "Slurm account -> project and pool", used by the import and the accounts sync.

Before it, the sync read an account over the pools of every portal cluster Slurm knows by the
name it was given (every pool, when given none), the import over the pools of the job's
cluster. Two portal clusters share a Slurm name when both model one Slurm cluster (the
example spec names ``setonix``): an account synced as a pool's account of one project
(``acme-gpu`` -> ``acme``) was then quarantined by the import on the cluster without that pool
as "unknown project" (the pool-elsewhere case below failed so). The sync now takes the portal
cluster, and both ask ``projects.selectors.project_for_account`` over that cluster's pools."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_parse
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, Job, QuarantinedRecord
from allocations.slurm.services import slurm_accounts_sync
from projects.accounts import account_candidates, pool_account, project_code_of
from projects.models import Membership
from tests.factories import ResourcePoolFactory

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
SAMPLE = ROOT / "examples" / "sacct" / "sacct_allocations.psv"

codes = st.from_regex(r"[a-z][a-z0-9]{2,12}", fullmatch=True)
suffixes = st.from_regex(r"-[a-z]{1,5}", fullmatch=True)


@given(code=codes, suffix=suffixes, others=st.lists(suffixes, max_size=3))
def test_a_pools_account_reads_back_as_its_project(code, suffix, others):
    account = pool_account(code, suffix)
    assert project_code_of(account, [suffix, *others]) in {code, account[: -len(suffix)]}
    assert project_code_of(account, [suffix]) == code
    assert account_candidates(account, [suffix]) == (account, code)


@given(code=codes, suffix=suffixes)
def test_an_account_without_a_pool_suffix_is_the_project_code(code, suffix):
    assert project_code_of(code, []) == code
    assert account_candidates(code, []) == (code,)
    assert pool_account(code) == code


def test_the_longest_suffix_wins():
    assert project_code_of("acme-gpu-big", ["-big", "-gpu-big"]) == "acme"


def test_the_accounts_sync_needs_the_cluster_whose_pools_name_its_accounts():
    cluster = inspect.signature(slurm_accounts_sync).parameters["cluster"]
    assert cluster.default is inspect.Parameter.empty


def _cluster(name: str) -> Cluster:
    document = json.loads(SPEC.read_text())
    document["name"] = name
    cluster_apply(definition=cluster_definition_parse(document))
    return Cluster.objects.get(name=name)


def _one_job_as(account: str) -> list[str]:
    """The sample's header and its first gpu job, run under ``account``."""
    header, *lines = SAMPLE.read_text().splitlines()
    columns = header.split("|")
    fields = next(
        line.split("|")
        for line in lines
        if line.split("|")[columns.index("Partition")] == "gpu"
        and "." not in line.split("|")[columns.index("JobID")]
    )
    fields[columns.index("Account")] = account
    return [header, "|".join(fields)]


@pytest.mark.django_db
@pytest.mark.parametrize("pool_on_cluster", [True, False], ids=["pool-here", "pool-elsewhere"])
def test_the_import_books_an_account_to_the_project_the_sync_joined_it_to(pool_on_cluster):
    here, elsewhere = _cluster("accounts-here"), _cluster("accounts-elsewhere")
    ResourcePoolFactory.create(
        cluster=here if pool_on_cluster else elsewhere,
        partitions=["gpu"],
        slurm_account_suffix="-gpu",
    )
    associations = [
        "Cluster|Account|User",
        f"{here.slurm_name}|acme|alice",
        f"{here.slurm_name}|acme-gpu|bob",
    ]
    slurm_accounts_sync(lines=associations, cluster=here)
    joined = Membership.objects.get(user__username="bob").project

    jobs_import(cluster=here, lines=iter(_one_job_as("acme-gpu")), source="accounts rule")

    assert not QuarantinedRecord.objects.filter(cluster=here, resolved_at__isnull=True).exists()
    assert Job.objects.get(cluster=here).project == joined
    assert joined.code == ("acme" if pool_on_cluster else "acme-gpu")

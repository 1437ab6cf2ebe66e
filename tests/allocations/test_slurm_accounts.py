"""Onboarding from sacctmgr associations."""

import tempfile
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from accounting.models import Cluster
from allocations.slurm.accounts import AssociationsError, associations_parse
from projects.models import Membership, Project

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sacct" / "sacctmgr_assoc.psv"


def test_the_real_sacctmgr_output_gives_four_accounts_with_their_users():
    associations = associations_parse(SAMPLE.read_text().splitlines(), cluster="setonix")
    assert {account: sorted(users) for account, users in associations.accounts.items()} == {
        "pawsey0001": ["alice", "root"],
        "pawsey0002": ["bob", "root"],
        "pawsey0003": ["alice", "carol"],
        "pawsey0004": ["bob", "carol"],
    }


def test_other_clusters_rows_are_left_out():
    lines = ["Cluster|Account|User|ParentName", "other|proj9|dave|root", "setonix|proj1|eve|root"]
    assert set(associations_parse(lines, cluster="setonix").accounts) == {"proj1"}


def test_a_header_without_account_or_user_is_refused():
    with pytest.raises(AssociationsError, match="header lacks User"):
        associations_parse(["Account|ParentName", "a|root"])


@pytest.mark.django_db
def test_sync_creates_projects_users_and_memberships_once():
    out = StringIO()
    call_command("slurm_accounts_sync", "--cluster", "setonix", "--file", str(SAMPLE), stdout=out)
    assert "projects created: 4" in out.getvalue()
    assert Project.objects.count() == 4
    assert Membership.objects.count() == 8
    carol = get_user_model().objects.get(username="carol")
    assert not carol.has_usable_password()
    again = StringIO()
    call_command("slurm_accounts_sync", "--cluster", "setonix", "--file", str(SAMPLE), stdout=again)
    assert "projects created: 0" in again.getvalue()
    assert Membership.objects.count() == 8


@pytest.mark.django_db
def test_run_sacctmgr_reports_a_missing_binary():
    with pytest.raises(CommandError, match="cannot run"):
        call_command(
            "slurm_accounts_sync", "--cluster", "setonix", "--run-sacctmgr",
            "--sacctmgr", "/nonexistent/sacctmgr", stdout=StringIO(),
        )  # fmt: skip


@pytest.mark.django_db
def test_a_portal_cluster_named_unlike_slurm_finds_no_row_and_says_what_to_set():
    # The real centre's failure: "projects created: 0", then every job quarantined.
    Cluster.objects.create(name="slurm-testbed")

    with pytest.raises(CommandError) as raised:
        call_command(
            "slurm_accounts_sync", "--cluster", "slurm-testbed", "--file", str(SAMPLE),
            stdout=StringIO(),
        )  # fmt: skip

    message = str(raised.value)
    assert "the file holds clusters setonix" in message
    assert "Slurm name is slurm-testbed" in message
    assert "set slurm_cluster_name" in message
    assert not Project.objects.exists()


@pytest.mark.django_db
def test_slurm_cluster_name_selects_the_rows_and_the_others_are_counted():
    Cluster.objects.create(name="slurm-testbed", slurm_cluster_name="setonix")
    lines = SAMPLE.read_text().splitlines()
    path = Path(SAMPLE).with_name("assoc-two-clusters.psv")
    out = StringIO()
    with tempfile.TemporaryDirectory() as folder:
        mixed = Path(folder) / path.name
        mixed.write_text("\n".join([*lines, "other|proj9|dave||normal"]) + "\n")
        call_command(
            "slurm_accounts_sync", "--cluster", "slurm-testbed", "--file", str(mixed), stdout=out
        )

    assert "projects created: 4" in out.getvalue()
    assert "rows of other clusters skipped: other: 1" in out.getvalue()
    assert not Project.objects.filter(code="proj9").exists()

"""Onboarding from sacctmgr associations."""

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from allocations.models import Membership, Project
from allocations.slurm_accounts import AssociationsError, associations_parse

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

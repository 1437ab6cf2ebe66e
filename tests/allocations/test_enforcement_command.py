"""python manage.py enforcement: list with --dry-run, record and run otherwise."""

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from accounting.ledger.pipeline import jobs_import
from allocations.grants.services import allocation_grant
from allocations.models import EnforcementAction, ThresholdNotice
from tests.allocations.conftest import PERIOD, SAMPLE

pytestmark = pytest.mark.django_db


@pytest.fixture
def exhausted(centre):
    allocation_grant(
        project=centre.p2, pool=centre.cpu, amount=Decimal("0.004"), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=centre.staff,
    )  # fmt: skip
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    return centre


def test_dry_run_lists_what_would_happen_and_records_nothing(exhausted):
    out = StringIO()
    call_command("enforcement", "--dry-run", "--on", "2026-11-22", stdout=out)
    text = out.getvalue()
    assert "notice: pawsey0002 used" in text
    assert "proposed limit: sacctmgr -i modify account name=pawsey0002 set qos=lowpriority" in text
    assert "dry run: nothing recorded, sent or run" in text
    assert not ThresholdNotice.objects.exists()
    assert not EnforcementAction.objects.exists()


def test_without_dry_run_notices_are_recorded_and_actions_wait_for_an_enabled_cluster(exhausted):
    out = StringIO()
    call_command("enforcement", "--on", "2026-11-22", stdout=out)
    assert ThresholdNotice.objects.filter(threshold=100).count() == 1
    action = EnforcementAction.objects.get()
    assert action.status == EnforcementAction.Status.PROPOSED
    assert "waiting (slurm-testbed: enforcement not enabled)" in out.getvalue()

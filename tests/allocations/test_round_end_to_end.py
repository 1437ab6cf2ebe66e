"""A whole merit round, from the call to enforcement and restoration the next quarter."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied

from accounting.clusters.quotes import QuoteRequest
from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, Partition
from allocations.grants.selectors import balance_get
from allocations.grants.services import AllocationError, adjustment_top_up
from allocations.models import (
    AllocationRequest,
    BudgetPeriod,
    EnforcementAction,
    RequestTransition,
    ThresholdNotice,
)
from allocations.rounds.selectors import round_overview
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_estimate_add,
    request_review_start,
    request_submit,
    review_submit,
    round_create,
)
from allocations.slurm.enforcement import enforcement_run_proposed, thresholds_check
from tests.allocations.conftest import PERIOD, SAMPLE, SAMPLE_DAY, open_round_times

State = AllocationRequest.State


def _round(centre, available_cpu="10", available_gpu="10", name="2027 merit round"):
    opens, closes = open_round_times()
    return round_create(
        name=name, opens_at=opens, closes_at=closes,
        period_start=PERIOD[0], period_end=PERIOD[1],
        available={centre.cpu: Decimal(available_cpu), centre.gpu: Decimal(available_gpu)},
        chair=centre.chair, committee=[centre.reviewer, centre.alice], actor=centre.staff,
    )  # fmt: skip


def test_a_full_round_from_call_to_enforcement_and_restoration(
    centre, tmp_path, settings, django_capture_on_commit_callbacks
):
    round_ = _round(centre)

    # Two PIs apply; the estimate comes from the quote engine.
    climate = request_create(
        round_=round_, project=centre.p1, actor=centre.alice, justification="CMIP7 runs",
        amounts={centre.cpu: Decimal("4"), centre.gpu: Decimal("2")},
    )  # fmt: skip
    line = request_estimate_add(
        request=climate, actor=centre.alice, jobs=10,
        partition=Partition.objects.get(cluster=centre.cluster, name="gpu"),
        quote=QuoteRequest(nodes=1, hours=Decimal("0.5"), gpus_per_node=1),
    )  # fmt: skip
    assert line.service_units == Decimal("320")  # 10 jobs x 512 SU/h x 1/8 node x 0.5 h
    genomics = request_create(
        round_=round_, project=centre.p2, actor=centre.bob, amounts={centre.cpu: Decimal("6")}
    )
    request_submit(request=climate, actor=centre.alice)
    request_submit(request=genomics, actor=centre.bob)
    for request in (climate, genomics):
        request_review_start(request=request, actor=centre.chair)

    # Reviews; alice sits on the committee but may not review her own project.
    review_submit(request=climate, reviewer=centre.reviewer, score=5, comment="excellent")
    with pytest.raises(PermissionDenied, match="conflict of interest"):
        review_submit(request=climate, reviewer=centre.alice, score=5)
    review_submit(request=genomics, reviewer=centre.alice, score=3, comment="fine")
    review_submit(request=genomics, reviewer=centre.reviewer, score=4)

    overview = round_overview(round_=round_, actor=centre.chair)
    by_pool = {summary.pool.name: summary for summary in overview["pools"]}
    assert by_pool["testbed CPU"].requested_su == Decimal("10")
    assert by_pool["testbed CPU"].available_su == Decimal("10")
    scores = {item.request.project.code: item.average_score for item in overview["requests"]}
    assert scores == {"pawsey0001": Decimal("5.00"), "pawsey0002": Decimal("3.50")}

    # The chair grants: climate in full, genomics less than asked, with a reason.
    request_decide(
        request=climate, actor=centre.chair,
        granted={centre.cpu: Decimal("4"), centre.gpu: Decimal("2")},
    )  # fmt: skip
    request_decide(
        request=genomics, actor=centre.chair, granted={centre.cpu: Decimal("2.4")},
        reason="scaling tests first",
    )  # fmt: skip
    climate.refresh_from_db()
    genomics.refresh_from_db()
    assert (climate.state, genomics.state) == (State.GRANTED, State.PARTIALLY_GRANTED)
    assert list(
        RequestTransition.objects.filter(request=genomics).values_list("to_state", flat=True)
    ) == [State.DRAFT, State.SUBMITTED, State.UNDER_REVIEW, State.PARTIALLY_GRANTED]

    # Quarterly budget periods, split evenly and adding up exactly.
    quarters = BudgetPeriod.objects.filter(
        allocation__project=centre.p2, allocation__pool=centre.cpu
    ).order_by("start")
    assert [(q.start, q.end) for q in quarters] == [
        (date(2026, 10, 1), date(2027, 1, 1)), (date(2027, 1, 1), date(2027, 4, 1)),
        (date(2027, 4, 1), date(2027, 7, 1)), (date(2027, 7, 1), date(2027, 10, 1)),
    ]  # fmt: skip
    assert [q.budget_su for q in quarters] == [Decimal("0.6")] * 4

    # Jobs are imported; the balances read the roll-ups.
    cluster = Cluster.objects.get(pk=centre.cluster.pk)
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=cluster, lines=lines, source="sample")
    balance = balance_get(project=centre.p2, pool=centre.cpu, on=SAMPLE_DAY)
    assert balance is not None
    assert balance.used_su > balance.available_su  # the sample uses more than 0.6 SU
    assert balance.remaining_su == balance.budget_su + balance.adjustments_su - balance.used_su

    # Thresholds: notices once per threshold, mail to the PI and opted-in members.
    with django_capture_on_commit_callbacks(execute=True):
        report = thresholds_check(on=SAMPLE_DAY)
    crossed = {(n.budget_period.allocation.project.code, n.threshold) for n in report.notices}
    assert {("pawsey0002", 75), ("pawsey0002", 90), ("pawsey0002", 100)} <= crossed
    # All three crossed in one import: one mail, for the highest.
    to_bob = [message for message in mail.outbox if message.to == ["bob@example.org"]]
    assert len(to_bob) == 1
    assert "pawsey0002 has used" in to_bob[0].subject
    assert "(threshold 100%)" in to_bob[0].body
    # The period by its last day, as the pages say it (its stored end is 2027-01-01).
    assert "testbed CPU for 2026-10-01 to 2026-12-31 (threshold" in to_bob[0].body
    assert "lower priority" in to_bob[0].body
    assert thresholds_check(on=SAMPLE_DAY).notices == []  # idempotent
    limit = EnforcementAction.objects.get(project=centre.p2, pool=centre.cpu)
    assert limit.kind == EnforcementAction.Kind.LIMIT
    assert limit.command == "sacctmgr -i modify account name=pawsey0002 set qos=lowpriority"

    # Listed, not run, until the cluster enables enforcement with a working command.
    assert enforcement_run_proposed() == []
    fake = tmp_path / "sacctmgr"
    fake.write_text('#!/bin/sh\necho "sacctmgr $@"\n')
    fake.chmod(0o755)
    centre.cpu.limit_command = f"{fake} -i modify account name={{account}} set qos=lowpriority"
    centre.cpu.save()
    limit.command = f"{fake} -i modify account name=pawsey0002 set qos=lowpriority"
    limit.save()
    Cluster.objects.filter(pk=cluster.pk).update(enforcement_enabled=True)
    # The other pools' plain "sacctmgr" runs from a directory that cannot exist, whatever
    # Slurm this machine has installed.
    settings.SLURM_BIN_DIR = str(tmp_path / "no-such-dir")
    ran = {action.project.code: action for action in enforcement_run_proposed()}
    assert ran["pawsey0002"].status == EnforcementAction.Status.EXECUTED
    assert ran["pawsey0002"].exit_code == 0
    assert "set qos=lowpriority" in ran["pawsey0002"].output
    for code, action in ran.items():  # a missing sacctmgr: logged as failed, in its words
        if code != "pawsey0002":
            assert action.status == EnforcementAction.Status.FAILED
            assert "sacctmgr was not found as" in action.output

    # Next quarter: the project gets a fresh budget, and the limit is lifted automatically.
    report = thresholds_check(on=date(2027, 1, 5))
    restore = [a for a in report.actions if a.kind == EnforcementAction.Kind.RESTORE]
    assert [(a.project.code, a.pool.name) for a in restore] == [("pawsey0002", "testbed CPU")]
    assert restore[0].command == "sacctmgr -i modify account name=pawsey0002 set qos=normal"
    fresh = balance_get(project=centre.p2, pool=centre.cpu, on=date(2027, 1, 5))
    assert fresh is not None
    assert fresh.used_su == 0
    assert fresh.remaining_su == Decimal("0.6")


def test_notices_are_mailed_to_the_pi_and_members_who_opted_in(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    round_ = _round(centre)
    request = request_create(
        round_=round_, project=centre.p3, actor=centre.alice, amounts={centre.cpu: Decimal("1")}
    )
    request_submit(request=request, actor=centre.alice)
    request_review_start(request=request, actor=centre.chair)
    request_decide(request=request, actor=centre.chair, granted={centre.cpu: Decimal("1")})
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    with django_capture_on_commit_callbacks(execute=True):
        report = thresholds_check(on=SAMPLE_DAY)
    assert report.notices
    notices = ThresholdNotice.objects.filter(budget_period__allocation__project=centre.p3)
    assert notices.exists()
    assert notices.first().recipients == "alice@example.org, carol@example.org"
    assert mailoutbox[0].to == ["alice@example.org", "carol@example.org"]


def test_a_grant_beyond_what_the_round_has_is_refused_and_changes_nothing(centre):
    round_ = _round(centre, available_cpu="5")
    request = request_create(
        round_=round_, project=centre.p1, actor=centre.alice, amounts={centre.cpu: Decimal("8")}
    )
    request_submit(request=request, actor=centre.alice)
    request_review_start(request=request, actor=centre.chair)
    with pytest.raises(AllocationError, match=r"the round has 5\.000000 SU on testbed CPU"):
        request_decide(
            request=request, actor=centre.chair, granted={centre.cpu: Decimal("8")}, reason="x"
        )
    request.refresh_from_db()
    assert request.state == State.UNDER_REVIEW
    assert not BudgetPeriod.objects.exists()


def _sample_as(project_code: str, *, first: int, last: int, id_offset: int) -> list[str]:
    """Lines ``first``..``last`` of the sample, re-accounted to ``project_code`` under new job
    ids (more of that project's jobs, read through the real importer)."""
    lines = (SAMPLE / "sacct_allocations.psv").read_text().splitlines(keepends=True)
    out = [lines[0]]
    for line in lines[first:last]:
        fields = line.split("|")
        job = str(int(fields[1]) + id_offset)
        fields[0], fields[1], fields[4] = job, job, project_code
        out.append("|".join(fields))
    return out


def test_thresholds_crossed_together_send_one_mail_for_the_highest(
    centre, mailoutbox, django_capture_on_commit_callbacks
):
    round_ = _round(centre)
    request = request_create(
        round_=round_, project=centre.p3, actor=centre.alice, amounts={centre.cpu: Decimal("1")}
    )
    request_submit(request=request, actor=centre.alice)
    request_review_start(request=request, actor=centre.chair)
    request_decide(request=request, actor=centre.chair, granted={centre.cpu: Decimal("1")})
    jobs_import(cluster=centre.cluster, lines=_sample_as("pawsey0003", first=1, last=120,
                id_offset=10_000_000), source="first")  # fmt: skip
    used = balance_get(project=centre.p3, pool=centre.cpu, on=SAMPLE_DAY).used_su
    # A top-up brings the budget to where the usage is 95 %: past 75 % and 90 % at once.
    budget = balance_get(project=centre.p3, pool=centre.cpu, on=SAMPLE_DAY).available_su
    adjustment_top_up(
        project=centre.p3, pool=centre.cpu, amount=(used / Decimal("0.95") - budget).quantize(
            Decimal("0.000001")), actor=centre.staff, reason="bring it to 95 %", on=SAMPLE_DAY,
    )  # fmt: skip

    with django_capture_on_commit_callbacks(execute=True):
        first = thresholds_check(on=SAMPLE_DAY)
    assert sorted(n.threshold for n in first.notices) == [75, 90]
    assert len(mailoutbox) == 1
    assert "(threshold 90%)" in mailoutbox[0].body

    # More jobs of the project take it past 100 %: one more mail, for 100 % only.
    jobs_import(cluster=centre.cluster, lines=_sample_as("pawsey0003", first=120, last=226,
                id_offset=20_000_000), source="second")  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        second = thresholds_check(on=SAMPLE_DAY)
    assert [n.threshold for n in second.notices] == [100]
    assert len(mailoutbox) == 2
    assert "(threshold 100%)" in mailoutbox[1].body
    with django_capture_on_commit_callbacks(execute=True):
        assert thresholds_check(on=SAMPLE_DAY).notices == []
    assert len(mailoutbox) == 2

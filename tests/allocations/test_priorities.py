"""Dynamic priority in the portal (allocations/priorities/services.py): the cluster's policy, posted
profiling coefficients, each project's effective K, and the reviewable Slurm commands."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounting.ledger.pipeline import jobs_import
from accounting.models import Cluster, Job
from accounting.utilisation.priority import PriorityPolicy as MathsPolicy
from accounting.utilisation.priority import dynamic_priority
from allocations.models import PriorityAction, PriorityPolicy, ProfilingCoefficient
from allocations.priorities.services import (
    PriorityError,
    ProfilingCsvError,
    priority_action_dismiss,
    priority_action_execute,
    priority_actions_propose,
    priority_policy_set,
    profiling_coefficient_post,
    profiling_coefficients_import_csv,
    project_k_prof_get,
    project_priorities_get,
    slurm_priority,
)
from tests.allocations.conftest import SAMPLE

pytestmark = pytest.mark.django_db

# Figure 2's shape with Pr_base = 1000: priority falls below K1, rises faster from K2.
POLICY = {"base_priority": 1000, "k1": "0.4", "k2": "0.7", "c0": "0.5", "c1": "1", "c2": "3"}


def set_policy(centre, **changes):
    values = {**POLICY, **changes}
    return priority_policy_set(cluster=centre.cluster, updated_by=centre.staff, **values)


def post(centre, project, k, job=None):
    return profiling_coefficient_post(
        cluster=centre.cluster, project=project, k_prof=Decimal(k), job=job,
        posted_by=centre.staff,
    )  # fmt: skip


@pytest.fixture
def with_jobs(centre):
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    return centre


def charged_jobs(project, count):
    jobs = list(
        Job.objects.filter(project=project, service_units__gt=0, run="").order_by("pk")[:count]
    )
    assert len(jobs) == count
    return jobs


# --- Policy ------------------------------------------------------------------------------------


def test_a_policy_is_set_and_replaced(centre):
    policy = set_policy(centre)
    assert policy.k1 == Decimal("0.4")
    assert (
        policy.command_template == "sacctmgr --immediate modify qos {qos} set priority={priority}"
    )
    assert not policy.execution_enabled
    set_policy(centre, k2="0.9", execution_enabled=True)
    policy = PriorityPolicy.objects.get(cluster=centre.cluster)
    assert policy.k2 == Decimal("0.9")
    assert policy.execution_enabled
    assert policy.updated_by == centre.staff


@pytest.mark.parametrize("k2", ["0.4", "0.3"])
def test_k1_not_below_k2_is_refused_with_both_values(centre, k2):
    with pytest.raises(PriorityError, match=rf"K1 < K2, got K1=0.4 and K2={k2}"):
        set_policy(centre, k2=k2)
    assert not PriorityPolicy.objects.exists()


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("sacctmgr modify qos {qos} set priority={prio}", r"unknown placeholder \{prio\}"),
        ("sacctmgr modify qos {} set priority={priority}", r"unknown placeholder \{\}"),
        ("sacctmgr modify qos {qos!r} set priority={priority}", "no format or conversion"),
        ("sacctmgr modify qos {qos}", r"must use \{priority\}"),
        ("sacctmgr modify qos '{qos} set priority={priority}", "does not split into words"),
        ("sacctmgr {priority", "not valid"),
        ("   ", "empty"),
    ],
)
def test_a_command_template_with_a_bad_placeholder_is_refused(centre, template, message):
    with pytest.raises(PriorityError, match=message):
        set_policy(centre, command_template=template)


def test_a_negative_base_priority_and_too_many_decimals_are_refused(centre):
    with pytest.raises(PriorityError, match="Pr_base must be at least 0"):
        set_policy(centre, base_priority=-1)
    with pytest.raises(PriorityError, match="more than 6 decimal places"):
        set_policy(centre, c0="0.1234567")


def test_only_staff_set_a_policy_or_post_a_coefficient(centre):
    with pytest.raises(PermissionDenied):
        priority_policy_set(cluster=centre.cluster, updated_by=centre.alice, **POLICY)
    with pytest.raises(PermissionDenied):
        profiling_coefficient_post(
            cluster=centre.cluster, project=centre.p1, k_prof=Decimal(1), posted_by=centre.alice
        )


# --- Coefficients and the rule for K ----------------------------------------------------------


def test_a_job_must_belong_to_the_project_and_the_cluster(with_jobs):
    c = with_jobs
    (job,) = charged_jobs(c.p3, 1)
    with pytest.raises(PriorityError, match="not a job of project pawsey0001"):
        post(c, c.p1, "0.5", job=job)
    other = Cluster.objects.create(name="other")
    with pytest.raises(PriorityError, match="ran on another cluster"):
        profiling_coefficient_post(
            cluster=other, project=c.p3, k_prof=Decimal(1), job=job, posted_by=c.staff
        )
    with pytest.raises(PriorityError, match="K_prof must be at least 0"):
        post(c, c.p3, "-0.1")
    assert not ProfilingCoefficient.objects.exists()


def test_without_any_coefficient_a_project_has_no_k(centre):
    assert project_k_prof_get(cluster=centre.cluster, project=centre.p1) is None


def test_the_newest_project_value_counts(centre):
    post(centre, centre.p1, "0.3")
    post(centre, centre.p1, "0.8")
    k = project_k_prof_get(cluster=centre.cluster, project=centre.p1)
    assert k is not None
    assert (k.k_prof, k.source, k.jobs) == (Decimal("0.8"), "project", 0)


def test_job_values_after_the_project_value_give_their_su_weighted_mean(with_jobs):
    c = with_jobs
    first, second = charged_jobs(c.p3, 2)
    post(c, c.p3, "0.9")
    post(c, c.p3, "0.2", job=first)
    post(c, c.p3, "0.6", job=second)
    post(c, c.p3, "0.5", job=first)  # a job's newest value replaces its earlier one
    k = project_k_prof_get(cluster=c.cluster, project=c.p3)
    su1, su2 = first.service_units, second.service_units
    expected = (Decimal("0.5") * su1 + Decimal("0.6") * su2) / (su1 + su2)
    assert k is not None
    assert k.source == "jobs"
    assert k.jobs == 2
    assert k.k_prof == expected.quantize(Decimal("0.000001"))
    assert k.source_label == "SU-weighted mean of 2 jobs"


def test_a_project_value_posted_after_the_job_values_wins(with_jobs):
    c = with_jobs
    (job,) = charged_jobs(c.p3, 1)
    post(c, c.p3, "0.2", job=job)
    post(c, c.p3, "0.75")
    k = project_k_prof_get(cluster=c.cluster, project=c.p3)
    assert k is not None
    assert (k.k_prof, k.source) == (Decimal("0.75"), "project")


def test_jobs_without_service_units_give_a_plain_mean(with_jobs):
    c = with_jobs
    first, second = charged_jobs(c.p3, 2)
    Job.objects.filter(pk__in=[first.pk, second.pk]).update(
        service_units=0, pending_service_units=0
    )
    post(c, c.p3, "0.2", job=first)
    post(c, c.p3, "0.4", job=second)
    k = project_k_prof_get(cluster=c.cluster, project=c.p3)
    assert k is not None
    assert k.k_prof == Decimal("0.3")


def test_coefficients_on_another_cluster_do_not_count(centre):
    other = Cluster.objects.create(name="other")
    profiling_coefficient_post(
        cluster=other, project=centre.p1, k_prof=Decimal(2), posted_by=centre.staff
    )
    assert project_k_prof_get(cluster=centre.cluster, project=centre.p1) is None


# --- CSV import ------------------------------------------------------------------------------


def test_a_csv_file_is_imported_with_jobs_given_by_slurm_job_id(with_jobs):
    c = with_jobs
    (job,) = charged_jobs(c.p3, 1)
    text = (
        "project,k_prof,job_id,note\n"
        "pawsey0001,0.35,,from the profiler\n"
        f"pawsey0003,0.8,{job.job_id_raw},one job\n"
        "\n"
        "pawsey0002,1.1\n"
    )
    imported = profiling_coefficients_import_csv(cluster=c.cluster, text=text, posted_by=c.staff)
    assert len(imported) == 3
    assert ProfilingCoefficient.objects.filter(source="csv").count() == 3
    row = ProfilingCoefficient.objects.get(project=c.p3)
    assert (row.job, row.k_prof, row.note) == (job, Decimal("0.8"), "one job")
    assert ProfilingCoefficient.objects.get(project=c.p1).note == "from the profiler"


def test_a_csv_file_with_any_bad_line_imports_nothing_and_names_each_line_and_column(with_jobs):
    c = with_jobs
    (job,) = charged_jobs(c.p3, 1)
    text = (
        "project,k_prof,job_id\n"
        "pawsey0001,0.35\n"
        "pawsey0002,abc\n"
        "nosuch,0.5\n"
        f"pawsey0001,0.5,{job.job_id_raw}\n"
        "pawsey0001,0.5,99999999\n"
        "pawsey0001,-1\n"
    )
    with pytest.raises(ProfilingCsvError) as caught:
        profiling_coefficients_import_csv(cluster=c.cluster, text=text, posted_by=c.staff)
    errors = [(error.line, error.column) for error in caught.value.errors]
    assert errors == [(3, "k_prof"), (4, "project"), (5, "job_id"), (6, "job_id"), (7, "k_prof")]
    assert "line 3, column k_prof" in str(caught.value)
    assert "line 4, column project: unknown project 'nosuch'" in str(caught.value)
    assert not ProfilingCoefficient.objects.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "line 1: the file is empty"),
        ("project,k\npawsey0001,1\n", "line 1, column k: unknown column"),
        ("project\npawsey0001\n", "line 1, column k_prof: missing column"),
        ("project,k_prof\n", "line 1: no lines after the header"),
        ("project,k_prof\npawsey0001,1,2\n", "line 2: 3 values for 2 columns"),
        ("project,k_prof,note\npawsey0001,1,a\x00b\n", "line 2, column note: holds a NUL"),
    ],
)
def test_a_csv_file_with_a_bad_header_or_shape_is_refused(centre, text, expected):
    with pytest.raises(ProfilingCsvError, match=expected):
        profiling_coefficients_import_csv(cluster=centre.cluster, text=text, posted_by=centre.staff)


def test_in_a_csv_file_the_later_line_is_the_newer_value(centre):
    text = "project,k_prof\npawsey0001,0.1\npawsey0001,0.9\n"
    profiling_coefficients_import_csv(cluster=centre.cluster, text=text, posted_by=centre.staff)
    k = project_k_prof_get(cluster=centre.cluster, project=centre.p1)
    assert k is not None
    assert k.k_prof == Decimal("0.9")


# --- Priorities and commands ---------------------------------------------------------------------


def test_each_projects_priority_is_eq_14_of_its_k(centre):
    set_policy(centre)
    post(centre, centre.p1, "0.2")
    post(centre, centre.p2, "0.55")
    post(centre, centre.p3, "0.9")
    maths = MathsPolicy(
        k1=Decimal("0.4"), k2=Decimal("0.7"), c0=Decimal("0.5"), c1=Decimal(1), c2=Decimal(3)
    )
    rows = {row.project.code: row for row in project_priorities_get(cluster=centre.cluster)}
    assert set(rows) == {"pawsey0001", "pawsey0002", "pawsey0003"}
    for row in rows.values():
        assert row.pr_dyn == dynamic_priority(base=1000, k_prof=row.k.k_prof, policy=maths)
    assert rows["pawsey0001"].pr_dyn == Decimal(900)
    assert rows["pawsey0003"].slurm_priority == 1900
    assert (
        rows["pawsey0002"].command == "sacctmgr --immediate modify qos pawsey0002 set priority=1150"
    )


def test_without_a_policy_projects_have_a_k_but_no_priority(centre):
    post(centre, centre.p1, "0.2")
    (row,) = project_priorities_get(cluster=centre.cluster)
    assert (row.k.k_prof, row.pr_dyn, row.command) == (Decimal("0.2"), None, None)
    with pytest.raises(PriorityError, match="has no priority policy"):
        priority_actions_propose(cluster=centre.cluster)


@pytest.mark.parametrize(
    ("pr_dyn", "expected"),
    [("1149.5", 1150), ("1149.49", 1149), ("-20", 0), ("1e12", 2**32 - 2)],
)
def test_the_slurm_priority_is_pr_dyn_rounded_within_slurms_range(pr_dyn, expected):
    assert slurm_priority(Decimal(pr_dyn)) == expected


def test_proposals_are_idempotent(centre):
    set_policy(centre)
    post(centre, centre.p1, "0.2")
    post(centre, centre.p2, "0.55")
    first = priority_actions_propose(cluster=centre.cluster)
    assert sorted(action.command for action in first) == [
        "sacctmgr --immediate modify qos pawsey0001 set priority=900",
        "sacctmgr --immediate modify qos pawsey0002 set priority=1150",
    ]
    assert priority_actions_propose(cluster=centre.cluster) == []
    assert PriorityAction.objects.count() == 2


def test_a_new_priority_supersedes_the_older_proposal(centre):
    set_policy(centre)
    post(centre, centre.p1, "0.2")
    (old,) = priority_actions_propose(cluster=centre.cluster)
    post(centre, centre.p1, "0.8")
    (new,) = priority_actions_propose(cluster=centre.cluster)
    old.refresh_from_db()
    assert old.status == PriorityAction.Status.SUPERSEDED
    assert (new.status, new.priority, new.k_prof) == ("proposed", Decimal(1600), Decimal("0.8"))


def test_a_priority_that_was_executed_is_not_proposed_again(centre):
    set_policy(centre, command_template="true {qos} {priority}", execution_enabled=True)
    post(centre, centre.p1, "0.2")
    (action,) = priority_actions_propose(cluster=centre.cluster)
    priority_action_execute(action=action, reviewed_by=centre.staff)
    assert priority_actions_propose(cluster=centre.cluster) == []
    # Going to another value and back again after it ran: back is a change again.
    post(centre, centre.p1, "0.8")
    (changed,) = priority_actions_propose(cluster=centre.cluster)
    post(centre, centre.p1, "0.2")
    assert priority_actions_propose(cluster=centre.cluster) == []
    changed.refresh_from_db()
    assert changed.status == PriorityAction.Status.SUPERSEDED  # the executed one stands


def test_a_dismissed_command_is_not_proposed_again_until_the_priority_changes(centre):
    set_policy(centre)
    post(centre, centre.p1, "0.2")
    (action,) = priority_actions_propose(cluster=centre.cluster)
    priority_action_dismiss(action=action, reviewed_by=centre.staff)
    assert priority_actions_propose(cluster=centre.cluster) == []
    post(centre, centre.p1, "0.3")
    assert len(priority_actions_propose(cluster=centre.cluster)) == 1


def test_execution_is_refused_while_the_policy_does_not_enable_it(centre):
    set_policy(centre, command_template="touch /tmp/should-not-exist-{priority}")
    post(centre, centre.p1, "0.2")
    (action,) = priority_actions_propose(cluster=centre.cluster)
    with pytest.raises(PriorityError, match="execution is not enabled"):
        priority_action_execute(action=action, reviewed_by=centre.staff)
    action.refresh_from_db()
    assert (action.status, action.exit_code, action.executed_at) == ("proposed", None, None)


def test_an_enabled_policy_runs_the_command_and_records_its_output(centre):
    set_policy(centre, command_template="echo {account} {priority}", execution_enabled=True)
    post(centre, centre.p3, "0.9")
    (action,) = priority_actions_propose(cluster=centre.cluster)
    before = timezone.now()
    done = priority_action_execute(action=action, reviewed_by=centre.staff)
    action.refresh_from_db()
    assert action.status == PriorityAction.Status.EXECUTED
    assert action.exit_code == 0
    assert action.output == "pawsey0003 1900\n"
    assert action.reviewed_by == centre.staff
    assert action.executed_at is not None
    assert action.executed_at >= before - timedelta(seconds=1)
    assert done.status == action.status
    with pytest.raises(PriorityError, match="executed, not proposed"):
        priority_action_execute(action=action, reviewed_by=centre.staff)


def test_a_failing_or_missing_command_is_recorded_as_failed(centre):
    set_policy(centre, command_template="false {priority}", execution_enabled=True)
    post(centre, centre.p1, "0.2")
    (action,) = priority_actions_propose(cluster=centre.cluster)
    assert priority_action_execute(action=action, reviewed_by=centre.staff).exit_code == 1
    set_policy(centre, command_template="/nonexistent/sacctmgr {priority}", execution_enabled=True)
    (action,) = priority_actions_propose(cluster=centre.cluster)
    action = priority_action_execute(action=action, reviewed_by=centre.staff)
    assert (action.status, action.exit_code) == ("failed", -1)
    assert "sacctmgr was not found as /nonexistent/sacctmgr:" in action.output


def test_only_staff_run_or_dismiss(centre):
    set_policy(centre, command_template="true {priority}", execution_enabled=True)
    post(centre, centre.p1, "0.2")
    (action,) = priority_actions_propose(cluster=centre.cluster)
    with pytest.raises(PermissionDenied):
        priority_action_execute(action=action, reviewed_by=centre.alice)
    with pytest.raises(PermissionDenied):
        priority_action_dismiss(action=action, reviewed_by=centre.alice)


# --- The command and the task ------------------------------------------------------------------


def test_the_command_prints_the_table_and_proposes(centre):
    set_policy(centre)
    post(centre, centre.p1, "0.2")
    out = StringIO()
    call_command("priorities", "--cluster", "slurm-testbed", stdout=out)
    text = out.getvalue()
    assert "pawsey0001" in text
    assert "900" in text
    assert not PriorityAction.objects.exists()
    out = StringIO()
    call_command("priorities", "--cluster", "slurm-testbed", "--propose", stdout=out)
    assert "proposed: sacctmgr --immediate modify qos pawsey0001 set priority=900" in out.getvalue()
    assert PriorityAction.objects.count() == 1


def test_the_command_executes_only_where_the_policy_enables_it(centre):
    set_policy(centre, command_template="echo {priority}")
    post(centre, centre.p1, "0.2")
    out = StringIO()
    as_staff = ("--as", centre.staff.username)
    call_command(
        "priorities", "--cluster", "slurm-testbed", "--propose", "--execute", *as_staff, stdout=out
    )
    assert "execution is not enabled" in out.getvalue()
    assert PriorityAction.objects.get().status == "proposed"
    set_policy(centre, command_template="echo {priority}", execution_enabled=True)
    out = StringIO()
    call_command(
        "priorities", "--cluster", "slurm-testbed", "--propose", "--execute", *as_staff, stdout=out
    )
    assert "ran [executed, exit 0] echo 900" in out.getvalue()
    assert PriorityAction.objects.get().reviewed_by == centre.staff


def test_the_command_executes_only_with_a_named_reviewer(centre):
    set_policy(centre, command_template="echo {priority}", execution_enabled=True)
    post(centre, centre.p1, "0.2")
    with pytest.raises(CommandError, match="--as USERNAME"):
        call_command("priorities", "--cluster", "slurm-testbed", "--propose", "--execute")
    assert PriorityAction.objects.get().status == "proposed"


def test_an_action_being_run_is_not_run_twice(centre):
    set_policy(centre, command_template="echo {priority}", execution_enabled=True)
    post(centre, centre.p1, "0.2")
    (action,) = priority_actions_propose(cluster=centre.cluster)
    PriorityAction.objects.filter(pk=action.pk).update(executed_at=timezone.now())  # claimed
    with pytest.raises(PriorityError, match="being run by another request"):
        priority_action_execute(action=action, reviewed_by=centre.staff)


def test_the_command_prints_json(centre):
    set_policy(centre)
    post(centre, centre.p1, "0.2")
    out = StringIO()
    call_command("priorities", "--cluster", "slurm-testbed", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["policy"]["k1"] == "0.400000"
    (row,) = data["projects"]
    assert row == {
        "project": "pawsey0001", "k_prof": "0.200000", "k_source": "project", "jobs": 0,
        "priority": "900.000000", "slurm_priority": 900,
        "command": "sacctmgr --immediate modify qos pawsey0001 set priority=900",
        "last_action": None,
    }  # fmt: skip


def test_the_periodic_task_proposes_on_every_cluster_with_a_policy(centre):
    from allocations.tasks import priority_proposals_task

    set_policy(centre)
    post(centre, centre.p1, "0.2")
    assert priority_proposals_task() == {"proposed": {"slurm-testbed": 1}}
    assert priority_proposals_task() == {"proposed": {"slurm-testbed": 0}}


def test_the_demo_sets_a_policy_posts_k_and_proposes_once(centre):
    from portal.demo import _priorities
    from tests.factories import UserFactory

    UserFactory(username="staff", is_staff=True)
    lines: list[str] = []
    _priorities(centre.cluster, lines.append)
    assert PriorityPolicy.objects.filter(cluster=centre.cluster).exists()
    assert lines == ["dynamic priority on slurm-testbed: a policy, 3 proposed commands"]
    _priorities(centre.cluster, lines.append)  # a second loaddemo changes nothing
    assert PriorityAction.objects.count() == 3


def test_a_batch_of_coefficients_is_saved_whole_or_not_at_all(centre):
    from allocations.priorities.services import profiling_coefficients_post

    good = {"cluster": centre.cluster, "project": centre.p1, "k_prof": "0.5"}
    bad = {"cluster": centre.cluster, "project": centre.p2, "k_prof": "-1"}
    with pytest.raises(PriorityError):
        profiling_coefficients_post(coefficients=[good, bad], posted_by=centre.staff)
    assert not ProfilingCoefficient.objects.exists()
    made = profiling_coefficients_post(coefficients=[good, {**bad, "k_prof": "2"}],
                                       posted_by=centre.staff)  # fmt: skip
    assert [c.k_prof for c in made] == [Decimal("0.5"), Decimal(2)]
    assert {c.source for c in made} == {ProfilingCoefficient.Source.API}

"""The provisioning plan (allocations/slurm/plan.py) and the SU to billing-minutes conversion:
pure, no database, no Slurm."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting.clusters.charging import NodeUsage, charge
from accounting.clusters.slurmconf import (
    BILLING_MINUTES_PER_SERVICE_UNIT,
    billing_minutes,
    tres_billing_weights,
)
from accounting.clusters.specs import cluster_definition_load
from allocations.slurm.plan import (
    LOAD_ABOVE,
    Account,
    Action,
    PlanError,
    account_name,
    action_commands,
    action_done,
    associations_of,
    name_checked,
    plan_build,
    plan_creates,
    plan_load_file,
    plan_script,
    state_apply,
    state_parse,
)
from projects.accounts import project_code_of

ROOT = Path(__file__).resolve().parents[2]
SPECS = {
    partition.name: partition.charging
    for partition in cluster_definition_load(
        ROOT / "examples/clusters/slurm-testbed.json"
    ).partitions
}


def _slurm_billing(weights: str, *, cpus: int, memory_mb: int, gpus: int) -> int:
    """Slurm's billing of a job under PriorityFlags=MAX_TRES: the largest weighted TRES of the
    job's totals, truncated (docs/charging.md)."""
    weight = {key: float(value) for key, value in (item.split("=") for item in weights.split(","))}
    billed = [cpus * weight["CPU"], memory_mb * weight["Mem"]]
    if gpus:
        billed.append(gpus * weight["GRES/gpu"])
    return math.floor(max(billed))


# --- the conversion ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("partition", "cores", "memory_mb", "gpus", "minutes"),
    [
        ("work", 128, 245000, 0, 60),  # a whole CPU node for an hour: 128 SU
        ("work", 16, 1000, 0, 90),  # cores dominate
        ("gpu", 16, 20000, 2, 60),  # the testbed's GPU job: Slurm billed it 128
        ("gpu", 64, 245000, 8, 30),  # a whole GPU node for half an hour: 256 SU
    ],
)
def test_a_job_uses_60_billing_minutes_per_su_the_portal_charges_it(
    partition, cores, memory_mb, gpus, minutes
):
    spec = SPECS[partition]
    billing = _slurm_billing(tres_billing_weights(spec), cpus=cores, memory_mb=memory_mb, gpus=gpus)
    charged = charge(
        spec, [NodeUsage(cores=cores, memory_mb=memory_mb, gpus=gpus)],
        elapsed_seconds=minutes * 60,
    ).service_units  # fmt: skip

    # What Slurm adds to the account's GrpTRESMins usage: billing x minutes run.
    assert billing * minutes == charged * BILLING_MINUTES_PER_SERVICE_UNIT
    assert billing_minutes(charged) == billing * minutes


def test_the_testbeds_gpu_job_billed_128_is_128_su_per_hour():
    assert _slurm_billing(tres_billing_weights(SPECS["gpu"]), cpus=1, memory_mb=8000, gpus=2) == 128
    assert billing_minutes(Decimal(128)) == 7680


def test_billing_minutes_round_down_and_never_go_negative():
    assert billing_minutes(Decimal("1.999999")) == 119
    assert billing_minutes(Decimal("0.016666")) == 0
    assert billing_minutes(Decimal("-5")) == 0


@given(st.decimals(min_value=0, max_value=10**9, places=6))
def test_billing_minutes_never_exceed_the_su_left(service_units):
    minutes = billing_minutes(service_units)
    assert Decimal(minutes) <= service_units * 60 < minutes + 1


# --- reading sacctmgr --------------------------------------------------------------------------

ASSOCIATIONS = """\
root|||||normal|
root|root||||normal|
pool-cpu|||root||normal|
p001|||pool-cpu|billing=6000|normal|
p001|alice||||normal|
p001|bob||||normal|
handmade|||root|billing=10,cpu=4|normal,low|low
handmade|carol||||normal,low|low
"""
ACCOUNTS = """\
root|default root account
pool-cpu|portal-managed
p001|portal-managed
handmade|made by hand
"""


def test_associations_and_accounts_read_into_a_state():
    state = state_parse(ASSOCIATIONS.splitlines(), ACCOUNTS.splitlines())

    assert state == {
        "pool-cpu": Account(parent="root", qos=frozenset({"normal"}), default_qos=""),
        "p001": Account(
            parent="pool-cpu", users=frozenset({"alice", "bob"}), billing_minutes=6000,
            qos=frozenset({"normal"}), default_qos="",
        ),
        "handmade": Account(
            users=frozenset({"carol"}), billing_minutes=10, qos=frozenset({"normal", "low"}),
            default_qos="low", managed=False,
        ),
    }  # fmt: skip


def test_a_line_with_the_wrong_number_of_fields_is_refused():
    with pytest.raises(PlanError, match="line 1: 3 fields"):
        state_parse(["a|b|c"], [])


# --- planning ---------------------------------------------------------------------------------


def _actual() -> dict[str, Account]:
    return state_parse(ASSOCIATIONS.splitlines(), ACCOUNTS.splitlines())


def _desired() -> dict[str, Account]:
    return {
        "pool-cpu": Account(),
        "p001": Account(
            parent="pool-cpu", users=frozenset({"alice", "dave"}), billing_minutes=4000
        ),
        "p002": Account(parent="pool-cpu", users=frozenset({"erin"}), billing_minutes=600),
    }


def test_the_plan_creates_modifies_and_deletes_with_before_and_after():
    plan = plan_build(desired=_desired(), actual=_actual())

    assert plan == [
        Action("create", "p002", after={"parent": "pool-cpu", "GrpTRESMins": "billing=600"}),
        Action(
            "modify",
            "p001",
            before={"GrpTRESMins": "billing=6000"},
            after={"GrpTRESMins": "billing=4000"},
        ),
        Action("create", "p001", "dave"),
        Action("create", "p002", "erin"),
        Action("delete", "p001", "bob"),
        # Made by hand: reported, left alone.
        Action("delete", "handmade", "carol", applied=False),
        Action("delete", "handmade", before=_actual_fields_of_handmade(), applied=False),
    ]


def _actual_fields_of_handmade() -> dict[str, str]:
    return {"parent": "root", "GrpTRESMins": "billing=10", "QOS": "low,normal", "DefaultQOS": "low"}


def test_what_the_portal_did_not_create_is_deleted_only_when_told():
    plan = plan_build(desired=_desired(), actual=_actual(), delete_unmanaged=True)

    assert [(a.verb, a.target, a.applied) for a in plan if a.account == "handmade"] == [
        ("delete", "user carol in handmade", True),
        ("delete", "account handmade", True),
    ]


def test_a_portal_account_with_a_hand_made_account_under_it_is_not_deleted():
    actual = {
        "old": Account(),
        "child": Account(parent="old", managed=False),
    }
    plan = plan_build(desired={}, actual=actual)

    # sacctmgr deletes an account's whole subtree: deleting "old" would delete "child" too.
    assert [(a.target, a.applied) for a in plan] == [
        ("account child", False),
        ("account old", False),
    ]


def test_the_commands_are_sacctmgr_lines_for_the_cluster():
    plan = plan_build(desired=_desired(), actual=_actual())

    assert plan_script(plan, cluster="setonix").splitlines() == [
        "add account p002 cluster=setonix description=portal-managed parent=pool-cpu",
        "modify account where name=p002 cluster=setonix set GrpTRESMins=billing=600",
        "modify account where name=p001 cluster=setonix set GrpTRESMins=billing=4000",
        "modify account where name=p001 cluster=setonix set RawUsage=0",
        "add user dave account=p001 cluster=setonix",
        "add user erin account=p002 cluster=setonix",
        "delete user where name=bob account=p001 cluster=setonix",
    ]
    assert action_commands(plan[0], cluster="setonix") == [
        "add account p002 cluster=setonix description=portal-managed parent=pool-cpu"
        " GrpTRESMins=billing=600"
    ]


def test_actions_alike_share_a_line_because_each_line_is_a_slurmdbd_commit():
    desired = {
        "inst": Account(),
        **{
            f"p{n}": Account(parent="inst", users=frozenset({"u1", "u2"}), billing_minutes=600)
            for n in range(3)
        },
    }
    actual = {f"old{n}": Account(users=frozenset({"u9"})) for n in range(2)}

    assert plan_script(plan_build(desired=desired, actual=actual), cluster="c1").splitlines() == [
        "add account inst cluster=c1 description=portal-managed parent=root",
        "add account p0,p1,p2 cluster=c1 description=portal-managed parent=inst",
        "modify account where name=p0,p1,p2 cluster=c1 set GrpTRESMins=billing=600",
        "add user u1,u2 account=p0 cluster=c1",
        "add user u1,u2 account=p1 cluster=c1",
        "add user u1,u2 account=p2 cluster=c1",
        # One line per deletion: sacctmgr refuses a whole line for one account with jobs.
        "delete user where name=u9 account=old0 cluster=c1",
        "delete account where name=old0 cluster=c1",
        "delete user where name=u9 account=old1 cluster=c1",
        "delete account where name=old1 cluster=c1",
    ]


def test_a_line_names_at_most_40_accounts():
    desired = {f"p{n:03d}": Account() for n in range(90)}

    lines = plan_script(plan_build(desired=desired, actual={}), cluster="c1").splitlines()

    assert [line.split()[2].count(",") + 1 for line in lines] == [40, 40, 10]


def test_a_name_sacctmgr_would_have_to_quote_is_refused():
    with pytest.raises(PlanError, match="not a name Slurm accepts"):
        action_commands(Action("create", "p001", "x y"), cluster="setonix")
    with pytest.raises(PlanError):
        action_commands(Action("create", "p001;rm"), cluster="setonix")


def test_actions_survive_a_round_trip_through_json():
    for action in plan_build(desired=_desired(), actual=_actual()):
        assert Action.from_json(action.to_json()) == action


# --- properties -------------------------------------------------------------------------------

NAMES = st.sampled_from(["a1", "a2", "a3", "a4", "a5"])
USERS = st.frozensets(st.sampled_from(["u1", "u2", "u3"]), max_size=3)
PARTITION_USERS = st.frozensets(
    st.tuples(st.sampled_from(["u1", "u2", "u4"]), st.sampled_from(["work", "gpu"])), max_size=4
)
LIMITS = st.one_of(st.none(), st.integers(min_value=0, max_value=10**6))
QOS = st.sampled_from(["normal", "low", "high"])


@st.composite
def states(draw: st.DrawFn, *, actual: bool) -> dict[str, Account]:
    """Accounts whose parents come before them (a tree under root)."""
    names = draw(st.lists(NAMES, unique=True, max_size=5))
    state: dict[str, Account] = {}
    for index, name in enumerate(names):
        parent = draw(st.sampled_from(["root", *names[:index]]))
        if actual:
            default_qos: str | None = draw(st.sampled_from(["", "normal", "low"]))
            qos: frozenset[str] | None = draw(st.frozensets(QOS, min_size=1))
            managed = draw(st.booleans())
        else:
            default_qos = draw(st.one_of(st.none(), QOS))
            qos = draw(st.one_of(st.none(), st.frozensets(QOS, min_size=1)))
            managed = True
        state[name] = Account(
            parent=parent, users=draw(USERS), partition_users=draw(PARTITION_USERS),
            billing_minutes=draw(LIMITS), qos=qos, default_qos=default_qos, managed=managed,
        )  # fmt: skip
    return state


def _satisfies(state: dict[str, Account], desired: dict[str, Account]) -> bool:
    """Every wanted account is there with the wanted settings (unset ones: anything) and the
    wanted users; an account the portal did not create may keep users of its own."""
    return all(
        name in state
        and action_done(Action("modify", name, after=_after(want)), state)
        and (
            associations_of(state[name]) == associations_of(want)
            if state[name].managed
            else associations_of(state[name]) >= associations_of(want)
        )
        for name, want in desired.items()
    )


def _after(account: Account) -> dict[str, str]:
    plan = plan_build(desired={"x": account}, actual={})
    return dict(plan[0].after)


@settings(max_examples=300)
@given(states(actual=False), states(actual=True))
def test_applying_the_plan_gives_the_desired_state_and_a_second_plan_is_empty(desired, actual):
    after = state_apply(actual, plan_build(desired=desired, actual=actual))

    assert _satisfies(after, desired)
    # Whatever else is left is Slurm's own, or kept because something of Slurm's sits under it.
    for name in set(after) - set(desired):
        assert not after[name].managed or any(a.parent == name for a in after.values())
    assert [a for a in plan_build(desired=desired, actual=after) if a.applied] == []


@settings(max_examples=300)
@given(states(actual=False), states(actual=True))
def test_told_to_delete_everything_else_the_result_is_exactly_the_desired_accounts(desired, actual):
    after = state_apply(actual, plan_build(desired=desired, actual=actual, delete_unmanaged=True))

    assert set(after) == set(desired)
    assert _satisfies(after, desired)


@given(states(actual=False))
def test_the_plan_of_a_state_against_itself_is_empty(desired):
    assert plan_build(desired=desired, actual=desired) == []


@given(states(actual=False), states(actual=True))
def test_every_applied_action_is_done_in_the_state_the_plan_leads_to(desired, actual):
    plan = plan_build(desired=desired, actual=actual)
    after = state_apply(actual, plan)

    for action in plan:
        if action.applied:
            assert action_done(action, after), action


def test_names_found_in_slurm_go_on_the_line_as_they_are_and_desired_ones_in_lower_case():
    assert name_checked("Pawsey0001") == "pawsey0001"
    assert action_commands(Action("delete", "OldAcct", "JSmith"), cluster="setonix") == [
        "delete user where name=JSmith account=OldAcct cluster=setonix"
    ]


def test_a_large_creation_goes_to_sacctmgr_load_as_its_flat_file_parents_first():
    desired = {
        "pool-cpu": Account(billing_minutes=None),
        **{
            f"p{index:03d}": Account(
                parent="pool-cpu", users=frozenset({f"u{index}", "shared"}),
                billing_minutes=6000 + index, qos=frozenset({"normal", "long"}),
                default_qos="normal",
            )
            for index in range(20)
        },
    }  # fmt: skip
    actions = plan_build(desired=desired, actual={})
    creates = plan_creates(actions)
    assert len(creates) == 1 + 20 + 40 > LOAD_ABOVE
    text = plan_load_file(creates, cluster="setonix").splitlines()
    assert text[:3] == [
        "Cluster - 'setonix'",
        "Parent - 'root'",
        "Account - 'pool-cpu':Description='portal-managed'",
    ]
    assert text[3] == "Parent - 'pool-cpu'"
    assert text[4] == (
        "Account - 'p000':Description='portal-managed':GrpTRESMins=billing=6000"
        ":QOS='long,normal':DefaultQOS='normal'"
    )
    users = text[text.index("Parent - 'p000'", 5) :][:3]
    assert users == ["Parent - 'p000'", "User - 'shared'", "User - 'u0'"]
    # A small plan stays on sacctmgr's standard input, one script.
    assert (
        plan_creates(plan_build(desired={"one": Account(users=frozenset({"a"}))}, actual={})) == []
    )


# --- partitions and a pool's own account --------------------------------------------------------


def test_associations_in_a_partition_are_read_apart_from_whole_account_ones():
    lines = [*ASSOCIATIONS.splitlines(), "p001|dave|gpu||||", "p001|dave|work||||"]

    state = state_parse(lines, ACCOUNTS.splitlines())

    assert state["p001"].users == frozenset({"alice", "bob"})
    assert state["p001"].partition_users == frozenset({("dave", "gpu"), ("dave", "work")})


def test_members_associated_in_partitions_are_planned_and_removed_partition_by_partition():
    desired = {
        "p1-gpu": Account(partition_users=frozenset({("ann", "gpu"), ("ben", "gpu")})),
    }
    actual = {
        "p1-gpu": Account(users=frozenset({"ann"}), partition_users=frozenset({("cat", "gpu")})),
    }

    plan = plan_build(desired=desired, actual=actual)

    assert [(a.verb, a.user, a.partition) for a in plan] == [
        ("create", "ann", "gpu"),
        ("create", "ben", "gpu"),
        ("delete", "ann", ""),
        ("delete", "cat", "gpu"),
    ]
    assert plan[0].target == "user ann in p1-gpu (partition gpu)"
    assert plan_script(plan, cluster="setonix").splitlines() == [
        "add user ann,ben account=p1-gpu partition=gpu cluster=setonix",
        "delete user where name=ann account=p1-gpu cluster=setonix",
        "delete user where name=cat account=p1-gpu partition=gpu cluster=setonix",
    ]
    assert all(action_done(action, state_apply(actual, plan)) for action in plan)
    assert Action.from_json(plan[3].to_json()) == plan[3]


def test_a_large_creation_names_each_users_partition_in_the_load_file():
    desired = {
        f"p{index:02d}-gpu": Account(partition_users=frozenset({("ann", "gpu"), ("ann", "gpu2")}))
        for index in range(20)
    }

    creates = plan_creates(plan_build(desired=desired, actual={}))
    text = plan_load_file(creates, cluster="setonix").splitlines()

    at = text.index("Parent - 'p00-gpu'")
    assert text[at : at + 3] == [
        "Parent - 'p00-gpu'",
        "User - 'ann':Partition='gpu'",
        "User - 'ann':Partition='gpu2'",
    ]


def test_a_pools_own_account_is_the_project_code_and_its_suffix_and_back():
    assert account_name("Pawsey0001", "-gpu") == "pawsey0001-gpu"
    assert project_code_of("pawsey0001-gpu", {"-gpu", "-mwa"}) == "pawsey0001"
    assert project_code_of("pawsey0001", {"-gpu"}) == "pawsey0001"
    # The longest suffix wins; an account that is only a suffix stands for itself.
    assert project_code_of("p1-big-gpu", {"-gpu", "-big-gpu"}) == "p1"
    assert project_code_of("-gpu", {"-gpu"}) == "-gpu"

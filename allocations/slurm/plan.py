"""Provisioning Slurm from the portal: the associations the portal wants, those Slurm has, the
plan between them and the ``sacctmgr`` lines that carry it out. Pure module.

A state is, per Slurm account of one cluster, its parent, its users (one association each, or
one per partition where the pool names its partitions), its ``GrpTRESMins=billing`` limit,
its QOS list and default QOS, and whether the portal created it (its description is
:data:`MANAGED_DESCRIPTION`). The plan creates what is missing, modifies what differs (each
action with the values before and after) and deletes what the portal created and no longer
wants. What the portal did not create is never deleted unless ``delete_unmanaged``
is given: its deletion is still planned, as drift left alone (``applied=False``), so a check
shows the command that would remove it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from kit.errors import ApplicationError
from projects.accounts import pool_account

MANAGED_DESCRIPTION: Final = "portal-managed"
ROOT_ACCOUNT: Final = "root"
# What the plan reads: ``sacctmgr --parsable2 --noheader show associations format=...`` and
# ``sacctmgr --parsable2 --noheader show accounts format=...``, columns in this order.
ASSOCIATION_FORMAT: Final = "Account,User,Partition,ParentName,GrpTRESMins,QOS,DefaultQOS"
ACCOUNT_FORMAT: Final = "Account,Descr"
# Slurm's account and user names, kept to what needs no quoting on a sacctmgr line.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]*$")

Verb = Literal["create", "modify", "delete"]


class PlanError(ApplicationError):
    """A name sacctmgr could not be given safely, or output that is not sacctmgr's."""


@dataclass(frozen=True)
class Account:
    """One Slurm account as wanted or found. In a desired state, ``qos`` and ``default_qos``
    of None mean "the portal does not set them" (whatever Slurm has is kept). A user holds an
    association with the whole account (``users``) or one per partition (``partition_users``,
    (user, partition) pairs: the account runs that user's jobs in those partitions only)."""

    parent: str = ROOT_ACCOUNT
    users: frozenset[str] = frozenset()
    partition_users: frozenset[tuple[str, str]] = frozenset()
    billing_minutes: int | None = None  # GrpTRESMins=billing=N; None: no limit
    qos: frozenset[str] | None = None
    default_qos: str | None = None
    managed: bool = True


State = Mapping[str, Account]


def associations_of(account: Account) -> frozenset[tuple[str, str]]:
    """An account's user associations as (user, partition) pairs; partition "" for the whole
    account."""
    return frozenset({(user, "") for user in account.users}) | account.partition_users


def _with_associations(account: Account, pairs: Iterable[tuple[str, str]]) -> Account:
    pairs = set(pairs)
    return replace(
        account,
        users=frozenset(user for user, partition in pairs if not partition),
        partition_users=frozenset(pair for pair in pairs if pair[1]),
    )


@dataclass(frozen=True)
class Action:
    """One change: to an account (``user`` empty) or to a user's association with it (in one
    partition when ``partition`` is given)."""

    verb: Verb
    account: str
    user: str = ""
    partition: str = ""
    before: Mapping[str, str] = field(default_factory=dict)
    after: Mapping[str, str] = field(default_factory=dict)
    applied: bool = True  # False: drift reported, not the portal's to change

    @property
    def target(self) -> str:
        if not self.user:
            return f"account {self.account}"
        where = f" (partition {self.partition})" if self.partition else ""
        return f"user {self.user} in {self.account}{where}"

    def to_json(self) -> dict[str, object]:
        return {
            "verb": self.verb, "account": self.account, "user": self.user,
            "partition": self.partition, "before": dict(self.before), "after": dict(self.after),
            "applied": self.applied,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Action:
        before, after = data.get("before") or {}, data.get("after") or {}
        assert isinstance(before, dict)
        assert isinstance(after, dict)
        return cls(
            verb=str(data["verb"]),  # type: ignore[arg-type]
            account=str(data["account"]), user=str(data.get("user") or ""),
            partition=str(data.get("partition") or ""),
            before={str(k): str(v) for k, v in before.items()},
            after={str(k): str(v) for k, v in after.items()},
            applied=bool(data.get("applied", True)),
        )  # fmt: skip


def _word(name: str) -> str:
    """A name as it goes on a sacctmgr line, unchanged; PlanError when it would need quoting."""
    if not _NAME.match(name):
        raise PlanError(f"{name!r} is not a name Slurm accepts for an account or user")
    return name


def name_checked(name: str) -> str:
    """A Slurm account or user name as Slurm stores it (lower case); PlanError when it holds
    what a sacctmgr line would have to quote."""
    lowered = name.strip().lower()
    if not _NAME.match(lowered):
        raise PlanError(f"{name!r} is not a name Slurm accepts for an account or user")
    return lowered


def account_name(code: str, suffix: str = "") -> str:
    """The Slurm account of a project in a pool: its code, and the pool's account suffix when
    the pool gives its projects accounts of their own (``pawsey0001-gpu``)."""
    return name_checked(pool_account(code, suffix))


# --- reading Slurm ----------------------------------------------------------------------------


def _billing_of(tres: str) -> int | None:
    """The billing minutes of a GrpTRESMins value such as ``billing=6000,cpu=10``."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key.strip().lower() == "billing" and value.strip():
            return int(value)
    return None


def state_parse(associations: Iterable[str], accounts: Iterable[str]) -> dict[str, Account]:
    """The accounts of one cluster from sacctmgr's output in :data:`ASSOCIATION_FORMAT` (run with
    ``where cluster=NAME``) and :data:`ACCOUNT_FORMAT`. The ``root`` account is left out."""
    descriptions: dict[str, str] = {}
    for line in accounts:
        if not line.strip():
            continue
        account, _, description = line.rstrip("\r\n").partition("|")
        descriptions[account.strip()] = description.strip()
    rows: dict[str, dict[str, str]] = {}
    users: dict[str, set[tuple[str, str]]] = {}
    width = len(ASSOCIATION_FORMAT.split(","))
    for number, line in enumerate(associations, start=1):
        if not line.strip():
            continue
        values = [value.strip() for value in line.rstrip("\r\n").split("|")]
        if len(values) != width:
            raise PlanError(f"association line {number}: {len(values)} fields, expected {width}")
        account, user, partition, parent, grp_tres_mins, qos, default_qos = values
        if account == ROOT_ACCOUNT:
            continue
        users.setdefault(account, set())
        if user:
            users[account].add((user, partition))
        else:
            rows[account] = {
                "parent": parent or ROOT_ACCOUNT, "tres": grp_tres_mins, "qos": qos,
                "default_qos": default_qos,
            }  # fmt: skip
    return {
        account: _with_associations(
            Account(
                parent=row["parent"],
                billing_minutes=_billing_of(row["tres"]),
                qos=frozenset(item for item in row["qos"].split(",") if item),
                default_qos=row["default_qos"],
                managed=descriptions.get(account, "") == MANAGED_DESCRIPTION,
            ),
            users.get(account, ()),
        )
        for account, row in rows.items()
    }


# --- planning ----------------------------------------------------------------------------------


def _fields(account: Account) -> dict[str, str]:
    """An account's settings the way sacctmgr names and shows them."""
    limit = account.billing_minutes
    shown = {"parent": account.parent, "GrpTRESMins": "" if limit is None else f"billing={limit}"}
    if account.qos is not None:
        shown["QOS"] = ",".join(sorted(account.qos))
    if account.default_qos is not None:
        shown["DefaultQOS"] = account.default_qos
    return shown


def _depth(name: str, parents: Mapping[str, str]) -> int:
    depth, seen = 0, {name}
    while (parent := parents.get(name, ROOT_ACCOUNT)) != ROOT_ACCOUNT and parent not in seen:
        seen.add(parent)
        name, depth = parent, depth + 1
    return depth


def plan_build(*, desired: State, actual: State, delete_unmanaged: bool = False) -> list[Action]:
    """The actions that turn ``actual`` into ``desired``, in the order sacctmgr must run them:
    accounts created (parents first) and modified, users added, users removed, accounts
    deleted (children first). Deletions of what the portal did not create are listed with
    ``applied=False`` unless ``delete_unmanaged``."""
    created: list[Action] = []
    modified: list[Action] = []
    users_added: list[Action] = []
    users_removed: list[Action] = []
    for name, wanted in desired.items():
        found = actual.get(name)
        if found is None:
            created.append(Action("create", name, after=_fields(wanted)))
            users_added += [
                Action("create", name, user, partition)
                for user, partition in sorted(associations_of(wanted))
            ]
            continue
        before, after = _fields(found), _fields(wanted)
        changed = {key for key in after if before.get(key) != after[key]}
        if changed:
            modified.append(
                Action(
                    "modify", name,
                    before={key: before.get(key, "") for key in sorted(changed)},
                    after={key: after[key] for key in sorted(changed)},
                )
            )  # fmt: skip
        wanted_pairs, found_pairs = associations_of(wanted), associations_of(found)
        users_added += [
            Action("create", name, user, partition)
            for user, partition in sorted(wanted_pairs - found_pairs)
        ]
        users_removed += [
            Action("delete", name, user, partition, applied=found.managed or delete_unmanaged)
            for user, partition in sorted(found_pairs - wanted_pairs)
        ]

    # An account stays when it is wanted, or when its deletion is not the portal's to make, or
    # when an account that stays sits under it (sacctmgr deletes a whole subtree).
    final_parents = {name: account.parent for name, account in actual.items()}
    final_parents.update({name: account.parent for name, account in desired.items()})
    leaving = {
        name
        for name, account in actual.items()
        if name not in desired and (account.managed or delete_unmanaged)
    }
    while blocked := {
        final_parents[name]
        for name in final_parents
        if name not in leaving and final_parents[name] in leaving
    }:
        leaving -= blocked
    deleted: list[Action] = []
    for name in sorted(
        (name for name in actual if name not in desired),
        key=lambda name: (-_depth(name, final_parents), name),
    ):
        account = actual[name]
        deleted += [
            Action("delete", name, user, partition, applied=name in leaving)
            for user, partition in sorted(associations_of(account))
        ]
        deleted.append(Action("delete", name, before=_fields(account), applied=name in leaving))

    created.sort(key=lambda action: (_depth(action.account, final_parents), action.account))
    modified.sort(key=lambda action: (_depth(action.account, final_parents), action.account))
    return [*created, *modified, *users_added, *users_removed, *deleted]


def state_apply(state: State, actions: Sequence[Action]) -> dict[str, Account]:
    """What Slurm holds after the applied ``actions``: the plan's meaning, for tests and for
    telling which actions of a failed run took effect."""
    result = dict(state)
    for action in actions:
        if not action.applied:
            continue
        if action.user:
            account = result[action.account]
            pair = {(action.user, action.partition)}
            pairs = (
                associations_of(account) | pair
                if action.verb == "create"
                else associations_of(account) - pair
            )
            result[action.account] = _with_associations(account, pairs)
        elif action.verb == "delete":
            result.pop(action.account, None)
        else:
            base = result.get(action.account, Account(users=frozenset(), qos=frozenset()))
            if action.verb == "create":
                base = replace(base, default_qos="")
            result[action.account] = _with_fields(base, action.after)
    return result


def _with_fields(account: Account, shown: Mapping[str, str]) -> Account:
    changes: dict[str, object] = {}
    if "parent" in shown:
        changes["parent"] = shown["parent"]
    if "GrpTRESMins" in shown:
        changes["billing_minutes"] = _billing_of(shown["GrpTRESMins"])
    if "QOS" in shown:
        changes["qos"] = frozenset(item for item in shown["QOS"].split(",") if item)
    if "DefaultQOS" in shown:
        changes["default_qos"] = shown["DefaultQOS"]
    return replace(account, **changes)  # type: ignore[arg-type]


def action_done(action: Action, state: State) -> bool:
    """Does ``state`` (read from Slurm after a run) show the action's effect?"""
    found = state.get(action.account)
    if action.user:
        present = found is not None and (action.user, action.partition) in associations_of(found)
        return present if action.verb == "create" else not present
    if action.verb == "delete":
        return found is None
    return found is not None and all(_fields(found).get(k) == v for k, v in action.after.items())


# --- sacctmgr lines ----------------------------------------------------------------------------


def _settings(shown: Mapping[str, str]) -> list[str]:
    words = []
    for key, value in shown.items():
        if key == "GrpTRESMins":
            words.append(f"GrpTRESMins={value or 'billing=-1'}")
        else:
            words.append(f"{key}={value}")
    return words


def action_commands(action: Action, *, cluster: str) -> list[str]:
    """The sacctmgr lines (without ``sacctmgr -i``) that carry out one action.

    A new limit resets the account's usage (``RawUsage=0``): the limit is the SU *remaining*,
    so Slurm must count from zero against it. sacctmgr 22.05 ignores every other setting on a
    line that sets RawUsage, so the reset is a line of its own."""
    account = _word(action.account)
    where = f"cluster={_word(cluster)}"
    if action.user:
        user = _word(action.user)
        if action.partition:
            where = f"partition={_word(action.partition)} {where}"
        if action.verb == "create":
            return [f"add user {user} account={account} {where}"]
        return [f"delete user where name={user} account={account} {where}"]
    if action.verb == "delete":
        return [f"delete account where name={account} {where}"]
    settings = _settings(action.after)
    if action.verb == "create":
        settings = [word for word in settings if word != "GrpTRESMins=billing=-1"]
        lines = [
            f"add account {account} {where} description={MANAGED_DESCRIPTION} " + " ".join(settings)
        ]
    else:
        lines = [f"modify account where name={account} {where} set " + " ".join(settings)]
    if action.verb == "modify" and "GrpTRESMins" in action.after:
        lines.append(f"modify account where name={account} {where} set RawUsage=0")
    return [line.rstrip() for line in lines]


# Names per sacctmgr line: sacctmgr reads its script in lines of a few kB.
NAMES_PER_LINE: Final = 40


def _chunks(names: list[str]) -> list[str]:
    return [",".join(names[i : i + NAMES_PER_LINE]) for i in range(0, len(names), NAMES_PER_LINE)]


def _grouped(pairs: Iterable[tuple[tuple[str, ...], str]]) -> list[tuple[tuple[str, ...], str]]:
    """(key, name) pairs as (key, "name,name,...") in order of each key's first appearance."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for key, name in pairs:
        groups.setdefault(key, []).append(name)
    return [(key, chunk) for key, names in groups.items() for chunk in _chunks(names)]


# A plan creating more associations than this goes through ``sacctmgr load``: one slurmdbd
# commit for all of them (1,000 accounts and 10,000 users in ~30 s on the testbed, where a
# line per account of users takes ~0.6 s each).
LOAD_ABOVE: Final = 40


def plan_creates(actions: Sequence[Action]) -> list[Action]:
    """The applied creations of a plan, when there are enough for ``sacctmgr load`` to pay."""
    creates = [action for action in actions if action.applied and action.verb == "create"]
    return creates if len(creates) > LOAD_ABOVE else []


def _quoted(value: str) -> str:
    """A QOS list or name in load's quotes: ``'normal,long'``."""
    return "'" + ",".join(_word(part) for part in value.split(",")) + "'"


def plan_load_file(creates: Sequence[Action], *, cluster: str) -> str:
    """The creations of a plan as the flat file ``sacctmgr load`` reads (the format of
    ``sacctmgr dump``): accounts under each ``Parent`` line, parents before children, then each
    account's users under a ``Parent`` line of its own. load only adds: what exists stays."""
    accounts = [action for action in creates if not action.user]
    lines = [f"Cluster - '{_word(cluster)}'"]
    parent = None
    for action in accounts:  # plan_build orders them parents first
        if action.after["parent"] != parent:
            parent = action.after["parent"]
            lines.append(f"Parent - '{_word(parent)}'")
        settings = [f"Description='{MANAGED_DESCRIPTION}'"]
        if action.after.get("GrpTRESMins"):
            settings.append(f"GrpTRESMins={action.after['GrpTRESMins']}")
        for key in ("QOS", "DefaultQOS"):
            if action.after.get(key):
                settings.append(f"{key}={_quoted(action.after[key])}")
        lines.append(f"Account - '{_word(action.account)}':" + ":".join(settings))
    users: dict[str, list[str]] = {}
    for action in creates:
        if action.user:
            partition = f":Partition='{_word(action.partition)}'" if action.partition else ""
            users.setdefault(action.account, []).append(f"User - '{_word(action.user)}'{partition}")
    for account, user_lines in users.items():
        lines.append(f"Parent - '{_word(account)}'")
        lines += user_lines
    return "".join(f"{line}\n" for line in lines)


def plan_script(actions: Sequence[Action], *, cluster: str) -> str:
    """One sacctmgr script for the applied actions: ``sacctmgr -i`` reads it on its standard
    input, one command a line, and runs every line even when one fails.

    Every line costs slurmdbd a commit (about half a second on the testbed), so actions that
    can share a line do: accounts created with the same settings, the same limit set on
    several accounts, one usage reset, and the users added to one account. Lines keep the
    plan's order: parents are created before children, and deletions come last, children
    first."""
    where = f"cluster={_word(cluster)}"
    applied = [action for action in actions if action.applied]
    accounts = [action for action in applied if not action.user]
    creates = [action for action in accounts if action.verb == "create"]
    settings_of = {
        action.account: tuple(
            word for word in _settings(action.after) if not word.startswith("GrpTRESMins=")
        )
        for action in creates
    }
    lines = [
        f"add account {names} {where} description={MANAGED_DESCRIPTION} {' '.join(key)}".rstrip()
        for key, names in _grouped(
            (settings_of[action.account], _word(action.account)) for action in creates
        )
    ]
    changes = [
        (tuple(_settings({"GrpTRESMins": action.after["GrpTRESMins"]})), action.account)
        for action in creates
        if action.after.get("GrpTRESMins")
    ] + [
        (tuple(_settings(action.after)), action.account)
        for action in accounts
        if action.verb == "modify"
    ]
    lines += [
        f"modify account where name={names} {where} set {' '.join(key)}"
        for key, names in _grouped((key, _word(name)) for key, name in changes)
    ]
    lines += [
        f"modify account where name={names} {where} set RawUsage=0"
        for names in _chunks(
            [
                _word(action.account)
                for action in accounts
                if action.verb == "modify" and "GrpTRESMins" in action.after
            ]
        )
    ]
    lines += [
        f"add user {names} account={account} {partition}{where}"
        for (account, partition), names in _grouped(
            (
                (
                    _word(action.account),
                    f"partition={_word(action.partition)} " if action.partition else "",
                ),
                _word(action.user),
            )
            for action in applied
            if action.user and action.verb == "create"
        )
    ]
    # sacctmgr refuses a whole deletion when one of its associations has jobs that are still
    # running or have only just ended: each deletion has a line, so one refusal blocks no other.
    lines += [
        line
        for action in applied
        if action.verb == "delete"
        for line in action_commands(action, cluster=cluster)
    ]
    return "".join(f"{line}\n" for line in lines)

"""Read ``sacctmgr --parsable2 show associations`` output. Pure module.

Onboarding a centre that already runs Slurm: its accounts become projects and its
account-user associations memberships. Columns may come in any order; ``Account`` and ``User``
are required, ``ParentName`` and ``Cluster`` are used when present.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from kit.errors import ApplicationError

# Accounts that organise the tree rather than fund work.
STRUCTURAL_ACCOUNTS = frozenset({"root"})


class AssociationsError(ApplicationError):
    """The input is not sacctmgr association output; the message says why."""


@dataclass
class Associations:
    """Accounts with their users and parents, as read."""

    accounts: dict[str, set[str]] = field(default_factory=dict)  # account -> users
    parents: dict[str, str] = field(default_factory=dict)
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)  # line number, why
    # Rows left out because their Cluster column names another Slurm cluster, per name.
    other_clusters: Counter[str] = field(default_factory=Counter)
    rows_matched: int = 0


def associations_parse(lines: Iterable[str], *, cluster: str | None = None) -> Associations:
    """Collect accounts and their users; rows of other clusters are left out (and counted) when
    the output has a Cluster column and ``cluster``, Slurm's name of the cluster, is given.
    Raises :class:`AssociationsError` when rows were read and none is of that cluster: a
    portal cluster named unlike Slurm's ClusterName would otherwise create nothing, silently."""
    result = Associations()
    columns: dict[str, int] | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        values = line.split("|")
        if columns is None:
            columns = {name.strip(): index for index, name in enumerate(values)}
            missing = [name for name in ("Account", "User") if name not in columns]
            if missing:
                raise AssociationsError(
                    f"line {number}: header lacks {', '.join(missing)} "
                    "(use: sacctmgr --parsable2 show associations format=Account,User,ParentName)"
                )
            continue
        if len(values) != len(columns):
            result.skipped_lines.append(
                (number, f"{len(values)} fields, header has {len(columns)}")
            )
            continue

        def value(name: str, row: list[str] = values, layout: dict[str, int] = columns) -> str:
            index = layout.get(name)
            return row[index].strip() if index is not None else ""

        if cluster and "Cluster" in columns and value("Cluster") not in ("", cluster):
            result.other_clusters[value("Cluster")] += 1
            continue
        result.rows_matched += 1
        account = value("Account")
        if not account or account in STRUCTURAL_ACCOUNTS:
            continue
        users = result.accounts.setdefault(account, set())
        if value("User"):
            users.add(value("User"))
        if value("ParentName"):
            result.parents[account] = value("ParentName")
    if columns is None:
        raise AssociationsError("empty input: no header line")
    if cluster and result.other_clusters and not result.rows_matched:
        held = ", ".join(sorted(result.other_clusters))
        raise AssociationsError(
            f"no row is of this cluster: the file holds clusters {held}; this cluster's Slurm"
            f" name is {cluster}; set slurm_cluster_name in the cluster's spec"
        )
    return result

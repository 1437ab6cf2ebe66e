"""The Slurm account naming rule, both ways: which account a project's jobs run under in a
pool, and which project an account books to. Pure: strings in, strings out.

A project's code is its Slurm account. A pool may give its projects accounts of their own, the
code and the pool's suffix (``pawsey0001-gpu``), limited to that pool's SU alone. The import
(accounting), the accounts sync and the provisioning (allocations) all read accounts with this
one rule, over the suffixes of the pools on the cluster in question
(``projects.selectors.account_suffixes``).
"""

from __future__ import annotations

from collections.abc import Iterable


def pool_account(code: str, suffix: str = "") -> str:
    """The Slurm account of project ``code`` in a pool with account ``suffix`` ("" when the
    pool books to the project's own account), as Slurm stores it: lower case."""
    return (code + suffix).strip().lower()


def project_code_of(account: str, suffixes: Iterable[str]) -> str:
    """The project code a Slurm account stands for, the inverse of :func:`pool_account`: the
    account less the longest of the cluster's pool ``suffixes`` it ends with (unchanged when
    none). Callers look for a project with the account's own name first."""
    for suffix in sorted((s for s in suffixes if s), key=len, reverse=True):
        if account.endswith(suffix) and len(account) > len(suffix):
            return account[: -len(suffix)]
    return account


def account_candidates(account: str, suffixes: Iterable[str]) -> tuple[str, ...]:
    """The project codes ``account`` may book to, in order: its own name, then the code it
    stands for in a pool of the cluster."""
    code = project_code_of(account, suffixes)
    return (account,) if code == account else (account, code)


def submit_commands(account: str, partitions: Iterable[str]) -> list[str]:
    """How to run a job under ``account``: one ``sbatch`` line per partition of the pool (the
    project page and su-balance show these), or the account alone for a pool without one."""
    lines = [f"sbatch --account={account} --partition={name}" for name in sorted(partitions)]
    return lines or [f"sbatch --account={account}"]

"""Running a reviewed Slurm command (enforcement and priority actions): one way for both.

The command was rendered from a staff-set template with every value shell-quoted; it is split
with shlex and run without a shell, with a time limit, and what it printed is kept (the tail,
bounded) for the audit trail. A bare Slurm program name (``sacctmgr``, ``scontrol``) is run
from ``SLURM_BIN_DIR`` when that is set (a centre whose Slurm is outside the web host's PATH),
else found on the PATH.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from django.conf import settings

COMMAND_TIMEOUT_SECONDS: Final = 120
SLURM_PROGRAMS: Final = frozenset({"sacctmgr", "scontrol", "sacct", "squeue", "sinfo"})
OUTPUT_KEPT_CHARS: Final = 20000


@dataclass(frozen=True)
class CommandOutcome:
    exit_code: int  # -1 when the command could not be run or timed out
    output: str

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0


def slurm_command_run(command: str) -> CommandOutcome:
    """Run ``command`` without a shell; never raises for a failing or missing command."""
    try:
        argv = shlex.split(command)
    except ValueError as error:
        return CommandOutcome(exit_code=-1, output=f"{type(error).__name__}: {error}")
    return slurm_program_run(argv)


def slurm_program_run(
    argv: list[str],
    *,
    stdin: str | None = None,
    keep: int = OUTPUT_KEPT_CHARS,
    data: bool = False,
) -> CommandOutcome:
    """Run ``argv`` (a Slurm program and its arguments) without a shell, ``stdin`` on its
    standard input; the last ``keep`` characters of what it printed are kept. Never raises.

    With ``data``, the output is read, not shown: a run that succeeds keeps its whole standard
    output and nothing of its standard error (a warning is not a row, and a centre's thousands
    of associations are not cut to ``keep``)."""
    argv = list(argv)
    if argv and argv[0] in SLURM_PROGRAMS and settings.SLURM_BIN_DIR:
        argv[0] = str(Path(settings.SLURM_BIN_DIR) / argv[0])
    try:
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True,
            timeout=COMMAND_TIMEOUT_SECONDS, check=False,
        )  # fmt: skip
    except (OSError, ValueError, subprocess.TimeoutExpired) as error:
        return CommandOutcome(exit_code=-1, output=_why_not_run(argv[0] if argv else "", error))
    if data and done.returncode == 0:
        return CommandOutcome(exit_code=0, output=done.stdout)
    return CommandOutcome(exit_code=done.returncode, output=(done.stdout + done.stderr)[-keep:])


def _why_not_run(program: str, error: BaseException) -> str:
    """Why ``program`` did not run, in a sentence a centre's staff can act on."""
    name = Path(program).name
    if isinstance(error, FileNotFoundError):
        if "/" not in program:
            where = f"on the web host's PATH ({os.environ.get('PATH', '')})"
        elif settings.SLURM_BIN_DIR and program == str(Path(settings.SLURM_BIN_DIR) / name):
            where = f"as {program} (SLURM_BIN_DIR)"
        else:
            where = f"as {program}"
        return (
            f"{name} was not found {where}: install Slurm's client commands on this host "
            "(Debian: slurm-client) with the cluster's slurm.conf and munge key, or set "
            "SLURM_BIN_DIR to the directory that holds them"
        )
    if isinstance(error, PermissionError):
        return f"{program} may not be run by the portal's user ({error.strerror}): check its mode"
    if isinstance(error, subprocess.TimeoutExpired):
        return (
            f"{name} did not answer within {COMMAND_TIMEOUT_SECONDS} s: is slurmdbd (or "
            "slurmctld) running and reachable from this host?"
        )
    return f"{name} could not be run: {type(error).__name__}: {error}"

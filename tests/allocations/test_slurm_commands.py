"""The one runner of reviewed Slurm commands (allocations/slurm/commands.py): a missing
program is reported in words, never raised, and SLURM_BIN_DIR says where Slurm lives."""

from __future__ import annotations

from allocations.slurm.commands import slurm_command_run


def test_a_missing_sacctmgr_is_reported_clearly_not_raised(settings, tmp_path):
    settings.SLURM_BIN_DIR = str(tmp_path / "no-such-dir")

    outcome = slurm_command_run("sacctmgr -i modify account name=pawsey0001 set qos=normal")

    assert not outcome.succeeded
    assert outcome.exit_code == -1
    assert outcome.output == (
        f"sacctmgr was not found as {tmp_path / 'no-such-dir' / 'sacctmgr'} (SLURM_BIN_DIR): "
        "install Slurm's client commands on this host (Debian: slurm-client) with the cluster's "
        "slurm.conf and munge key, or set SLURM_BIN_DIR to the directory that holds them"
    )


def test_a_sacctmgr_missing_from_the_path_names_the_path_it_was_looked_for_on(
    settings, tmp_path, monkeypatch
):
    settings.SLURM_BIN_DIR = ""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    outcome = slurm_command_run("sacctmgr show accounts")

    assert outcome.output.startswith(
        f"sacctmgr was not found on the web host's PATH ({tmp_path / 'empty-bin'}): install"
    )
    assert "FileNotFoundError" not in outcome.output


def test_a_sacctmgr_the_portal_may_not_run_says_so(settings, tmp_path):
    (tmp_path / "sacctmgr").write_text("#!/bin/sh\n")
    (tmp_path / "sacctmgr").chmod(0o644)  # not executable
    settings.SLURM_BIN_DIR = str(tmp_path)

    outcome = slurm_command_run("sacctmgr show accounts")

    assert outcome.output.startswith(f"{tmp_path / 'sacctmgr'} may not be run by the portal's")


def test_slurm_programs_run_from_slurm_bin_dir(settings, tmp_path):
    fake = tmp_path / "sacctmgr"
    fake.write_text('#!/bin/sh\necho "ran $0 $@"\n')
    fake.chmod(0o755)
    settings.SLURM_BIN_DIR = str(tmp_path)

    outcome = slurm_command_run("sacctmgr -i modify qos normal set priority=10")

    assert outcome.succeeded
    assert outcome.output == f"ran {fake} -i modify qos normal set priority=10\n"


def test_other_programs_are_run_as_written(settings, tmp_path):
    settings.SLURM_BIN_DIR = str(tmp_path / "no-such-dir")

    outcome = slurm_command_run("echo sacctmgr is not the program here")

    assert outcome.succeeded
    assert outcome.output == "sacctmgr is not the program here\n"

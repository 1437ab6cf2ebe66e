"""What the testbed writes and how it reads its settings: no daemon needed."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm_testbed import (
    ROOT,
    RUNTIME_BASE,
    Mariadb,
    Ports,
    Testbed,
    TestbedError,
    default_directory,
    main,
    unsearchable,
)


@pytest.fixture
def closed() -> Iterator[Path]:
    """A directory made as `mktemp -d` makes one, mode 0700, in /tmp: like a home directory, a
    place a checkout may be that munged's users may not search. (pytest's tmp_path is below
    one such directory already, so it cannot show the difference.)"""
    made = Path(tempfile.mkdtemp(prefix="testbed-closed-", dir="/tmp"))
    try:
        yield made
    finally:
        shutil.rmtree(made)


def test_every_node_of_the_spec_gets_its_own_slurmd_port_from_the_first():
    testbed = Testbed(ports=Ports(slurmctld=20017, slurmdbd=20019, slurmd_first=20100))

    assert [(node.name, node.port) for node in testbed.nodes] == [
        ("nid1001", 20100), ("nid1002", 20101), ("nid1003", 20102), ("nid1004", 20103),
        ("nid2001", 20104), ("nid2002", 20105),
    ]  # fmt: skip
    conf = testbed.slurm_conf_text()
    assert "SlurmctldPort=20017\n" in conf
    assert "AccountingStoragePort=20019\n" in conf
    assert "DbdPort=20019\n" in testbed.slurmdbd_conf_text()


def test_ports_come_from_the_environment_and_a_bad_one_is_refused_by_name():
    assert Ports.from_environ({"SLURM_TESTBED_SLURMCTLD_PORT": "17817"}) == Ports(slurmctld=17817)
    with pytest.raises(TestbedError, match="SLURM_TESTBED_SLURMD_PORT='80'"):
        Ports.from_environ({"SLURM_TESTBED_SLURMD_PORT": "80"})


def test_two_directories_keep_their_accounting_in_two_databases(tmp_path):
    one, other = Testbed(tmp_path / "one"), Testbed(tmp_path / "other")

    assert one.database != other.database
    assert f"StorageLoc={one.database}\n" in one.slurmdbd_conf_text()
    assert str(tmp_path / "one" / "run" / "munge.socket") in one.slurm_conf_text()


def test_the_gpu_nodes_get_one_device_file_per_gpu(tmp_path):
    gres = Testbed(tmp_path).gres_conf_text()

    assert f"NodeName=nid[2001-2002] Name=gpu File={tmp_path}/dev/gpu[0-7]\n" in gres
    assert "nid100" not in gres


def test_the_mariadb_url_gives_host_port_user_and_password():
    assert Mariadb.from_url("mysql://slurm:s%40cret@db.example:3307") == Mariadb(
        host="db.example", port=3307, user="slurm", password="s@cret"
    )
    with pytest.raises(TestbedError, match="expected mysql://"):
        Mariadb.from_url("postgres://127.0.0.1")


def test_by_default_it_lives_outside_the_checkout_in_a_place_everyone_may_search(
    monkeypatch, capsys
):
    monkeypatch.delenv("SLURM_TESTBED_DIR", raising=False)
    testbed = Testbed.from_environ({})

    assert testbed.directory == default_directory() == default_directory(ROOT)
    assert testbed.directory.parent == RUNTIME_BASE
    for written in (testbed.munge_socket, testbed.slurm_conf, testbed.state_dir, testbed.log_dir):
        assert not written.is_relative_to(ROOT), written
    # munged's rule for its socket, whatever the modes of the checkout's parents are.
    for parent in testbed.munge_socket.parents:
        if parent.exists():
            assert parent.stat().st_mode & stat.S_IXOTH, parent
    # What `eval "$(scripts/slurm-testbed env)"` gives a shell, and `stop` finds again.
    assert main(["env"]) == 0
    assert f"export SLURM_TESTBED_DIR={testbed.directory}\n" in capsys.readouterr().out


def test_each_checkout_has_its_own_directory_and_always_the_same(closed):
    one, other = closed / "one" / "portal", closed / "other" / "portal"
    one.mkdir(parents=True)
    (closed / "link").symlink_to(closed / "one")

    assert default_directory(one) != default_directory(other)
    # The same checkout, however it is reached.
    assert default_directory(one) == default_directory(closed / "link" / "portal")
    assert default_directory(one).name.startswith("slurm-testbed-")


def test_the_directory_not_everyone_may_search_is_named(closed):
    assert unsearchable(closed / "portal" / "var" / "slurm-testbed" / "run") == closed
    closed.chmod(0o755)
    assert unsearchable(closed / "portal" / "var" / "slurm-testbed" / "run") is None


def test_a_testbed_directory_below_a_closed_one_is_refused_with_the_reason(closed):
    reason = f"{closed} (mode 0700) is not searchable by everyone, and munged refuses"
    with pytest.raises(TestbedError, match=re.escape(reason)):
        Testbed(closed / "portal" / "var" / "slurm-testbed").make_directories()


def test_its_directories_are_made_searchable_and_a_planted_symlink_is_refused(closed):
    closed.chmod(0o755)
    testbed = Testbed(closed / "testbed")

    testbed.make_directories()

    for made in (testbed.directory, testbed.etc, testbed.run_dir, testbed.state_dir):
        assert stat.S_IMODE(made.stat().st_mode) == 0o755, made
    (closed / "elsewhere").mkdir()
    (closed / "planted").symlink_to(closed / "elsewhere")
    with pytest.raises(TestbedError, match="not a directory of uid"):
        Testbed(closed / "planted").make_directories()


def test_stop_clears_what_crashed_daemons_left_in_run(closed):
    closed.chmod(0o755)
    testbed = Testbed(closed / "testbed")
    testbed.make_directories()
    # A crash leaves pid files, one naming a pid now taken by a process that is not the
    # testbed's (this one), and the munge socket's lock.
    (testbed.run_dir / "slurmctld.pid").write_text(f"{os.getpid()}\n")
    (testbed.run_dir / "munged.pid").write_text("999999999\n")
    (testbed.run_dir / "munge.socket.lock").touch()

    assert testbed.stop() == []
    assert list(testbed.run_dir.iterdir()) == []
    assert testbed.etc.is_dir()

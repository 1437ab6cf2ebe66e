"""What the testbed writes and how it reads its settings: no daemon needed."""

from __future__ import annotations

import pytest

from tests.slurm_testbed import Mariadb, Ports, Testbed, TestbedError


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

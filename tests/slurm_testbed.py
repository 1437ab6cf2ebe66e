"""A real Slurm 22.05 on this one machine, for the tests and demos that talk to Slurm.

``scripts/slurm-testbed start|stop|status|env`` drives it; the ``slurm_testbed`` fixture
(tests/slurm/conftest.py) starts it on first use and stops it at the end of the session.

What runs: Debian's ``munged``, ``slurmdbd`` on the MariaDB server at ``SLURM_TESTBED_MARIADB``
(default ``mysql://root@127.0.0.1:3306``), ``slurmctld`` and one ``slurmd -N <node>`` per node of
examples/clusters/slurm-testbed.json, all as root. The nodes claim the spec's cores and memory
(``SlurmdParameters=config_overrides``), the GPU nodes claim their GPUs through empty files
standing in for devices, and the partitions' ``TRESBillingWeights`` come from the very function
behind ``manage.py slurm_billing_config``, so Slurm's ``billing`` and the portal agree.
Accounting goes to slurmdbd with associations, limits and QOS enforced, and ``auth/jwt`` is
configured beside munge so that ``slurmrestd`` can be started on it.

Everything it writes lives under one directory (``SLURM_TESTBED_DIR``, default
``/tmp/slurm-testbed-<hash of the checkout's path>``): ``etc/`` (slurm.conf, slurmdbd.conf,
gres.conf, the munge and JWT keys), ``run/`` (pid files, the munge socket), ``log/``, ``state/``
(slurmctld's state, the slurmd spools) and ``dev/`` (the fake GPUs). It is outside the checkout
because munged refuses a socket below a directory that not everyone may search, and a checkout
may well be below one (a home directory, a ``mktemp -d``). Its slurmdbd database is named after
that directory, so two checkouts keep apart; the ports are the machine's, so each checkout that
runs at the same time needs its own ``SLURM_TESTBED_*_PORT`` values.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import shlex
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import hostlist

from accounting.clusters.slurmconf import slurm_conf_lines
from accounting.clusters.specs import ClusterDefinition, cluster_definition_load
from tests.system_packages import apt_install_missing

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
# Not /run: Debian mounts it noexec (slurmd runs job scripts from its spool) and small. Not
# $TMPDIR either: `stop` must find what `start` made, whatever the shell's environment.
RUNTIME_BASE = Path("/tmp")
# Where the testbed lived before it left the checkout; `stop` stops a testbed still running there.
LEGACY_DIR = ROOT / "var" / "slurm-testbed"

_PLUGINS = Path("/usr/lib") / str(sysconfig.get_config_var("MULTIARCH") or "") / "slurm-wlm"
# A file of each Debian package the testbed runs, and the package that brings it.
PACKAGES: Mapping[Path, str] = {
    Path("/usr/sbin/munged"): "munge",
    Path("/usr/sbin/slurmdbd"): "slurmdbd",
    Path("/usr/sbin/slurmctld"): "slurmctld",
    Path("/usr/sbin/slurmd"): "slurmd",
    Path("/usr/bin/sacctmgr"): "slurm-client",
    Path("/usr/share/doc/slurm-wlm"): "slurm-wlm",
    _PLUGINS / "auth_jwt.so": "slurm-wlm-jwt-plugin",
    Path("/usr/sbin/slurmrestd"): "slurmrestd",
}

# Daemons started here carry this variable, so `stop` knows them from anyone else's.
MARK = "SLURM_TESTBED_DIR"
START_TIMEOUT_SECONDS = 120.0  # the first start creates slurmdbd's tables; later ones take seconds
STOP_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.1
# Node states that waiting does not end (sinfo's short names).
STUCK = ("drain", "drng", "inval", "fail", "maint")


class TestbedError(RuntimeError):
    """The testbed cannot start or stop; the message says why and where to look."""

    __test__ = False


def default_directory(checkout: Path = ROOT, base: Path = RUNTIME_BASE) -> Path:
    """The testbed's directory for ``checkout``: ``slurm-testbed-<hash of its path>`` under
    ``base``, outside the checkout, so two checkouts never share one and a ``stop`` finds what
    the ``start`` of the same checkout made."""
    digest = hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()[:12]
    return base / f"slurm-testbed-{digest}"


DEFAULT_DIR = default_directory()


def unsearchable(path: Path) -> Path | None:
    """The first of ``path``'s existing directories, from ``/`` down, that not everyone may
    search (no execute bit for others), or None. munged refuses a socket in such a place
    ("Socket is inaccessible: execute permissions for all required")."""
    for directory in [*reversed(path.parents), path]:
        try:
            mode = directory.stat().st_mode
        except FileNotFoundError:
            return None  # neither it nor what is below it exists yet
        if not mode & stat.S_IXOTH:
            return directory
    return None


@dataclass(frozen=True)
class Ports:
    """TCP ports of the daemons; node number i (from 0) listens on ``slurmd_first + i``."""

    slurmctld: int = 16817
    slurmdbd: int = 16819
    slurmd_first: int = 16821

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Ports:
        defaults = cls()
        values = {}
        for field, variable in (
            ("slurmctld", "SLURM_TESTBED_SLURMCTLD_PORT"),
            ("slurmdbd", "SLURM_TESTBED_SLURMDBD_PORT"),
            ("slurmd_first", "SLURM_TESTBED_SLURMD_PORT"),
        ):
            text = environ.get(variable, "").strip()
            if not text:
                values[field] = getattr(defaults, field)
                continue
            if not text.isdigit() or not 1024 <= int(text) <= 65000:
                raise TestbedError(f"{variable}={text!r}: expected a port from 1024 to 65000")
            values[field] = int(text)
        return cls(**values)


@dataclass(frozen=True)
class Mariadb:
    """Where slurmdbd keeps its database."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = ""

    @classmethod
    def from_url(cls, url: str) -> Mariadb:
        parsed = urlparse(url)
        if parsed.scheme not in {"mysql", "mariadb"} or not parsed.hostname:
            raise TestbedError(f"SLURM_TESTBED_MARIADB={url!r}: expected mysql://user:pw@host:port")
        return cls(
            host=parsed.hostname,
            port=parsed.port or 3306,
            user=unquote(parsed.username or "root"),
            password=unquote(parsed.password or ""),
        )


@dataclass(frozen=True)
class Node:
    name: str
    partition: str
    sockets: int
    cores_per_socket: int
    memory_mb: int
    gpus: int
    port: int


def nodes_of(definition: ClusterDefinition, ports: Ports) -> list[Node]:
    """Every node of the spec's partitions, each with its own slurmd port."""
    names = [
        (name, partition)
        for partition in definition.partitions
        for name in hostlist.expand_hostlist(partition.nodelist)
    ]
    return [
        Node(
            name=name,
            partition=partition.name,
            sockets=partition.charging.sockets,
            cores_per_socket=partition.charging.cores_per_socket,
            memory_mb=partition.charging.memory_mb,
            gpus=partition.charging.gpus,
            port=ports.slurmd_first + index,
        )
        for index, (name, partition) in enumerate(names)
    ]


@dataclass(frozen=True)
class Daemon:
    """One daemon of the testbed: how to start it and the pid file it writes."""

    name: str
    argv: tuple[str, ...]
    pid_file: Path
    log_file: Path
    port: int | None = None


class Testbed:
    """The testbed under ``directory``: writes its configuration, starts and stops it."""

    __test__ = False  # not a test class, whatever its name says to pytest

    def __init__(
        self,
        directory: Path = DEFAULT_DIR,
        *,
        spec: Path = SPEC,
        ports: Ports | None = None,
        mariadb: Mariadb | None = None,
    ) -> None:
        # The parent resolved, not the directory itself: a symlink planted at a name in /tmp
        # must be refused (make_directories), not followed.
        absolute = Path(os.path.abspath(directory))
        self.directory = absolute.parent.resolve() / absolute.name
        self.definition = cluster_definition_load(spec)
        self.cluster_name = self.definition.slurm_cluster_name or self.definition.name
        self.ports = ports or Ports()
        self.mariadb = mariadb or Mariadb()
        self.nodes = nodes_of(self.definition, self.ports)
        self.etc = self.directory / "etc"
        self.run_dir = self.directory / "run"
        self.log_dir = self.directory / "log"
        self.state_dir = self.directory / "state"
        self.dev_dir = self.directory / "dev"
        self.slurm_conf = self.etc / "slurm.conf"
        self.munge_socket = self.run_dir / "munge.socket"
        self.jwt_key = self.etc / "jwt_hs256.key"
        # One checkout, one database: the name is derived from the directory.
        digest = hashlib.sha256(str(self.directory).encode()).hexdigest()[:10]
        self.database = f"slurm_testbed_{digest}"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> Testbed:
        directory = environ.get("SLURM_TESTBED_DIR", "").strip()
        url = environ.get("SLURM_TESTBED_MARIADB", "").strip() or "mysql://root@127.0.0.1:3306"
        return cls(
            Path(directory) if directory else DEFAULT_DIR,
            ports=Ports.from_environ(environ),
            mariadb=Mariadb.from_url(url),
        )

    # --- what the testbed looks like -----------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """What a shell or a test needs to use this Slurm with its command-line tools."""
        return {"SLURM_CONF": str(self.slurm_conf), MARK: str(self.directory)}

    def _daemons(self) -> list[Daemon]:
        conf = str(self.slurm_conf)
        munged = Daemon(
            name="munged",
            argv=(
                "/usr/sbin/munged",
                f"--socket={self.munge_socket}",
                f"--key-file={self.etc / 'munge.key'}",
                f"--pid-file={self.run_dir / 'munged.pid'}",
                f"--log-file={self.log_dir / 'munged.log'}",
                f"--seed-file={self.state_dir / 'munged.seed'}",
            ),
            pid_file=self.run_dir / "munged.pid",
            log_file=self.log_dir / "munged.log",
        )
        slurmdbd = Daemon(
            name="slurmdbd",
            argv=("/usr/sbin/slurmdbd",),  # reads slurmdbd.conf beside SLURM_CONF
            pid_file=self.run_dir / "slurmdbd.pid",
            log_file=self.log_dir / "slurmdbd.log",
            port=self.ports.slurmdbd,
        )
        slurmctld = Daemon(
            name="slurmctld",
            argv=("/usr/sbin/slurmctld", "-f", conf),
            pid_file=self.run_dir / "slurmctld.pid",
            log_file=self.log_dir / "slurmctld.log",
            port=self.ports.slurmctld,
        )
        slurmds = [
            Daemon(
                name=f"slurmd {node.name}",
                argv=("/usr/sbin/slurmd", "-f", conf, "-N", node.name),
                pid_file=self.run_dir / f"slurmd-{node.name}.pid",
                log_file=self.log_dir / f"slurmd-{node.name}.log",
                port=node.port,
            )
            for node in self.nodes
        ]
        return [munged, slurmdbd, slurmctld, *slurmds]

    def config_files(self) -> dict[Path, str]:
        """The configuration files and their text (keys excepted)."""
        return {
            self.slurm_conf: self.slurm_conf_text(),
            self.etc / "gres.conf": self.gres_conf_text(),
            self.etc / "slurmdbd.conf": self.slurmdbd_conf_text(),
        }

    def _auth_lines(self) -> list[str]:
        return [
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_socket}",
            # slurmrestd (and `scontrol token` users) authenticate with JWTs signed by this key.
            "AuthAltTypes=auth/jwt",
            f"AuthAltParameters=jwt_key={self.jwt_key}",
        ]

    def slurm_conf_text(self) -> str:
        host = socket.gethostname().split(".")[0]
        partitions = {partition.name: partition for partition in self.definition.partitions}
        # The billing lines as `manage.py slurm_billing_config` prints them, each partition's
        # line completed with its nodes and limits; the first partition is the default.
        billing = slurm_conf_lines([(name, p.charging) for name, p in partitions.items()])
        partition_lines = []
        for line in billing.splitlines():
            name = line.removeprefix("PartitionName=").split(" ", 1)[0]
            if line.startswith("PartitionName=") and name in partitions:
                spec = partitions[name].charging
                line += (
                    f" Nodes={partitions[name].nodelist}"
                    f" Default={'YES' if name == self.definition.partitions[0].name else 'NO'}"
                    " MaxTime=24:00:00 DefaultTime=01:00:00"
                    f" DefMemPerCPU={spec.memory_mb // spec.cores} State=UP"
                )
            partition_lines.append(line)
        node_lines = [
            f"NodeName={node.name} NodeHostname={host} NodeAddr=127.0.0.1 Port={node.port}"
            f" Sockets={node.sockets} CoresPerSocket={node.cores_per_socket} ThreadsPerCore=1"
            f" RealMemory={node.memory_mb}" + (f" Gres=gpu:{node.gpus}" if node.gpus else "")
            + f" Feature={node.partition} State=UNKNOWN"
            for node in self.nodes
        ]  # fmt: skip
        lines = [
            f"# Written by scripts/slurm-testbed for {self.directory}; edits are overwritten.",
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={host}(127.0.0.1)",
            # A testbed on one machine: every daemon runs as root (see docs/development.md).
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={self.ports.slurmctld}",
            f"SlurmdPort={self.ports.slurmd_first}",
            *self._auth_lines(),
            "CredType=cred/munge",
            f"StateSaveLocation={self.state_dir / 'slurmctld'}",
            f"SlurmdSpoolDir={self.state_dir / 'slurmd-%n'}",
            f"SlurmctldPidFile={self.run_dir / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.run_dir / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={self.log_dir / 'slurmctld.log'}",
            f"SlurmdLogFile={self.log_dir / 'slurmd-%n.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "MailProg=/bin/true",
            "ReturnToService=2",
            # The nodes claim the spec's cores and memory, more than this machine has.
            "SlurmdParameters=config_overrides",
            # No cgroups: processes are tracked through /proc, tasks are not bound.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/linux",
            "AcctGatherEnergyType=acct_gather_energy/none",
            "PrologFlags=Contain",  # every job gets its .extern step, as on a production system
            "MpiDefault=none",
            "SwitchType=switch/none",
            "KillWait=5",
            "MinJobAge=300",
            "InactiveLimit=0",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=bf_interval=5",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "GresTypes=gpu",
            "PriorityType=priority/multifactor",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=localhost",
            f"AccountingStoragePort={self.ports.slurmdbd}",
            # Connections to slurmdbd take their munge socket from here, not from AuthInfo.
            f"AccountingStoragePass={self.munge_socket}",
            "AccountingStorageTRES=gres/gpu",
            "AccountingStorageEnforce=associations,limits,qos",
            "JobCompType=jobcomp/none",
            *node_lines,
            *partition_lines,
        ]
        return "\n".join(lines) + "\n"

    def gres_conf_text(self) -> str:
        lines = [
            "# GPUs without GPUs: device files that are /dev/null (fake_gpu).",
            "AutoDetect=off",
        ]
        gpu_nodes: dict[int, list[str]] = {}
        for node in self.nodes:
            if node.gpus:
                gpu_nodes.setdefault(node.gpus, []).append(node.name)
        for count, names in gpu_nodes.items():
            files = f"{self.dev_dir}/gpu[0-{count - 1}]" if count > 1 else f"{self.dev_dir}/gpu0"
            lines.append(f"NodeName={hostlist.collect_hostlist(names)} Name=gpu File={files}")
        return "\n".join(lines) + "\n"

    def slurmdbd_conf_text(self) -> str:
        lines = [
            *self._auth_lines(),
            "DbdHost=localhost",
            f"DbdPort={self.ports.slurmdbd}",
            "SlurmUser=root",
            f"PidFile={self.run_dir / 'slurmdbd.pid'}",
            f"LogFile={self.log_dir / 'slurmdbd.log'}",
            "DebugLevel=info",
            "StorageType=accounting_storage/mysql",
            f"StorageHost={self.mariadb.host}",
            f"StoragePort={self.mariadb.port}",
            f"StorageUser={self.mariadb.user}",
            f"StorageLoc={self.database}",
        ]
        if self.mariadb.password:
            lines.append(f"StoragePass={self.mariadb.password}")
        return "\n".join(lines) + "\n"

    # --- processes -----------------------------------------------------------------------------

    def _pid(self, daemon: Daemon) -> int | None:
        """The pid of ``daemon`` when it runs and was started by this testbed."""
        try:
            pid = int(daemon.pid_file.read_text().split()[0])
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            return None
        mine = f"{MARK}={self.directory}".encode() in environ
        return pid if mine and state != "Z" else None

    def running(self) -> dict[str, int | None]:
        """Each daemon's name and its pid, or None when it is not running."""
        return {daemon.name: self._pid(daemon) for daemon in self._daemons()}

    def _daemon_env(self) -> dict[str, str]:
        return {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self.directory),
            **self.env,
        }

    def run(
        self, *argv: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command against this testbed."""
        done = subprocess.run(
            argv, env={**os.environ, **self.env}, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip
        if check and done.returncode != 0:
            output = (done.stderr or done.stdout)[-600:]
            raise TestbedError(f"{shlex.join(argv)} exited {done.returncode}: {output}")
        return done

    # --- start ---------------------------------------------------------------------------------

    def install(self) -> None:
        """Install Slurm and munge with apt when they are missing."""
        problem = apt_install_missing(PACKAGES)
        if problem:
            raise TestbedError(problem)

    def start(self) -> None:
        """Start whatever is not running yet and wait until the nodes are idle and slurmdbd
        knows the cluster. Idempotent; a changed configuration restarts every daemon."""
        if os.geteuid() != 0:
            raise TestbedError("its daemons run as root (SlurmUser=root): run it as root")
        if len(str(self.munge_socket)) > 100:
            raise TestbedError(
                f"{self.munge_socket}: too long for a unix socket; use a shorter dir"
            )
        if not reachable(self.mariadb.host, self.mariadb.port):
            raise TestbedError(
                f"MariaDB is not reachable at {self.mariadb.host}:{self.mariadb.port}"
                " (SLURM_TESTBED_MARIADB)"
            )
        self.make_directories()
        changed = self._write_files()
        if changed and any(self.running().values()):
            self.stop()
        daemons = self._daemons()
        taken = [
            f"{daemon.port} ({daemon.name})"
            for daemon in daemons
            if daemon.port is not None and self._pid(daemon) is None and not port_free(daemon.port)
        ]
        if taken:
            raise TestbedError(
                f"ports taken: {', '.join(taken)}; choose others with"
                " SLURM_TESTBED_SLURMCTLD_PORT, SLURM_TESTBED_SLURMDBD_PORT and"
                " SLURM_TESTBED_SLURMD_PORT (the first of the nodes')"
            )
        munged, slurmdbd, slurmctld, *slurmds = daemons
        if self._pid(munged) is None:
            self.munge_socket.unlink(missing_ok=True)  # a stale socket would look ready
        self._start(munged, ready=self.munge_socket.exists)
        self._start(slurmdbd, ready=self._slurmdbd_answers)
        self._cluster_register()
        self._start(slurmctld, ready=self._slurmctld_answers)
        for daemon in slurmds:
            self._start(daemon, ready=None)
        self._wait(self._nodes_idle, "the nodes to be idle in sinfo", daemons)

    def make_directories(self) -> None:
        """Create the directory and its subdirectories, 0755 and this user's: munged needs
        every directory above its socket searchable by all and none writable by others."""
        self.directory.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.directory.mkdir(mode=0o755, exist_ok=True)
        made = self.directory.lstat()
        if not stat.S_ISDIR(made.st_mode) or made.st_uid != os.geteuid():
            raise TestbedError(
                f"{self.directory} is not a directory of uid {os.geteuid()}'s (a symlink, or"
                " made by another user): remove it, or choose another with SLURM_TESTBED_DIR"
            )
        made_here = (self.etc, self.run_dir, self.log_dir, self.state_dir, self.dev_dir)
        for directory in (self.directory, *made_here):
            directory.mkdir(exist_ok=True)
            directory.chmod(0o755)
        blocked = unsearchable(self.run_dir)
        if blocked is not None:
            raise TestbedError(
                f"{blocked} (mode {stat.S_IMODE(blocked.stat().st_mode):04o}) is not searchable"
                f" by everyone, and munged refuses a socket below it: choose a SLURM_TESTBED_DIR"
                f" outside it (the default is {DEFAULT_DIR})"
            )
        if os.statvfs(self.directory).f_flag & os.ST_NOEXEC:
            raise TestbedError(
                f"{self.directory} is on a filesystem mounted noexec, and slurmd runs the job"
                " scripts from its spool there: choose another SLURM_TESTBED_DIR"
            )

    def _write_files(self) -> bool:
        """Write the configuration and keys; True when the configuration changed."""
        changed = False
        for path, text in self.config_files().items():
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                changed = True
            path.chmod(0o600 if path.name == "slurmdbd.conf" else 0o644)
        for key, size in ((self.etc / "munge.key", 1024), (self.jwt_key, 32)):
            if not key.exists():
                key.write_bytes(secrets.token_bytes(size))
                changed = True
            key.chmod(0o600)
        for node in self.nodes:
            (self.state_dir / f"slurmd-{node.name}").mkdir(exist_ok=True)
            for index in range(node.gpus):
                fake_gpu(self.dev_dir / f"gpu{index}")
        return changed

    def _start(self, daemon: Daemon, *, ready: Callable[[], bool] | None) -> None:
        if self._pid(daemon) is not None:
            return
        # Each daemon forks itself into the background; the parent's exit says whether the
        # configuration was accepted.
        done = subprocess.run(
            daemon.argv, env=self._daemon_env(), capture_output=True, text=True,
            timeout=60, check=False, cwd=self.directory,
        )  # fmt: skip
        if done.returncode != 0:
            raise TestbedError(
                f"{daemon.name} did not start (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-600:]}\n{log_tail(daemon.log_file)}"
            )
        if ready is not None:
            self._wait(ready, f"{daemon.name} to answer", [daemon])

    def _wait(self, condition: Callable[[], bool], what: str, daemons: Sequence[Daemon]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not condition():
            dead = [daemon for daemon in daemons if self._pid(daemon) is None]
            if dead or time.monotonic() > deadline:
                why = f"{dead[0].name} exited" if dead else f"{START_TIMEOUT_SECONDS:.0f}s passed"
                logs = "\n".join(log_tail(daemon.log_file) for daemon in (dead or daemons)[:3])
                raise TestbedError(f"waiting for {what}: {why}\n{logs}")
            time.sleep(POLL_SECONDS)

    def _slurmctld_answers(self) -> bool:
        return self.run("scontrol", "ping", check=False).returncode == 0

    def _slurmdbd_answers(self) -> bool:
        return self.run("sacctmgr", "-n", "list", "cluster", check=False).returncode == 0

    def cluster_registered(self) -> bool:
        listed = self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster", check=False)
        return self.cluster_name in listed.stdout.split()

    def _cluster_register(self) -> None:
        if not self.cluster_registered():
            self.run("sacctmgr", "-i", "add", "cluster", self.cluster_name)

    def node_states(self) -> dict[str, str]:
        """Each node's state as sinfo reports it (``idle``, ``down*``, ``mixed``...)."""
        done = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False)
        if done.returncode != 0:
            return {}
        return dict(line.split() for line in done.stdout.splitlines() if line.strip())

    def _nodes_idle(self) -> bool:
        states = self.node_states()
        stuck = {name: state for name, state in states.items() if state.startswith(STUCK)}
        if stuck:
            # Only staff clear these (scontrol update nodename=... state=resume): say so now.
            reasons = self.run("sinfo", "-R", check=False).stdout
            raise TestbedError(f"nodes will not become idle: {stuck}\n{reasons}")
        return len(states) == len(self.nodes) and set(states.values()) == {"idle"}

    # --- stop ----------------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Cancel the testbed's jobs, stop its daemons (nodes first, munged last) and return
        the names of those that were running. Processes it did not start are left alone."""
        daemons = self._daemons()
        munged, slurmdbd, slurmctld, *slurmds = daemons
        if self._pid(slurmctld) is not None:
            jobs = self.run("squeue", "-h", "-o", "%A", check=False).stdout.split()
            if jobs:
                self.run("scancel", *jobs, check=False)
                deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
                while self.run("squeue", "-h", "-o", "%A", check=False).stdout.strip():
                    if time.monotonic() > deadline:
                        break
                    time.sleep(POLL_SECONDS)
        stopped = []
        for group in (slurmds, [slurmctld], [slurmdbd], [munged]):
            pids = {daemon.name: self._pid(daemon) for daemon in group}
            for pid in pids.values():
                if pid is not None:
                    os.kill(pid, signal.SIGTERM)
            for daemon in group:
                if pids[daemon.name] is not None:
                    self._wait_gone(daemon)
                    stopped.append(daemon.name)
        self._clear_run_dir()
        return stopped

    def _clear_run_dir(self) -> None:
        """Remove what the daemons leave in ``run/`` (pid files, the munge socket and its lock)
        once none of them runs, whether they were stopped or had crashed. The configuration,
        keys, logs and state stay for the next start (slurmctld's state keeps job ids growing,
        and the database in MariaDB remembers the earlier ones)."""
        if not self.run_dir.is_dir() or any(self.running().values()):
            return
        for leftover in self.run_dir.iterdir():
            if not leftover.is_dir():
                leftover.unlink(missing_ok=True)

    def _wait_gone(self, daemon: Daemon) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while (pid := self._pid(daemon)) is not None:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
            time.sleep(POLL_SECONDS)


def fake_gpu(path: Path) -> None:
    """A character device that stands in for a GPU: Slurm 22.05 drops GPUs whose file is no
    device, and counts without files (``Count=``) leave the node INVAL. It is /dev/null (1, 3),
    so anything that opens it reads nothing and writes nowhere."""
    if path.is_char_device():
        return
    path.unlink(missing_ok=True)
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def port_free(port: int) -> bool:
    """True when nothing listens on ``port`` (the daemons bind every address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))  # noqa: S104 - the same bind as the daemon's
        except OSError:
            return False
    return True


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"({path} was not written)"
    return f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail)


def _timed(step: str, action: Callable[[], None]) -> float:
    began = time.monotonic()
    action()
    took = time.monotonic() - began
    print(f"slurm-testbed: {step} took {took:.1f}s", file=sys.stderr)
    return took


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/slurm-testbed",
        description="A real single-host Slurm for tests and demos (docs/development.md).",
    )
    parser.add_argument("command", choices=["start", "stop", "status", "env"])
    arguments = parser.parse_args(argv)
    try:
        testbed = Testbed.from_environ()
        if arguments.command == "start":
            _timed("installing Slurm (apt)", testbed.install)
            _timed(f"starting Slurm cluster {testbed.cluster_name}", testbed.start)
            print(f'slurm-testbed: {testbed.directory}; eval "$(scripts/slurm-testbed env)"')
        elif arguments.command == "stop":
            stopped = testbed.stop()
            if not os.environ.get("SLURM_TESTBED_DIR", "").strip() and LEGACY_DIR.is_dir():
                # Started before the testbed left the checkout: its daemons hold the ports.
                stopped += Testbed(LEGACY_DIR, ports=testbed.ports).stop()
            print(f"slurm-testbed: stopped {', '.join(stopped) or 'nothing (none was running)'}")
        elif arguments.command == "status":
            return _status(testbed)
        else:
            for name, value in testbed.env.items():
                print(f"export {name}={shlex.quote(value)}")
    except TestbedError as error:
        print(f"slurm-testbed: {error}", file=sys.stderr)
        return 1
    return 0


def _status(testbed: Testbed) -> int:
    running = testbed.running()
    print(f"{'directory':16} {testbed.directory} (logs: {testbed.log_dir})")
    for name, pid in running.items():
        print(f"{name:16} {'running, pid ' + str(pid) if pid else 'stopped'}")
    if running["slurmctld"]:
        print(testbed.run("sinfo", check=False).stdout, end="")
    return 0 if all(running.values()) else 3


if __name__ == "__main__":
    sys.exit(main())

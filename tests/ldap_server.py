"""A real OpenLDAP server for the sign-in tests: Debian's ``slapd`` with a small directory.

:func:`ldap_server` installs ``slapd`` and ``ldap-utils`` with apt when they are missing (see
tests/system_packages.py), writes a throw-away ``slapd.conf`` (mdb backend, suffix
``dc=hpc,dc=example``), loads the directory below with ``slapadd`` and runs its own ``slapd`` on
127.0.0.1 at a free port, whatever system slapd the Debian package may have started. The
server, its database and its configuration go away when the ``with`` block ends.

The directory: three people under ``ou=people`` (a researcher, a member of ``hpc-staff`` and a
member of ``allocation-committee``), the two groups (groupOfNames) under ``ou=groups``, and a
service account the portal binds as. Only bound clients may read; anonymous clients may only
bind, as at most centres.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.system_packages import apt_missing_reason

SLAPD = Path("/usr/sbin/slapd")
SLAPADD = Path("/usr/sbin/slapadd")
SLAPPASSWD = Path("/usr/sbin/slappasswd")
LDAPMODIFY = Path("/usr/bin/ldapmodify")
LDAPWHOAMI = Path("/usr/bin/ldapwhoami")
SCHEMAS = ("core", "cosine", "inetorgperson", "nis")

SUFFIX = "dc=hpc,dc=example"
ADMIN_DN = f"cn=admin,{SUFFIX}"
ADMIN_PASSWORD = "admin-pw-for-tests"
PORTAL_DN = f"cn=portal,ou=services,{SUFFIX}"
PORTAL_PASSWORD = "portal-pw-for-tests"
PEOPLE_BASE = f"ou=people,{SUFFIX}"
GROUPS_BASE = f"ou=groups,{SUFFIX}"


@dataclass(frozen=True)
class Person:
    uid: str
    given_name: str
    surname: str
    password: str
    groups: tuple[str, ...]

    @property
    def dn(self) -> str:
        return f"uid={self.uid},{PEOPLE_BASE}"

    @property
    def email(self) -> str:
        return f"{self.uid}@hpc.example"


RESEARCHER = Person("rdavies", "Rhiannon", "Davies", "researcher-pw", ())
STAFF = Person("okafor", "Chidi", "Okafor", "staff-pw", ("hpc-staff",))
COMMITTEE = Person("lindqvist", "Maja", "Lindqvist", "committee-pw", ("allocation-committee",))
PEOPLE = (RESEARCHER, STAFF, COMMITTEE)
GROUPS = ("hpc-staff", "allocation-committee")


@dataclass(frozen=True)
class LdapServer:
    """A running test server: where it listens and how to change its directory."""

    uri: str
    suffix: str
    people_base: str
    groups_base: str
    bind_dn: str
    bind_password: str

    def modify(self, ldif: str) -> None:
        """Apply ``ldif`` (changetype records) with ``ldapmodify`` as the directory's admin."""
        subprocess.run(
            [str(LDAPMODIFY), "-x", "-H", self.uri, "-D", ADMIN_DN, "-w", ADMIN_PASSWORD],
            input=ldif,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )

    def group_remove(self, *, group: str, person: Person) -> None:
        self.modify(
            f"dn: cn={group},{self.groups_base}\n"
            "changetype: modify\n"
            f"delete: member\nmember: {person.dn}\n"
        )

    def group_add(self, *, group: str, person: Person) -> None:
        self.modify(
            f"dn: cn={group},{self.groups_base}\n"
            "changetype: modify\n"
            f"add: member\nmember: {person.dn}\n"
        )


def ldap_missing_reason() -> str | None:
    """None once slapd and the LDAP client tools are installed, else why they are not."""
    return apt_missing_reason(SLAPD, "slapd") or apt_missing_reason(LDAPMODIFY, "ldap-utils")


def _hash(password: str) -> str:
    done = subprocess.run(
        [str(SLAPPASSWD), "-h", "{SSHA}", "-s", password],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


def _config(workdir: Path) -> str:
    includes = "".join(f"include /etc/ldap/schema/{name}.schema\n" for name in SCHEMAS)
    return (
        f"{includes}"
        f"pidfile {workdir}/slapd.pid\n"
        f"argsfile {workdir}/slapd.args\n"
        "modulepath /usr/lib/ldap\n"
        "moduleload back_mdb\n"
        "database mdb\n"
        "maxsize 16777216\n"
        f'suffix "{SUFFIX}"\n'
        f'rootdn "{ADMIN_DN}"\n'
        f"rootpw {_hash(ADMIN_PASSWORD)}\n"
        f"directory {workdir}/data\n"
        "index objectClass eq\n"
        "index uid,member eq\n"
        "access to attrs=userPassword by anonymous auth by self write by * none\n"
        "access to * by users read by * none\n"
    )


def _directory() -> str:
    entries = [
        f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: hpc\no: HPC centre\n",
        f"dn: ou=services,{SUFFIX}\nobjectClass: organizationalUnit\nou: services\n",
        f"dn: {PEOPLE_BASE}\nobjectClass: organizationalUnit\nou: people\n",
        f"dn: {GROUPS_BASE}\nobjectClass: organizationalUnit\nou: groups\n",
        f"dn: {PORTAL_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
        f"cn: portal\nuserPassword: {_hash(PORTAL_PASSWORD)}\n",
    ]
    for number, person in enumerate(PEOPLE, start=10001):
        entries.append(
            f"dn: {person.dn}\n"
            "objectClass: inetOrgPerson\nobjectClass: posixAccount\n"
            f"uid: {person.uid}\ncn: {person.given_name} {person.surname}\n"
            f"givenName: {person.given_name}\nsn: {person.surname}\nmail: {person.email}\n"
            f"uidNumber: {number}\ngidNumber: {number}\nhomeDirectory: /home/{person.uid}\n"
            f"userPassword: {_hash(person.password)}\n"
        )
    for group in GROUPS:
        # groupOfNames needs at least one member; the service account is a neutral one.
        members = [PORTAL_DN, *(person.dn for person in PEOPLE if group in person.groups)]
        entries.append(
            f"dn: cn={group},{GROUPS_BASE}\nobjectClass: groupOfNames\ncn: {group}\n"
            + "".join(f"member: {member}\n" for member in members)
        )
    return "\n".join(entries)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(uri: str) -> bool:
    done = subprocess.run(
        [str(LDAPWHOAMI), "-x", "-H", uri, "-D", PORTAL_DN, "-w", PORTAL_PASSWORD],
        capture_output=True,
        text=True,
        timeout=10,
    )
    return done.returncode == 0


@contextmanager
def ldap_server(*, start_timeout_seconds: float = 20) -> Iterator[LdapServer]:
    """Run a private slapd with the test directory; stop it and delete it afterwards.

    Call :func:`ldap_missing_reason` first: this expects slapd and ldap-utils installed.
    """
    workdir = Path(tempfile.mkdtemp(prefix="portal-slapd-"))
    process: subprocess.Popen[bytes] | None = None
    log = (workdir / "slapd.log").open("wb")
    try:
        (workdir / "data").mkdir()
        config = workdir / "slapd.conf"
        config.write_text(_config(workdir), encoding="utf-8")
        ldif = workdir / "directory.ldif"
        ldif.write_text(_directory(), encoding="utf-8")
        subprocess.run(
            [str(SLAPADD), "-q", "-f", str(config), "-l", str(ldif)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        uri = f"ldap://127.0.0.1:{_free_port()}"
        # -d keeps slapd in the foreground, so it is this process's child and ends with it.
        process = subprocess.Popen(
            [str(SLAPD), "-f", str(config), "-h", f"{uri}/", "-d", "none"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + start_timeout_seconds
        while not _answers(uri):
            if process.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(
                    f"slapd did not start on {uri}: "
                    + (workdir / "slapd.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.1)
        yield LdapServer(
            uri=uri,
            suffix=SUFFIX,
            people_base=PEOPLE_BASE,
            groups_base=GROUPS_BASE,
            bind_dn=PORTAL_DN,
            bind_password=PORTAL_PASSWORD,
        )
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)

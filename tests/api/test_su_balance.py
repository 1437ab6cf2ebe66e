"""``su-balance`` against a live test server: the table, --users, --year, --json, and clear
messages for a bad token, a project you are not in, and a portal that does not answer."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from accounting.models import Partition
from allocations.grants.selectors import pool_today
from allocations.grants.services import adjustment_top_up, allocation_grant
from kit.calendar import add_months
from tests.factories import api_token, usage_day_add

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients"


def _load_client():
    spec = importlib.util.spec_from_file_location("su_balance", CLIENTS / "su_balance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


su_balance = _load_client()


def run(argv, environ):
    out, err = io.StringIO(), io.StringIO()
    status = su_balance.main(argv, environ=environ, stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def portal(live_server, centre):
    """pawsey0003 (alice PI, carol member) holds a grant covering today on both pools, and has
    used SU yesterday on the CPU pool: 12.5 by alice and 37.5 by carol."""
    today = pool_today(centre.cpu)
    start = today.replace(day=1)
    for pool, amount in ((centre.cpu, 1200), (centre.gpu, 400)):
        allocation_grant(
            project=centre.p3, pool=pool, amount=Decimal(amount), period_start=start,
            period_end=add_months(start, 12), actor=centre.staff,
        )  # fmt: skip
    adjustment_top_up(
        project=centre.p3, pool=centre.cpu, amount=Decimal(10), actor=centre.staff,
        reason="training",
    )  # fmt: skip
    work = Partition.objects.get(cluster=centre.cluster, name="work")
    day = max(today - timedelta(days=1), start)
    for username, su in (("alice", "12.5"), ("carol", "37.5")):
        usage_day_add(
            centre.p3,
            work,
            username,
            day,
            service_units=Decimal(su),
            jobs=3,
        )
    token = api_token(centre.carol, scope="read")
    return {"SU_PORTAL_URL": live_server.url, "SU_PORTAL_TOKEN": token}


def test_su_balance_prints_the_granted_used_and_remaining_su_of_each_pool(portal, centre):
    centre.gpu.slurm_account_suffix = "-gpu"  # Setonix: GPU pools have accounts of their own
    centre.gpu.save(update_fields=["slurm_account_suffix"])
    status, out, err = run(["-p", "pawsey0003"], portal)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "pawsey0003  Astro"
    assert lines[1].split() == [
        "pool", "budget", "period", "granted", "adjusted", "used", "remaining", "used", "%",
        "running", "reserved", "free",
    ]  # fmt: skip
    cpu = next(line for line in lines if line.strip().startswith("testbed CPU"))
    # A quarter of 1200 SU, +10 topped up, 50 used: 260 left, 50 / 310 = 16.1 % used; no job
    # queued or running, so nothing reserved and all 260 free.
    assert cpu.split()[-8:] == [
        "300.00", "+10.00", "50.00", "260.00", "16.1%", "0.00", "0.00", "260.00",
    ]  # fmt: skip
    gpu = next(line for line in lines if line.strip().startswith("testbed GPU"))
    assert gpu.split()[-8:] == [
        "100.00",
        "0.00",
        "0.00",
        "100.00",
        "0.0%",
        "0.00",
        "0.00",
        "100.00",
    ]
    assert any(line.startswith("  burn rate on testbed CPU: ") for line in lines)
    # The Slurm account of each pool, by the portal's naming rule (the GPU pool's suffix).
    assert "  to charge testbed CPU: sbatch --account=pawsey0003 --partition=work" in lines
    assert "  to charge testbed GPU: sbatch --account=pawsey0003-gpu --partition=gpu" in lines


def test_su_balance_users_shows_each_users_share_of_the_period(portal):
    status, out, _ = run(["-p", "pawsey0003", "--users"], portal)
    assert status == 0
    users = [line.split() for line in out.splitlines() if line.startswith("    ")]
    assert users[0][:4] == ["carol", "37.50", "SU", "75.0%"]
    assert users[1][:4] == ["alice", "12.50", "SU", "25.0%"]


def test_su_balance_year_lists_every_budget_period_and_marks_the_current_one(portal):
    status, out, _ = run(["-p", "pawsey0003", "--year"], portal)
    assert status == 0
    cpu_rows = [line for line in out.splitlines() if line.strip().startswith("testbed CPU")]
    assert len(cpu_rows) == 4  # quarterly periods of a one-year grant
    assert sum(" *" in row for row in cpu_rows) == 1


def test_su_balance_year_includes_the_grants_still_to_come(portal, centre):
    """Issue 27: after the chair granted next year's SU, --year showed only the current grant."""
    today = pool_today(centre.cpu)
    next_start = add_months(today.replace(day=1), 12)
    allocation_grant(
        project=centre.p3, pool=centre.cpu, amount=Decimal(80000), period_start=next_start,
        period_end=add_months(next_start, 12), actor=centre.staff,
    )  # fmt: skip
    status, out, _ = run(["-p", "pawsey0003", "--year"], portal)
    assert status == 0
    lines = out.splitlines()
    heading = lines.index("  grants on testbed CPU (current and future):")
    now, later = lines[heading + 1].split(), lines[heading + 2].split()
    assert now[3:5] == ["current", "1,200.00"]
    assert now[-2:] == ["1,160.00", "left"]  # 1200 + 10 - 50
    last_day = add_months(next_start, 12) - timedelta(days=1)
    assert later[:5] == [next_start.isoformat(), "..", last_day.isoformat(), "future", "80,000.00"]
    assert later[-2:] == ["80,000.00", "left"]
    # Without --year, the table keeps to today's budget period.
    assert "future" not in run(["-p", "pawsey0003"], portal)[1]


def test_su_balance_without_a_project_shows_all_of_yours_and_json_is_the_portals_data(portal):
    status, out, _ = run(["--json"], portal)
    assert status == 0
    data = json.loads(out)
    assert [project["project"] for project in data["projects"]] == ["pawsey0003"]
    pools = {pool["pool"]: pool for pool in data["projects"][0]["pools"]}
    assert pools["testbed CPU"]["current"]["used_su"] == "50.000000"
    assert pools["testbed CPU"]["partitions"] == ["work"]


def test_a_bad_token_is_refused_with_a_clear_message(portal):
    status, out, err = run(["-p", "pawsey0003"], {**portal, "SU_PORTAL_TOKEN": "not-a-token"})
    assert status == su_balance.EXIT_TOKEN
    assert out == ""
    assert "did not accept your token" in err
    assert f"{portal['SU_PORTAL_URL']}/account/tokens/" in err


def test_a_project_you_are_not_in_is_not_found(portal):
    status, _, err = run(["-p", "pawsey0002"], portal)
    assert status == su_balance.EXIT_NOT_FOUND
    assert "project pawsey0002: not found, or you are not a member of it" in err


def test_an_unreachable_portal_is_reported_and_the_command_ends():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nobody listens once the socket closes
    environ = {"SU_PORTAL_URL": f"http://127.0.0.1:{port}", "SU_PORTAL_TOKEN": "x"}
    status, _, err = run(["-p", "pawsey0003"], environ)
    assert status == su_balance.EXIT_UNREACHABLE
    assert f"cannot reach the portal at http://127.0.0.1:{port}" in err


def test_the_token_is_read_from_the_config_file_and_a_readable_file_is_warned_about(
    portal, tmp_path
):
    token_file = tmp_path / ".config" / "su-portal" / "token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(portal["SU_PORTAL_TOKEN"] + "\n")
    token_file.chmod(0o644)
    environ = {"SU_PORTAL_URL": portal["SU_PORTAL_URL"], "HOME": str(tmp_path)}
    status, out, err = run(["-p", "pawsey0003"], environ)
    assert status == 0
    assert out.startswith("pawsey0003")
    assert "chmod 600" in err
    token_file.chmod(0o600)
    assert run(["-p", "pawsey0003"], environ)[2] == ""


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SU_PORTAL_TOKEN": "x"}, "set SU_PORTAL_URL"),
        ({"SU_PORTAL_URL": "ftp://portal", "SU_PORTAL_TOKEN": "x"}, "must start with https://"),
        ({"SU_PORTAL_URL": "http://127.0.0.1:9", "HOME": "/nonexistent"}, "no token"),
    ],
)
def test_missing_settings_are_explained_before_anything_is_sent(environ, message):
    status, _, err = run([], environ)
    assert status == su_balance.EXIT_USAGE
    assert message in err


def test_the_installed_command_runs_with_the_standard_library_alone(portal):
    environment = {"PATH": os.environ.get("PATH", ""), **portal}
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(CLIENTS / "su-balance"), "-p", "pawsey0003"],
        env=environment, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pawsey0003  Astro")


def test_the_period_reads_the_same_last_day_in_su_balance_the_json_and_the_page(portal, centre):
    """Issue 16, item 8: su-balance printed a period end one day before the page and JSON."""
    from django.test import Client

    _, out, _ = run(["--json"], portal)
    current = json.loads(out)["projects"][0]["pools"][0]["current"]
    end = date.fromisoformat(current["period_end"])  # stored exclusive: the next period's first
    assert current["period_last_day"] == (end - timedelta(days=1)).isoformat()
    _, table, _ = run(["-p", "pawsey0003"], portal)
    assert f"{current['period_start']} .. {current['period_last_day']}" in table
    browser = Client()
    browser.force_login(centre.carol)
    dashboard = browser.get("/").content.decode()
    last_day, end = current["period_last_day"], current["period_end"]
    assert f'<time class="date" datetime="{last_day}">{last_day}</time>' in dashboard
    assert f'datetime="{end}"' not in dashboard

"""``make demo``'s data load, in a fresh interpreter on SQLite as a first-time user runs it: its
output is the logins and a line per step, not mail bodies or warnings."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _manage(args: list[str], var_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update({"PORTAL_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "portal.settings"})
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip


def test_the_demo_prints_logins_with_their_roles_and_files_its_mail(tmp_path):
    assert _manage(["migrate", "--noinput", "-v0"], tmp_path).returncode == 0
    loaded = _manage(["loaddemo"], tmp_path)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    output = loaded.stdout + loaded.stderr
    assert "No hostname was supplied" not in output  # kombu, about the in-process broker
    assert "Subject:" not in output  # budget-alert mails went to files, not the terminal
    assert "celery.app.trace" not in output
    assert "chair of the open round" in output
    assert "reviewer in the open round" in output
    mails = list((tmp_path / "mail").glob("*.log"))
    assert mails, "the demo's budget alerts were not written to var/mail/"
    assert f"{tmp_path / 'mail'}/" in output
    # The committee journey has something at each step (issue 16, item 3).
    assert "alice's request waits to be opened, bob's is under review" in output

"""Rules of docs/architecture.md that import-linter cannot see: transactions belong to
services, and services hand work to Celery in one place (portal/queue.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("accounting", "allocations", "portal")
INTERFACE = re.compile(r"(^|_)(api|pages|views)\.py$")


def _modules() -> list[Path]:
    return [
        path
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
    ]


def test_no_page_or_api_view_opens_a_transaction():
    offenders = [
        str(path.relative_to(ROOT))
        for path in _modules()
        if INTERFACE.search(path.name)
        and re.search(r"transaction\.(atomic|on_commit)", path.read_text())
    ]
    assert offenders == [], f"transactions belong to services, not views: {offenders}"


def test_only_portal_queue_hands_work_to_celery_outside_the_tasks_modules():
    allowed = {ROOT / "portal" / "queue.py"}
    offenders = [
        str(path.relative_to(ROOT))
        for path in _modules()
        if path not in allowed
        and path.name != "tasks.py"
        and "management" not in path.parts
        and re.search(r"\.(delay|apply_async|send_task)\(", path.read_text())
    ]
    assert offenders == [], f"enqueue through portal.queue.task_enqueue: {offenders}"

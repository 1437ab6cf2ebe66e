"""Rules of docs/architecture.md that import-linter cannot see: transactions belong to
services, services hand work to Celery in one place (kit/queue.py), and the map names every
module."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("accounting", "allocations", "kit", "people", "portal", "projects")
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
    allowed = {ROOT / "kit" / "queue.py"}
    offenders = [
        str(path.relative_to(ROOT))
        for path in _modules()
        if path not in allowed
        and path.name != "tasks.py"
        and "management" not in path.parts
        and re.search(r"\.(delay|apply_async|send_task)\(", path.read_text())
    ]
    assert offenders == [], f"enqueue through kit.queue.task_enqueue: {offenders}"


def test_the_architecture_map_names_every_package_and_module():
    """docs/architecture.md is "read this first": a module it does not name is one a newcomer
    cannot find. Each folder is named (as `folder/`), and each module by its file name in that
    folder's row; a management command is covered by its folder's `management/commands/`."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = {
        match.group(1): match.group(0)
        for match in re.finditer(r"^\| `([a-z_/]+/)` \|.*$", text, flags=re.MULTILINE)
    }
    missing = []
    for path in _modules():
        relative = path.relative_to(ROOT)
        if path.name == "__init__.py" and relative.parent.name != "models":
            continue
        parts = relative.parts
        if "management" in parts:
            folder = "/".join(parts[: parts.index("management")]) + "/"
            if f"`{folder}`" not in text or "management/commands/" not in rows.get(folder, ""):
                missing.append(str(relative))
            continue
        folder = "/".join(parts[:-1]) + "/"
        if folder not in rows:
            # a module of a package inside a mapped folder (allocations/models/grants.py)
            parent = "/".join(parts[:-2]) + "/"
            if f"`{parts[-2]}/`" in rows.get(parent, ""):
                continue
            missing.append(f"{relative} (folder {folder} has no row)")
        elif f"`{path.name}`" not in rows[folder] and path.name not in {"apps.py"}:
            missing.append(str(relative))
    assert missing == [], f"docs/architecture.md does not name: {missing}"

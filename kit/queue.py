"""The one place where services hand work to Celery.

Services name a task instead of importing its module: tasks import services, so a service that
imported tasks would close an import cycle. The task runs after the current transaction commits
(or at once outside one), so a worker never reads rows that are not there yet; eagerly, in the
calling process, when no broker is configured (``make demo``).
"""

from __future__ import annotations

from typing import Any

from celery import current_app as app
from django.db import transaction


def task_enqueue(
    *, name: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
) -> None:
    """Send the registered task ``name`` with ``args``/``kwargs`` once the transaction commits."""
    if name not in app.tasks:
        # A web process has not imported the apps' tasks modules yet: autodiscover them now.
        app.loader.import_default_modules()
    task = app.tasks[name]  # KeyError names a task that does not exist: a bug, not input
    transaction.on_commit(lambda: task.apply_async(args=args, kwargs=kwargs or {}))

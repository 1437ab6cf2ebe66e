"""The one place where services hand work to Celery.

Services name a task instead of importing its module: tasks import services, so a service that
imported tasks would close an import cycle. The task runs after the current transaction commits
(or at once outside one), so a worker never reads rows that are not there yet; eagerly, in the
calling process, when no broker is configured (``make demo``).

A send whose broker does not answer gives up fast (one retry, the broker's short connect
timeout in ``CELERY_BROKER_TRANSPORT_OPTIONS``), and no result is subscribed to (Celery's Redis
result store would otherwise retry its connection twenty times, a second apart): a web request
then answers at once with the reason instead of after 20 s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import current_app as app
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError

# Kombu's default waits up to 0.6 s over three retries; one retry is enough for a blip.
SEND_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2}


class TaskNotSent(Exception):
    """The broker did not take the task (Redis is down or unreachable)."""


def task_enqueue(
    *,
    name: str,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    on_unsent: Callable[[TaskNotSent], None] | None = None,
) -> None:
    """Send the registered task ``name`` with ``args``/``kwargs`` once the transaction commits.

    When the broker does not take it, ``on_unsent`` is called with the reason (a service marks
    its row failed, saying so); without it, :class:`TaskNotSent` is raised."""
    if name not in app.tasks:
        # A web process has not imported the apps' tasks modules yet: autodiscover them now.
        app.loader.import_default_modules()
    task = app.tasks[name]  # KeyError names a task that does not exist: a bug, not input

    def send() -> None:
        try:
            task.apply_async(
                args=args,
                kwargs=kwargs or {},
                ignore_result=True,  # nothing reads it: the service's rows say how it went
                retry_policy=SEND_RETRY_POLICY,
            )
        except BrokerError as error:
            unsent = TaskNotSent(f"the task queue (Celery's broker) did not answer: {error}")
            if on_unsent is None:
                raise unsent from error
            on_unsent(unsent)

    transaction.on_commit(send)

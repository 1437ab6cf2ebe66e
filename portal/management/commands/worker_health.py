"""python manage.py worker_health [--timeout SECONDS]: is a Celery worker answering?"""

from __future__ import annotations

import json
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.tasks import worker_health


class Command(BaseCommand):
    help = "Send a task through the broker and print what the worker that ran it reports."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=10.0)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = worker_health.delay().get(timeout=options["timeout"])
        except CeleryTimeout:
            raise CommandError(f"no worker answered within {options['timeout']} s") from None
        self.stdout.write(json.dumps(report, indent=2))

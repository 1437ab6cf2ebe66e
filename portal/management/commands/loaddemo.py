"""python manage.py loaddemo: clusters from examples/ and demo accounts (never in production)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.demo import DEMO_ACCOUNTS, demo_load


class Command(BaseCommand):
    help = "Load the demo data: example clusters and the demo logins. Idempotent."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("loaddemo creates accounts with known passwords; not in production")
        summary = demo_load(examples=Path(settings.BASE_DIR) / "examples")
        for line in summary:
            self.stdout.write(line)
        self.stdout.write("\nDemo logins (username / password):")
        for account in DEMO_ACCOUNTS:
            self.stdout.write(f"  {account.username:<10} {account.password:<16} {account.role}")

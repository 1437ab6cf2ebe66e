"""python manage.py loaddemo: the demo data of ``make demo`` (never in production)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.demo import DEMO_ACCOUNTS, demo_load


class Command(BaseCommand):
    help = "Load the demo: clusters, projects, logins, the sacct sample and generated history."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("loaddemo creates accounts with known passwords; not in production")
        demo_load(examples=Path(settings.BASE_DIR) / "examples", report=self.stdout.write)
        self.stdout.write("\nDemo logins (username / password):")
        for account in DEMO_ACCOUNTS:
            self.stdout.write(f"  {account.username:<8} {account.password:<15} {account.role}")
        if settings.EMAIL_BACKEND.endswith("filebased.EmailBackend"):
            self.stdout.write(
                f"\nMail the portal sends (budget alerts, requests, invitations) is written to "
                f"{settings.EMAIL_FILE_PATH}/, a file per message."
            )

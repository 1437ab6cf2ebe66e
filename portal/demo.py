"""Demo data for ``make demo``: the example clusters and a few logins with known passwords."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from accounting.services import cluster_apply
from accounting.specs import cluster_definition_load


@dataclass(frozen=True)
class DemoAccount:
    username: str
    password: str
    role: str
    is_staff: bool = False


DEMO_ACCOUNTS = (
    DemoAccount("staff", "staff-demo-pw", "centre staff (admin)", is_staff=True),
    DemoAccount("alice", "alice-demo-pw", "researcher"),
    DemoAccount("bob", "bob-demo-pw", "researcher"),
    DemoAccount("carol", "carol-demo-pw", "researcher"),
)


@transaction.atomic
def demo_load(*, examples: Path) -> list[str]:
    """Apply every example cluster spec and create the demo accounts; safe to run twice."""
    lines = []
    for path in sorted((examples / "clusters").glob("*.json")):
        result = cluster_apply(definition=cluster_definition_load(path), note="loaddemo")
        state = "loaded" if result.changed else "unchanged"
        lines.append(f"cluster {result.cluster.name}: {state}")
    user_model = get_user_model()
    for account in DEMO_ACCOUNTS:
        user, created = user_model.objects.get_or_create(username=account.username)
        if created:
            user.set_password(account.password)
            user.email = f"{account.username}@example.org"
            user.is_staff = user.is_superuser = account.is_staff
            user.save()
        lines.append(f"user {account.username}: {'created' if created else 'exists'}")
    return lines

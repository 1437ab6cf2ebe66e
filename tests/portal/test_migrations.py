"""The committed migrations describe the models exactly: moving code between modules (the
accounting domains share one app and its migrations) must never need a new migration."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_the_models_need_no_migration_that_is_not_committed() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exit_:  # --check exits 1 when a migration is missing
        pytest.fail(f"models and migrations disagree (exit {exit_.code}):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()

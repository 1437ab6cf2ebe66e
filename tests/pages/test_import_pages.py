"""The import pages name each bucket in words a staff member understands, and say what to do
about quarantined lines (issue 16, item 7)."""

from __future__ import annotations

import pytest

from accounting.models import ImportRun
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def test_a_runs_buckets_are_named_in_words_with_advice_on_quarantined_lines(site):
    run = ImportRun.objects.order_by("pk").first()
    ImportRun.objects.filter(pk=run.pk).update(quarantined=2, imported=225, charged=0)
    page = client_for(site.users["staff"]).get(f"/accounting/imports/{run.pk}/").content.decode()
    assert "nothing to book" not in page
    assert "Already known" in page
    assert "no SU to book" in page
    assert "Still running" in page
    assert 'id="quarantine-advice"' in page
    assert "2 lines quarantined." in page
    listing = client_for(site.users["staff"]).get("/accounting/imports/").content.decode()
    assert ">Already known<" in listing
    assert ">Imported<" not in listing

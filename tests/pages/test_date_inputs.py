"""Every date input of every page carries an ISO value (YYYY-MM-DD): a browser's date input
rejects the locale's 17/11/2026, shows blank, and the page's window then looks empty."""

from __future__ import annotations

import re

import pytest

from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db

DATE_INPUT = re.compile(r'<input type="date"[^>]*>')
VALUE = re.compile(r'value="([^"]*)"')
ISO = re.compile(r"\d{4}-\d{2}-\d{2}")


@pytest.mark.parametrize(
    "url",
    [
        "/accounting/overhead/",
        "/accounting/utilisation/?start=2026-11-01&end=2026-11-17",
        "/accounting/costs/?start=2026-11-01&end=2026-11-17",
        "/accounting/projects/{code}/jobs/?ended_from=2026-11-01&ended_to=2026-11-17",
    ],
)
def test_date_inputs_hold_iso_dates(site, url):
    page = client_for(site.users["staff"]).get(url.format(code=site.project.code))
    assert page.status_code == 200
    inputs = DATE_INPUT.findall(page.content.decode())
    assert inputs, f"{url} has no date input"
    values = [match.group(1) for field in inputs if (match := VALUE.search(field))]
    assert values, f"{url} fills none of its date inputs"
    assert all(ISO.fullmatch(value) for value in values), values

"""Issue 32, "degrade, don't fail": with the cache on Redis (PORTAL_CACHE_URL, as compose
configures it), stopping Redis leaves the API, ``su-balance`` and the project page answering
200 with the same figures, and one log line says the cache is unreachable.

The cache is a private redis-server (tests/redis_server.py) that the test stops at a chosen
point; the shared Redis of the test services is never touched.
"""

from __future__ import annotations

import logging
import re

import redis
from django.core.cache import caches
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.api.test_su_balance import portal, run  # noqa: F401 (the live portal fixture)

# The page's own per-request token; everything else must read the same.
CSRF = re.compile(rb'name="csrfmiddlewaretoken" value="[^"]*"')


def _page(client: Client, url: str) -> bytes:
    response = client.get(url)
    assert response.status_code == 200
    return CSRF.sub(b"", response.content)


def test_the_api_su_balance_and_the_project_page_answer_while_the_cache_is_down(
    redis_cache,
    portal,  # noqa: F811 (the imported fixture)
    centre,
    caplog,
):
    caplog.set_level(logging.WARNING, logger="kit.cache_backend")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {portal['SU_PORTAL_TOKEN']}")
    pages = Client()
    pages.force_login(centre.carol)
    balance_url = reverse("api:project-balance", args=["pawsey0003"])
    page_url = reverse("allocations:project-detail", args=["pawsey0003"])

    balance = api.get(balance_url)
    assert balance.status_code == 200
    page = _page(pages, page_url)
    status, table, err = run(["-p", "pawsey0003"], portal)
    assert (status, err) == (0, "")
    # Both the throttle and the chart data went through the Redis about to stop.
    keys = redis.Redis.from_url(redis_cache.url(1)).keys("*")
    assert any(key.startswith(b":1:throttle_") for key in keys), keys
    assert any(key.startswith(b":1:charts:") for key in keys), keys
    assert caplog.records == []

    redis_cache.stop()

    during = api.get(balance_url)
    assert during.status_code == 200
    assert during.json() == balance.json()
    status, table_during, err = run(["-p", "pawsey0003"], portal)
    assert (status, err) == (0, "")
    assert table_during == table
    cpu = next(line for line in table_during.splitlines() if "testbed CPU" in line)
    # A quarter of 1200 SU, +10 topped up, 50 used: 260 left, none pending or reserved, 260
    # free (tests/api/test_su_balance.py).
    assert cpu.split()[-8:] == [
        "300.00", "+10.00", "50.00", "260.00", "16.1%", "0.00", "0.00", "260.00"
    ]  # fmt: skip
    assert _page(pages, page_url) == page

    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1, messages  # once per outage, not once per request
    assert messages[0].startswith(
        f"cache unreachable: Redis at redis://127.0.0.1:{redis_cache.port}/1 (ConnectionError:"
    )
    assert caplog.records[0].levelname == "WARNING"
    # The throttles kept counting, in this process's memory.
    fallback = caches["default"].fallback
    assert any(key.startswith(":1:throttle_") for key in fallback._cache), list(fallback._cache)

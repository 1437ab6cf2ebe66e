"""The Redis cache degrades to local memory while Redis is away (kit/cache_backend.py), on a
private redis-server that the tests stop and start again."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from django.core.cache import cache, caches

from kit.cache_backend import FallbackRedisCache, redacted
from tests.redis_server import redis_server

OUTAGE = "cache unreachable: Redis at"
RECOVERY = "cache reachable again: Redis at"


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "kit.cache_backend"]


def test_the_settings_use_the_fallback_cache_with_bounded_timeouts(redis_cache):
    backend = caches["default"]
    assert isinstance(backend, FallbackRedisCache)
    options = backend._cache._pool_options
    assert options["socket_connect_timeout"] == 1
    assert options["socket_timeout"] == 1
    assert "RETRY_SECONDS" not in options  # ours, not redis-py's


def test_a_stopped_redis_is_served_from_local_memory_and_logged_once(redis_cache, caplog):
    caplog.set_level(logging.WARNING, logger="kit.cache_backend")
    cache.set("kept", "in redis")
    redis_cache.stop()

    assert cache.get("kept") is None  # Redis's copy is out of reach: computed again
    for number in range(50):
        cache.set("counted", number)
        assert cache.get("counted") == number
    assert cache.get_or_set("made", lambda: "here") == "here"
    assert cache.add("made", "again") is False
    assert cache.incr("counted") == 50
    assert cache.get_many(["counted", "made"]) == {"counted": 50, "made": "here"}
    cache.delete("made")
    assert not cache.has_key("made")

    messages = _messages(caplog)
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"{OUTAGE} redis://127.0.0.1:{redis_cache.port}/1 ")
    assert "Connection refused" in messages[0]


def test_redis_is_tried_again_and_its_return_is_logged_and_empties_the_local_copy(
    private_redis, caplog
):
    caplog.set_level(logging.WARNING, logger="kit.cache_backend")
    url = private_redis.url(2)
    backend = FallbackRedisCache(url, {"OPTIONS": {"RETRY_SECONDS": 0.2}})
    private_redis.stop()
    backend.set("during", "the outage")
    assert backend.unreachable

    with redis_server(port=private_redis.port):
        time.sleep(0.3)  # past RETRY_SECONDS: the next call asks Redis again
        backend.set("after", "the outage")
        assert not backend.unreachable
        assert backend.get("after") == "the outage"
        assert backend.get("during") is None
        assert backend.fallback.get("during") is None  # emptied, not kept for the next outage
    messages = _messages(caplog)
    assert [message.split(" redis://")[0] for message in messages] == [OUTAGE, RECOVERY]


def test_a_redis_that_never_answers_costs_one_bounded_wait_per_retry_interval(caplog):
    # A listening socket that never replies: connections succeed, reads time out.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        backend = FallbackRedisCache(url, {"OPTIONS": {"socket_timeout": 0.3, "RETRY_SECONDS": 60}})
        started = time.monotonic()
        backend.set("a", 1)
        first = time.monotonic() - started
        started = time.monotonic()
        for _ in range(100):
            assert backend.get("a") == 1
        rest = time.monotonic() - started
    assert 0.3 <= first < 3
    assert rest < 0.5  # no further waits until RETRY_SECONDS have passed
    assert "TimeoutError" in _messages(caplog)[0]


def test_a_password_in_the_url_is_never_logged():
    assert redacted("redis://:s3cret@cache:6379/1") == "redis://:***@cache:6379/1"
    assert redacted("redis://portal:s3cret@cache/1") == "redis://portal:***@cache/1"
    assert redacted("redis://cache:6379/1") == "redis://cache:6379/1"

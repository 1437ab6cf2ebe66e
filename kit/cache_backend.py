"""The Redis cache, which degrades to this process's memory instead of failing a request.

Everything the portal keeps in its cache can be computed again or counted afresh: chart data
keyed on the ledger's stamp (kit/caching.py), cost distributions, and the API's throttle
counts (DRF's throttles read and write ``cache``). So a Redis that does not answer must not
turn pages and API calls into 500s: :class:`FallbackRedisCache` is Django's ``RedisCache``
whose every operation, when Redis cannot be reached, goes to a local-memory cache instead.

While Redis is away the process does not try it on every call: it waits ``RETRY_SECONDS``
between attempts, so a Redis that times out costs one bounded wait per interval, not one per
cache call. The outage is logged once when it starts (a WARNING naming the server and the
error) and once when Redis answers again; the local copy is then emptied, so nothing written
during one outage can come back in the next. What the fallback costs: caches and throttle
counts are per process until Redis returns (docs/configuration.md, "When Redis is away").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

# Redis is unreachable: refused, reset, timed out, still loading its data, out of connections.
UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
# A cache call must never hold a request for long: defaults when OPTIONS does not say.
SOCKET_TIMEOUT_SECONDS = 1.0
RETRY_SECONDS = 5.0


def redacted(url: str) -> str:
    """``url`` without its password, for logs and the health check."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass
class _Outage:
    """What the processes' caches of one Redis server know of its outage."""

    error: str = ""
    down_since: float | None = None
    retry_at: float = 0.0


# Django makes a cache object per thread; an outage is one per server and process.
_outages: dict[str, _Outage] = {}
_outages_lock = threading.Lock()


class FallbackRedisCache(RedisCache):
    """Django's ``RedisCache``; while Redis is unreachable, this process's local memory.

    ``OPTIONS`` go to redis-py as for ``RedisCache``, with ``socket_connect_timeout`` and
    ``socket_timeout`` of 1 s unless given, and one more of its own, ``RETRY_SECONDS``: how
    long to wait before trying Redis again after it failed (5 s).
    """

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        options = dict(params.get("OPTIONS") or {})
        self.retry_seconds = float(options.pop("RETRY_SECONDS", RETRY_SECONDS))
        options.setdefault("socket_connect_timeout", SOCKET_TIMEOUT_SECONDS)
        options.setdefault("socket_timeout", SOCKET_TIMEOUT_SECONDS)
        super().__init__(server, {**params, "OPTIONS": options})
        self.server = redacted(server)
        with _outages_lock:
            self._outage = _outages.setdefault(server, _Outage())
        # Local-memory caches of one name share their storage: every thread sees one copy.
        self.fallback = LocMemCache(
            f"redis-fallback:{server}",
            {key: value for key, value in params.items() if key != "OPTIONS"},
        )

    @property
    def unreachable(self) -> bool:
        """Whether this process is serving from its local memory now."""
        return self._outage.down_since is not None

    def _either(self, name: str, *args: Any, **kwargs: Any) -> Any:
        outage = self._outage
        fallback: Callable[..., Any] = getattr(self.fallback, name)
        if outage.down_since is not None and time.monotonic() < outage.retry_at:
            return fallback(*args, **kwargs)
        try:
            result = getattr(super(), name)(*args, **kwargs)
        except UNREACHABLE as error:
            self._went_away(error)
            return fallback(*args, **kwargs)
        if outage.down_since is not None:
            self._came_back()
        return result

    def _went_away(self, error: Exception) -> None:
        outage = self._outage
        with _outages_lock:
            now = time.monotonic()
            outage.retry_at = now + self.retry_seconds
            if outage.down_since is not None:
                return
            outage.down_since = now
            outage.error = f"{type(error).__name__}: {error}"
        logger.warning(
            "cache unreachable: Redis at %s (%s); serving from this process's local memory "
            "and trying Redis again every %g s",
            self.server,
            outage.error,
            self.retry_seconds,
        )

    def _came_back(self) -> None:
        outage = self._outage
        with _outages_lock:
            if outage.down_since is None:
                return
            seconds = time.monotonic() - outage.down_since
            outage.down_since = None
            outage.error = ""
            self.fallback.clear()
        logger.warning(
            "cache reachable again: Redis at %s answers after %.0f s away; local copy emptied",
            self.server,
            seconds,
        )

    # Every operation of Django's RedisCache (get_or_set, decr and the async variants are
    # built on these by BaseCache).
    def add(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("add", *args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("get", *args, **kwargs)

    def set(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("set", *args, **kwargs)

    def touch(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("touch", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("delete", *args, **kwargs)

    def get_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("get_many", *args, **kwargs)

    def has_key(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("has_key", *args, **kwargs)

    def incr(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("incr", *args, **kwargs)

    def set_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("set_many", *args, **kwargs)

    def delete_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("delete_many", *args, **kwargs)

    def clear(self) -> Any:
        return self._either("clear")

"""What is expensive to compute and changes only with the ledger, kept in the cache.

Chart data of a project page (SU per week by partition and by user, SU per day of a budget
period) is read from the daily roll-ups, which change only when an import commits a batch. It
is cached under a key that holds :func:`accounting.ledger.selectors.ledger_stamp`, which moves
with every committed batch of every import, in whatever process: the next request after an
import reads the new figures, and a cached figure is never served stale. The cache is Redis
when ``PORTAL_CACHE_URL`` is set (several web processes share it), Django's local memory
otherwise (docs/configuration.md). While that Redis does not answer, each process keeps what it
computes in its own memory (kit/cache_backend.py): pages are slower, never failing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from typing import TypeVar

from django.core.cache import cache

T = TypeVar("T")
# A key is never stale (it holds the ledger's stamp); this only bounds what is kept.
CHART_SECONDS = 3600


def remembered(parts: tuple[Hashable, ...], compute: Callable[[], T]) -> T:
    """``compute()``, or what it gave before for the same ``parts``."""
    key = "charts:" + hashlib.sha256(repr(parts).encode()).hexdigest()
    value: T | None = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, CHART_SECONDS)
    return value

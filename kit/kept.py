"""The last few values a process computed, kept in its memory: :class:`Kept`, a thread-safe
least-recently-used map of a fixed size. For values keyed on everything they are computed from
(so never stale) and too large to fetch from the shared cache at every request: a large
answer's gzip (``kit.compression``), a year of Q(T)'s joined columns
(``accounting.utilisation.selectors``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    """At most ``size`` values; a get or a put makes its key the most recent, a put beyond the
    size drops the least recent."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)

    def __len__(self) -> int:
        return len(self._values)

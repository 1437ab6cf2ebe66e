"""Items of an iterator computed by a thread while the caller works on the ones before.

An import reads and parses a file (CPU in Python and in polars, which runs outside the GIL)
and writes batches to the database (the process mostly waits on the server's COPY and index
work). :func:`read_ahead` lets the next lines be read while a batch is written: the thread
hands over lists of items through a bounded queue, so at most ``depth`` lists are held ahead
of the caller, and an exception of the iterator is raised in the caller at the item where it
happened. A caller that stops early (an exception, ``close()``) stops the thread at its next
hand-over; what it had read ahead is dropped, never acted on.

Parse times measured inside the thread overlap the caller's: stage timings then add up to
more than the wall time.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import Final, TypeVar

T = TypeVar("T")

_END: Final = object()


class _Failed:
    """The iterator's exception, carried to the caller."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(
    items: Iterator[T], *, chunk: int = 1000, depth: int = 2, name: str = "read-ahead"
) -> Generator[T, None, None]:
    """Yield what ``items`` yields, in order, computed ahead by a daemon thread.

    ``items`` must not use the caller's thread-bound state (a Django database connection is
    per thread): readers and parsers only.
    """
    if chunk < 1 or depth < 1:
        raise ValueError("chunk and depth must be at least 1")
    handover: queue.Queue[list[T] | _Failed | object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        part: list[T] = []
        try:
            for item in items:
                part.append(item)
                if len(part) >= chunk:
                    handover.put(part)
                    if stop.is_set():
                        return
                    part = []
            ending: object = _END
        except BaseException as error:  # carried to the caller, raised there
            ending = _Failed(error)
        # The items read before the end (or the error) first, then the end.
        handover.put(part)
        if not stop.is_set():
            handover.put(ending)

    thread = threading.Thread(target=produce, name=name, daemon=True)
    thread.start()
    try:
        while True:
            part = handover.get()
            if part is _END:
                return
            if isinstance(part, _Failed):
                raise part.error
            yield from part  # type: ignore[misc]
    finally:
        # Unblock a thread waiting to hand over: its put then succeeds, it sees the stop and
        # ends. It is not waited for (it may be mid-read of a slow pipe); it holds at most one
        # list more, and touches nothing but the iterator.
        stop.set()
        while True:
            try:
                handover.get_nowait()
            except queue.Empty:
                break

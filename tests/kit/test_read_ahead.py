"""kit.read_ahead: the items of an iterator, in order, computed by a thread ahead of the caller."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kit.read_ahead import read_ahead


@given(
    items=st.lists(st.integers(), max_size=60),
    chunk=st.integers(min_value=1, max_value=9),
    depth=st.integers(min_value=1, max_value=3),
)
def test_every_item_once_in_order(items: list[int], chunk: int, depth: int) -> None:
    assert list(read_ahead(iter(items), chunk=chunk, depth=depth)) == items


class Boom(Exception):
    pass


def _failing_after(count: int) -> Iterator[int]:
    yield from range(count)
    raise Boom("line 7: the file ended in the middle of a job")


@pytest.mark.parametrize("chunk", [1, 3, 100])
def test_the_iterators_error_is_raised_after_the_items_before_it(chunk: int) -> None:
    seen: list[int] = []
    items = read_ahead(_failing_after(5), chunk=chunk)
    seen.extend(next(items) for _ in range(5))
    with pytest.raises(Boom, match="line 7"):
        next(items)
    assert seen == [0, 1, 2, 3, 4]


def test_a_caller_that_stops_early_stops_the_thread() -> None:
    produced: list[int] = []

    def endless() -> Iterator[int]:
        number = 0
        while True:
            produced.append(number)
            yield number
            number += 1

    items = read_ahead(endless(), chunk=10, depth=2, name="read-ahead-under-test")
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    threads = [t for t in threading.enumerate() if t.name == "read-ahead-under-test"]
    for thread in threads:
        thread.join(timeout=30)  # a bound, not a wait: the stop is seen at the next hand-over
        assert not thread.is_alive()
    # It read at most the lists the queue holds, the one being handed over and one more.
    assert len(produced) <= 10 * (2 + 2) + 1


def test_the_thread_works_while_the_caller_does() -> None:
    """The second list is made before the caller asks for it: ahead, not on demand."""
    made = threading.Event()

    def watched() -> Iterator[int]:
        yield 1
        yield 2
        made.set()

    items = read_ahead(watched(), chunk=1)
    assert next(items) == 1
    assert made.wait(timeout=30)  # set by the thread, with the caller still at item 1
    assert list(items) == [2]


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        next(read_ahead(iter([1]), chunk=0))

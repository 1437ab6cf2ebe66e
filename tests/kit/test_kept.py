"""kit.kept.Kept: the last few values a process computed, least recently used dropped first."""

from __future__ import annotations

import threading

from kit.kept import Kept


def test_a_value_is_kept_and_the_least_recently_used_goes_first():
    kept: Kept[str, int] = Kept(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # "a" is now the most recent
    kept.put("c", 3)
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (1, None, 3)
    assert len(kept) == 2


def test_putting_a_key_again_replaces_its_value_and_makes_it_recent():
    kept: Kept[str, int] = Kept(2)
    kept.put("a", 1)
    kept.put("b", 2)
    kept.put("a", 10)
    kept.put("c", 3)
    assert (kept.get("a"), kept.get("b")) == (10, None)


def test_threads_never_leave_more_than_its_size():
    kept: Kept[int, int] = Kept(8)

    def fill(offset: int) -> None:
        for number in range(500):
            kept.put(offset + number, number)
            kept.get(offset + number - 3)

    threads = [threading.Thread(target=fill, args=(1000 * n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kept) == 8

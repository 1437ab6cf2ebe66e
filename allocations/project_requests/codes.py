"""The centre's next project code: its prefix and the next number (``pawsey0005`` after
``pawsey0004``). Pure: codes in, a code out."""

from __future__ import annotations

import re
from collections.abc import Iterable

DIGITS = 4  # pawsey0001: the width of a centre's first code


def next_project_code(*, prefix: str, codes: Iterable[str]) -> str:
    """The code after the highest ``<prefix><number>`` among ``codes``, as wide as the widest
    of them (at least ``DIGITS``); codes of another form do not count."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)$")
    numbers = [match.group(1) for code in codes if (match := pattern.match(code))]
    highest = max((int(number) for number in numbers), default=0)
    width = max([DIGITS, *(len(number) for number in numbers)])
    return f"{prefix}{highest + 1:0{width}d}"

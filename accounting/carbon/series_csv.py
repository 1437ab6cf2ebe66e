"""A grid intensity series as CSV: columns ``start`` and ``g_per_kwh`` (docs/energy-and-carbon.md).

Pure module: no Django. ``start`` is ISO 8601, with an offset (``2026-07-01T00:00+08:00``,
``...Z``) or without one, in the cluster's local time (the earlier of a repeated hour when the
clocks go back); a bare date is its local midnight. ``g_per_kwh`` is grams of CO2e per kWh,
zero or more. Other columns are ignored; blank lines are skipped. A file is taken whole or not
at all: every bad line is reported, by its line number.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from datetime import UTC, datetime, tzinfo
from decimal import Decimal, InvalidOperation

from accounting.carbon.footprint import IntensityStep
from kit.errors import ApplicationError

COLUMNS = ("start", "g_per_kwh")
MAX_G_PER_KWH = Decimal(100_000)  # the dirtiest grids are near 1,000; a typo is far above
_PLACES = Decimal("0.001")  # what GridIntensity.g_per_kwh keeps
_SHOWN = 20  # problems listed in an error; the count says how many more


class IntensityCsvError(ApplicationError):
    """A file that cannot be loaded; ``problems`` name the lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = problems[:_SHOWN]
        more = len(problems) - len(shown)
        text = "; ".join(shown) + (f"; and {more} more" if more else "")
        super().__init__(f"nothing loaded: {text}")


def _start(text: str, zone: tzinfo) -> datetime:
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    return when.astimezone(UTC)


def _g_per_kwh(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"g_per_kwh {text!r} is not a number") from None
    if not value.is_finite():
        raise ValueError(f"g_per_kwh {text!r} is not a number")
    if value < 0:
        raise ValueError(f"g_per_kwh {text} is negative")
    if value > MAX_G_PER_KWH:
        raise ValueError(f"g_per_kwh {text} is above {MAX_G_PER_KWH:,} g/kWh")
    if value != value.quantize(_PLACES):
        raise ValueError(f"g_per_kwh {text} has more than 3 decimal places")
    return value


def intensity_csv_parse(lines: Iterable[str], *, zone: tzinfo) -> list[IntensityStep]:
    """The steps of a series, in time order; raise ``IntensityCsvError`` naming every bad
    line (a bad time or number, a start given twice, a missing column, no rows)."""
    reader = csv.reader(lines)
    header: list[str] | None = None
    problems: list[str] = []
    steps: list[IntensityStep] = []
    seen: dict[datetime, int] = {}
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [cell.strip().lstrip("\ufeff").lower() for cell in row]
            missing = [name for name in COLUMNS if name not in header]
            if missing:
                raise IntensityCsvError(
                    [f"line {reader.line_num}: the header has no column {', '.join(missing)}"
                     f" (expected {', '.join(COLUMNS)})"]
                )  # fmt: skip
            where = {name: header.index(name) for name in COLUMNS}
            continue
        line = reader.line_num
        if len(row) < len(header):
            problems.append(f"line {line}: {len(row)} columns, the header has {len(header)}")
            continue
        text = row[where["start"]].strip()
        try:
            starts_at = _start(text, zone)
        except ValueError:
            problems.append(f"line {line}: start {text!r} is not an ISO 8601 time")
            continue
        try:
            value = _g_per_kwh(row[where["g_per_kwh"]].strip())
        except ValueError as error:
            problems.append(f"line {line}: {error}")
            continue
        if starts_at in seen:
            problems.append(
                f"line {line}: start {starts_at.isoformat()} is also on line {seen[starts_at]}"
            )
            continue
        seen[starts_at] = line
        steps.append(IntensityStep(starts_at=starts_at, g_per_kwh=value))
    if header is None:
        raise IntensityCsvError(["the file is empty (expected a header: start,g_per_kwh)"])
    if problems:
        raise IntensityCsvError(problems)
    if not steps:
        raise IntensityCsvError(["the file has a header but no rows"])
    return sorted(steps, key=lambda step: step.starts_at)

"""Calendar arithmetic every domain shares: months added to a day, and the last day of a
period stored as ``[start, end)``. Pure: dates in, dates out."""

from __future__ import annotations

from datetime import date, timedelta


def add_months(day: date, months: int) -> date:
    """The same day ``months`` later, clamped to the month's end (31 Jan + 1 = 28/29 Feb)."""
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    for candidate in (day.day, 30, 29, 28):
        try:
            return date(year, month, min(day.day, candidate))
        except ValueError:
            continue
    raise AssertionError("unreachable")


def last_day(end: date) -> date:
    """The last day of a period stored as ``[start, end)``: what people read, on every page,
    in the API (``period_last_day``) and in su-balance. Storage keeps the exclusive end."""
    return end - timedelta(days=1)

"""Numbers and dates as people read them: the one home of how the portal writes a figure for a
person (pages, mails, CSV headers, ``su-balance``). Pure: numbers in, text out.

- Counts, SU and money carry thousands separators: ``60,000``, ``80,000 SU``.
- Money is shown to the cent: ``5.89 EUR``.
- Masses read in g below 1,000 g, in kg below 1,000 kg, in t above: ``58.1 kg``.
- Hours carry at most two decimals and no trailing zeros: ``48 h``, ``1.5 h``.
- Durations read as days and hours (or hours and minutes, ...): ``2 days``, ``1 day 3 hours``.
- A count and its noun agree: ``1 GPU``, ``2 GPUs``.
- A period stored as ``[start, end)`` is shown by its last day (``kit.calendar.last_day``).

CSV data cells are not written here: they stay plain numbers for machines.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from kit.calendar import last_day

NONE = "—"
"""What a missing figure reads as."""

Number = int | float | Decimal


def _decimal(value: Number) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def grouped(value: Number | None, places: int = 0, *, trim: bool = False) -> str:
    """``value`` rounded half up to ``places`` decimals, with comma thousands separators.
    ``trim`` drops trailing zeros of the decimals (``48.00`` reads ``48``)."""
    if value is None:
        return NONE
    try:
        number = _decimal(value)
    except (InvalidOperation, ValueError):
        return str(value)
    if not number.is_finite():
        return str(value)
    rounded = number.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    if rounded == 0:
        rounded = abs(rounded)  # no "-0"
    text = f"{rounded:,.{places}f}"
    if trim and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def count(value: Number | None) -> str:
    """A count of jobs, lines, nodes ...: ``60,000``."""
    return grouped(value, 0)


def su(value: Number | None) -> str:
    """Service units for a person: grouped, at most two decimals, trailing zeros dropped
    (``80,000``, ``1,234.5``). The ledger keeps six decimals; this is display only."""
    return grouped(value, 2, trim=True)


def money(value: Number | None, currency: str = "") -> str:
    """Money to the cent, grouped, with its currency when given: ``5.89 EUR``."""
    text = grouped(value, 2)
    return f"{text} {currency}" if currency and value is not None else text


def hours(value: Number | None) -> str:
    """Hours with at most two decimals, no trailing zeros: ``48``, ``1.5``, ``0.25``."""
    return grouped(value, 2, trim=True)


def mass(grams: Number | None) -> str:
    """A mass given in grams, in the unit that reads best: ``850 g``, ``58.1 kg``, ``1.2 t``.
    From 1,000 g it is kg and from 1,000 kg it is t, with one decimal; the unit is chosen
    after rounding, so 999.96 g reads ``1.0 kg``, never ``1,000 g``."""
    if grams is None:
        return NONE
    value = _decimal(grams)
    if abs(value) >= Decimal("999950"):
        return f"{grouped(value / 1_000_000, 1)} t"
    if abs(value) >= Decimal("999.95"):
        return f"{grouped(value / 1_000, 1)} kg"
    return f"{grouped(value, 1, trim=True)} g"


def plural(number: Number | None, singular: str, plural_form: str = "") -> str:
    """A count with its noun in agreement: ``1 GPU``, ``2 GPUs``, ``1,200 jobs``."""
    if number is None:
        return f"{NONE} {plural_form or singular + 's'}"
    word = singular if _decimal(number) == 1 else (plural_form or singular + "s")
    whole = _decimal(number) == _decimal(number).to_integral_value()
    return f"{count(number) if whole else grouped(number, 2, trim=True)} {word}"


_DURATION_UNITS = (("day", 86_400), ("hour", 3_600), ("min", 60), ("s", 1))
_UNIT_PLURALS = {"day": "days", "hour": "hours", "min": "min", "s": "s"}


def duration(seconds: Number | None) -> str:
    """A duration in its two largest units, rounded down: ``2 days``, ``1 day 3 hours``,
    ``3 hours 5 min``, ``45 s``. Never ``172800 s``."""
    if seconds is None:
        return NONE
    left = int(_decimal(seconds))
    for index, (unit, size) in enumerate(_DURATION_UNITS):
        if left >= size:
            major, rest = divmod(left, size)
            parts = [plural(major, unit, _UNIT_PLURALS[unit])]
            if index + 1 < len(_DURATION_UNITS):
                minor_unit, minor_size = _DURATION_UNITS[index + 1]
                if rest // minor_size:
                    parts.append(plural(rest // minor_size, minor_unit, _UNIT_PLURALS[minor_unit]))
            return " ".join(parts)
    return "0 s"


def day(value: date | datetime | None) -> str:
    """A day as ISO ``YYYY-MM-DD`` (the portal's one date format); empty for None."""
    if value is None:
        return ""
    return f"{value:%Y-%m-%d}"


def period_last_day(end: date | None) -> str:
    """The last day of a period stored as ``[start, end)``, as people read it: a period whose
    ``end`` is 2027-01-08 runs to 2027-01-07, on pages, in mails and in ``su-balance``."""
    return "" if end is None else day(last_day(end))


def period(start: date, end: date) -> str:
    """A period stored as ``[start, end)`` in words: ``2026-01-08 to 2027-01-07``."""
    return f"{day(start)} to {period_last_day(end)}"

"""Slurm's memory units, shared by cluster specs, quotes and the sacct parser. Pure module.

Slurm's "MB" is MiB: a spec's ``memory_mb`` and sacct's ``M`` are the same unit, and ``K``, ``G``
and ``T`` are factors of 1024 from there (DESIGN section 7).
"""

from __future__ import annotations

from decimal import Decimal

# MiB per unit. Slurm's "M" is MiB (it calls it MB) and each step is a factor of 1024.
_MEMORY_UNIT_MB = {
    "K": Decimal(1) / Decimal(1024),
    "M": Decimal(1),
    "G": Decimal(1024),
    "T": Decimal(1024**2),
    "P": Decimal(1024**3),
}


def is_ascii_digits(text: str) -> bool:
    # str.isdigit alone accepts "²" and Arabic-Indic digits; sacct prints ASCII only.
    return text.isdigit() and text.isascii()


def parse_decimal(text: str, what: str) -> Decimal:
    # Only plain decimals: Decimal() would also take "NaN", "1e3", "-1" and "1_000".
    integral, dot, fraction = text.partition(".")
    if not is_ascii_digits(integral) or (dot and not is_ascii_digits(fraction)):
        raise ValueError(f"{what} {text!r} is not a non-negative decimal number")
    return Decimal(text)


def parse_memory_mb(text: str) -> Decimal:
    """Return a Slurm memory amount in MiB (Slurm's "MB").

    ``"1914M"`` -> 1914, ``"100G"`` -> 102400, ``"478.50G"`` -> 489984, ``"512K"`` -> 0.5,
    ``"2T"`` -> 2097152. A bare number is already MB. Raises ValueError otherwise.
    """
    if not text:
        raise ValueError("memory is empty")
    factor = _MEMORY_UNIT_MB.get(text[-1].upper())
    number = text[:-1] if factor is not None else text
    value = parse_decimal(number, "memory")
    if factor is not None and factor != 1:
        value *= factor
    # "478.50G" * 1024 is Decimal("489984.00") and "512K" is Decimal("0.5000000000"):
    # drop the trailing zeros (normalize() alone would write 102400 as 1.024E+5).
    integral = value.to_integral_value()
    return integral if value == integral else value.normalize()

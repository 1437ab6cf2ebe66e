"""Small helpers for the few hand-written SQL queries (the balance reads two): quoted table
names, placeholders, and values as the database returns them (PostgreSQL or SQLite)."""

from __future__ import annotations

import decimal
from datetime import date
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Model

SU_QUANTUM = Decimal("0.000001")
_FLOAT = decimal.Context(prec=15)  # as Django reads SQLite's sums of decimals


def sql_decimal(value: Any) -> Decimal:
    """A sum as the database returns it (Decimal on PostgreSQL, float or int on SQLite), to
    the ledger's 6 places; 0 for NULL."""
    if value is None:
        return Decimal(0)
    if isinstance(value, float):
        return _FLOAT.create_decimal_from_float(value).quantize(SU_QUANTUM)
    return Decimal(value).quantize(SU_QUANTUM)


def sql_day(value: Any) -> date:
    """A date as the database returns it (a date, or ISO text on SQLite)."""
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def table_names(*models: type[Model]) -> list[str]:
    """The models' tables, quoted for this database."""
    return [connection.ops.quote_name(model._meta.db_table) for model in models]


def placeholders(count: int) -> str:
    """``(%s, %s, ...)`` for an ``IN`` of ``count`` values."""
    return "(" + ", ".join(["%s"] * count) + ")"

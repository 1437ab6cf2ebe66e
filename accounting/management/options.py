"""Shared parsing of command-line options of the accounting commands."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.management.base import CommandError
from django.utils.dateparse import parse_date, parse_datetime


def moment_option(text: str | None, option: str) -> datetime | None:
    """An ISO 8601 date or time given to ``option``; a date is its midnight, naive means UTC."""
    if not text:
        return None
    moment = parse_datetime(text)
    if moment is None:
        day = parse_date(text)
        if day is None:
            raise CommandError(f"{option}: not an ISO 8601 date or time: {text!r}")
        moment = datetime(day.year, day.month, day.day)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

"""When a grant ends, the pure rules: which notice is due and what a project's status becomes
(allocations/grants/lifecycle.py). No database."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from allocations.grants.lifecycle import StatusChange, notice_due, status_next

DAYS = (30, 14, 7)


@pytest.mark.parametrize(
    ("days_left", "due"),
    [(45, None), (31, None), (30, 30), (29, 30), (15, 30), (14, 14), (8, 14), (7, 7), (1, 7),
     (0, None), (-3, None)],
)  # fmt: skip
def test_the_most_urgent_notice_reached_is_due(days_left, due):
    assert notice_due(days_left=days_left, notice_days=DAYS) == due


def test_no_notice_is_due_when_none_is_configured():
    assert notice_due(days_left=3, notice_days=()) is None


END = date(2027, 1, 1)


def _next(status, *, since=None, last_end=END, ongoing=False, today, after=90):
    return status_next(
        status=status, since=since, last_grant_end=last_end, has_current_or_future_grant=ongoing,
        today=today, archive_after_days=after,
    )  # fmt: skip


def test_an_active_project_expires_on_the_day_its_last_grant_ended():
    assert _next("active", today=END - timedelta(days=1), ongoing=True) is None  # its last day
    assert _next("active", today=END) == StatusChange("expired", END)
    assert _next("active", today=END + timedelta(days=10)) == StatusChange("expired", END)


def test_an_active_project_with_a_current_or_future_grant_or_none_at_all_stays():
    assert _next("active", today=END, ongoing=True) is None
    assert _next("active", last_end=None, today=END) is None  # new, not granted yet


def test_an_expired_project_is_archived_after_the_configured_days():
    assert _next("expired", since=END, today=END + timedelta(days=89)) is None
    archived_on = END + timedelta(days=90)
    assert _next("expired", since=END, today=archived_on) == StatusChange("archived", archived_on)
    assert _next("expired", since=END, today=END, after=0) == StatusChange("archived", END)


def test_an_expired_project_without_a_date_counts_from_its_last_grant_end():
    assert _next("expired", today=END + timedelta(days=90)).status == "archived"


def test_a_new_grant_revives_an_expired_project_not_an_archived_or_suspended_one():
    today = END + timedelta(days=5)
    assert _next("expired", since=END, today=today, ongoing=True) == StatusChange("active", today)
    assert _next("archived", since=END, today=today, ongoing=True) is None
    assert _next("suspended", today=today + timedelta(days=400)) is None

"""Numbers as people read them (kit/numbers.py): separators, cents, masses, hours, durations,
plurals and the last day of a period; and su-balance writes SU by the same rule."""

from __future__ import annotations

import importlib.util
from datetime import UTC, date
from decimal import Decimal
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kit import numbers

decimals = st.decimals(min_value=-(10**12), max_value=10**12, places=6, allow_nan=False)


def test_counts_su_and_money_carry_thousands_separators():
    assert numbers.count(60000) == "60,000"
    assert numbers.count(7297) == "7,297"
    assert numbers.su(Decimal("80000")) == "80,000"
    assert numbers.su(Decimal("1234.500000")) == "1,234.5"
    assert numbers.money(Decimal("1234567.891")) == "1,234,567.89"


def test_money_is_shown_to_the_cent_with_its_currency():
    assert numbers.money(Decimal("5.8879"), "Euro") == "5.89 Euro"
    assert numbers.money(Decimal("0.005")) == "0.01"  # half up, as a person rounds
    assert numbers.money(None, "EUR") == "—"


def test_masses_read_in_kg_or_t_from_a_thousand():
    assert numbers.mass(Decimal("58060.8")) == "58.1 kg"
    assert numbers.mass(850) == "850 g"
    assert numbers.mass(Decimal("12.34")) == "12.3 g"
    assert numbers.mass(1_234_567) == "1.2 t"
    assert numbers.mass(Decimal("999.96")) == "1.0 kg"  # never "1,000 g"
    assert numbers.mass(999_960) == "1.0 t"  # never "1,000.0 kg"


def test_hours_lose_trailing_zeros_and_keep_at_most_two_decimals():
    assert numbers.hours(Decimal("48.0000")) == "48"
    assert numbers.hours(Decimal("1.5000")) == "1.5"
    assert numbers.hours(Decimal("0.2549")) == "0.25"
    assert numbers.hours(1234) == "1,234"


def test_durations_read_as_days_and_hours():
    assert numbers.duration(172800) == "2 days"
    assert numbers.duration(86400 + 3 * 3600 + 59) == "1 day 3 hours"
    assert numbers.duration(3600 + 5 * 60) == "1 hour 5 min"
    assert numbers.duration(45) == "45 s"
    assert numbers.duration(0) == "0 s"


def test_a_count_and_its_noun_agree():
    assert numbers.plural(1, "GPU") == "1 GPU"
    assert numbers.plural(4, "GPU") == "4 GPUs"
    assert numbers.plural(0, "job") == "0 jobs"
    assert numbers.plural(1200, "entry", "entries") == "1,200 entries"


def test_a_period_is_shown_by_its_last_day():
    # The alert mail said 2027-01-08 where the pages say 2027-01-07: the stored end is
    # exclusive, and people read the last day.
    assert numbers.period_last_day(date(2027, 1, 8)) == "2027-01-07"
    assert numbers.period(date(2026, 1, 8), date(2027, 1, 8)) == "2026-01-08 to 2027-01-07"


@given(decimals, st.integers(min_value=0, max_value=4))
def test_grouped_text_reads_back_as_the_rounded_number(value, places):
    text = numbers.grouped(value, places)
    assert Decimal(text.replace(",", "")) == value.quantize(
        Decimal(1).scaleb(-places), rounding="ROUND_HALF_UP"
    )
    whole = text.lstrip("-").split(".")[0]
    assert all(len(group) == 3 for group in whole.split(",")[1:])


@given(st.integers(min_value=0, max_value=10**9))
def test_a_duration_never_overstates_and_loses_less_than_its_smaller_unit(seconds):
    text = numbers.duration(seconds)
    sizes = {"day": 86400, "days": 86400, "hour": 3600, "hours": 3600, "min": 60, "s": 1}
    words = text.split()
    parts = list(zip(words[::2], words[1::2], strict=True))
    shown = sum(int(amount.replace(",", "")) * sizes[unit] for amount, unit in parts)
    assert shown <= seconds
    smaller = {86400: 3600, 3600: 60, 60: 1, 1: 1}[sizes[parts[0][1]]]
    assert seconds - shown < smaller or seconds == shown


@given(st.decimals(min_value=0, max_value=10**10, places=3, allow_nan=False))
def test_a_mass_never_shows_a_thousand_of_its_unit(grams):
    amount, unit = numbers.mass(grams).split()
    assert unit in {"g", "kg", "t"}
    assert unit == "t" or Decimal(amount.replace(",", "")) < 1000


def _su_balance():
    path = Path(__file__).resolve().parents[2] / "clients" / "su_balance.py"
    spec = importlib.util.spec_from_file_location("su_balance_for_numbers", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


su_balance = _su_balance()


@given(decimals)
def test_su_balance_writes_su_as_the_portal_does(value):
    # su-balance is one file people copy to a login node, so it cannot import kit; it
    # follows the same rule, to the cent for its columns.
    assert su_balance._su(value) == numbers.grouped(value, 2)


def test_the_day_filter_keeps_a_date_on_one_line_and_the_last_day_filter_reads_an_end():
    from datetime import datetime

    from kit.template_filters import day, last_day

    assert day(date(2026, 12, 8)) == '<time class="date" datetime="2026-12-08">2026-12-08</time>'
    assert day(datetime(2026, 12, 8, 23, 30, tzinfo=UTC)).endswith(">2026-12-08</time>")
    assert day(None) == ""
    assert day("2026-12-08") == "2026-12-08"
    assert last_day(date(2027, 1, 8)) == (
        '<time class="date" datetime="2027-01-07">2027-01-07</time>'
    )


def test_the_command_filter_breaks_a_command_between_its_words_never_inside_an_option():
    # A phone broke "sbatch --account=pawsey0001 --partition=work" after "--".
    from kit.template_filters import command

    assert command("sbatch --account=p<1> --partition=work") == (
        '<span class="nowrap">sbatch</span> <span class="nowrap">--account=p&lt;1&gt;</span> '
        '<span class="nowrap">--partition=work</span>'
    )

"""The template filters of ``kit.numbers``, built into every template (``TEMPLATES`` in
settings: ``builtins``), so a page or a mail writes ``{{ run.lines|count }}`` without a load.

``{{ value|day }}`` writes a date as ``<time class="date">`` that never breaks across lines
(``static/css/portal.css``); mails, which are text, use ``kit.numbers.day``.

``{% url %}`` is Django's tag reversing through the process's cache (``kit.links``): a builtin
library's tag replaces the default one of the same name in every template."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django import template
from django.template.base import Parser, Token
from django.template.defaulttags import url as _django_url
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from kit import numbers
from kit.calendar import last_day as _last_day
from kit.links import CachedURLNode

register = template.Library()


@register.tag("url")
def url(parser: Parser, token: Token) -> CachedURLNode:
    """Django's ``{% url %}``, parsed by Django, reversed once per process (``kit.links``)."""
    node = _django_url(parser, token)
    return CachedURLNode(node.view_name, node.args, node.kwargs, node.asvar)


register.filter("count", numbers.count)
register.filter("su", numbers.su)
register.filter("hours", numbers.hours)
register.filter("mass", numbers.mass)
register.filter("duration", numbers.duration)
register.filter("period_last_day", numbers.period_last_day)


@register.filter("money")
def money(value: Any, currency: str = "") -> str:
    """``{{ cost|money:"EUR" }}``: to the cent, grouped."""
    return numbers.money(value, currency)


@register.filter("plural")
def plural(value: Any, nouns: str) -> str:
    """``{{ gpus|plural:"GPU" }}`` or ``{{ n|plural:"entry,entries" }}``: ``1 GPU``, ``2 GPUs``."""
    singular, _, plural_form = nouns.partition(",")
    return numbers.plural(value, singular, plural_form)


@register.filter("day")
def day(value: date | datetime | None) -> SafeString | str:
    """A date as ``2027-01-07`` in a ``<time>`` that never wraps; empty for None."""
    if value is None or value == "":
        return ""
    if not isinstance(value, date):
        return str(value)  # text already (autoescaped like any other)
    if isinstance(value, datetime) and timezone.is_aware(value):
        value = timezone.localtime(value)  # the day as the page's time zone has it, as |date does
    text = numbers.day(value)
    return format_html('<time class="date" datetime="{}">{}</time>', text, text)


@register.filter("last_day")
def last_day(end: date | None) -> SafeString | str:
    """The last day of a ``[start, end)`` period, written as ``day`` writes it."""
    return "" if end is None else day(_last_day(end))


@register.filter("command")
def command(text: Any) -> SafeString:
    """A shell command in a page's text, ``<code>{{ line|command }}</code>``: on a narrow
    screen it breaks between its words, never inside an option ("--" / "account=...")."""
    return format_html_join(
        " ", '<span class="nowrap">{}</span>', ((w,) for w in str(text).split())
    )

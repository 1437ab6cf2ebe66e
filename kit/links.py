"""Reversing a URL once per process: every page's ``{% url %}`` (the navigation bar's twenty
links, the staff dashboard's four per project) goes through :func:`reversed_url`.

Django's ``reverse`` walks the URL patterns on every call: about 35 microseconds each, a
hundred per view of the staff dashboard (3.5 ms of its server time, issue 33). What it returns
depends only on the view's name, its arguments, the URLconf and the script prefix, so the
answer is kept per process for those (``functools.lru_cache``), and only where every argument
is a plain ``str`` or ``int`` (a model instance's text could change while its hash does not).
A URLconf swapped by a test (``override_settings(ROOT_URLCONF=...)``) is part of the key, and
Django's ``setting_changed`` empties the cache as it does its own. A name that does not
reverse raises ``NoReverseMatch`` every time, as before (an exception is never kept).

``kit.template_filters`` registers the ``url`` tag on :class:`CachedURLNode`, built into every
template, so a template writes ``{% url %}`` as always."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.template import Context
from django.template.defaulttags import URLNode
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils.html import conditional_escape

KEPT_URLS = 8192


@lru_cache(maxsize=KEPT_URLS)
def _kept(
    prefix: str,
    urlconf: Any,
    view: str,
    args: tuple[str | int, ...],
    kwargs: tuple[tuple[str, str | int], ...],
    current_app: str | None,
) -> str:
    # ``prefix`` and ``urlconf`` only key the answer: reverse() reads them itself.
    return reverse(view, urlconf=urlconf, args=args, kwargs=dict(kwargs), current_app=current_app)


def _plain(value: Any) -> bool:
    return type(value) in (str, int)


def reversed_url(
    view: str,
    *,
    args: list[Any] | tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    current_app: str | None = None,
) -> str:
    """``django.urls.reverse``, answered from the process's cache when every argument is a
    plain string or integer."""
    kwargs = kwargs or {}
    if all(_plain(arg) for arg in args) and all(_plain(value) for value in kwargs.values()):
        urlconf = get_urlconf() or settings.ROOT_URLCONF
        return _kept(
            get_script_prefix(), urlconf, view, tuple(args), tuple(sorted(kwargs.items())),
            current_app,
        )  # fmt: skip
    return reverse(view, args=args, kwargs=kwargs, current_app=current_app)


@receiver(setting_changed)
def _urls_changed(*, setting: str, **_: Any) -> None:
    if setting == "ROOT_URLCONF":
        _kept.cache_clear()


class CachedURLNode(URLNode):
    """Django's ``{% url %}`` node, reversing through :func:`reversed_url`."""

    def render(self, context: Context) -> str:
        args = [arg.resolve(context) for arg in self.args]
        kwargs = {name: value.resolve(context) for name, value in self.kwargs.items()}
        view = self.view_name.resolve(context)
        request = getattr(context, "request", None)
        current_app = getattr(request, "current_app", None)
        if current_app is None:
            current_app = getattr(getattr(request, "resolver_match", None), "namespace", None)
        url = ""
        try:
            url = reversed_url(view, args=args, kwargs=kwargs, current_app=current_app)
        except NoReverseMatch:
            if self.asvar is None:
                raise
        if self.asvar:
            context[self.asvar] = url
            return ""
        return conditional_escape(url) if context.autoescape else url

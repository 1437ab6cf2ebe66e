"""Typed readers for settings taken from the environment.

Each helper fails loudly (``ImproperlyConfigured``) on a value it cannot read, so a typo in a
deployment's environment stops the process at start-up instead of running with a default.
Secrets may come from ``NAME_FILE`` (a path, as Docker and systemd credentials provide them).
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str:
    """A string; ``default`` when unset, an error when unset and no default."""
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"environment variable {name} is required")
        return default
    return value


def env_optional(name: str) -> str | None:
    """A string, or ``None`` when the variable is unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None


def env_bool(name: str, default: bool) -> bool:
    """A boolean written as 1/0, true/false, yes/no or on/off."""
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """An integer, optionally bounded below."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks are dropped."""
    value = os.environ.get(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_int_list(name: str, default: list[int], *, minimum: int | None = None) -> list[int]:
    """A comma-separated list of integers, each optionally bounded below; blanks are dropped."""
    numbers = []
    for item in env_list(name, [str(number) for number in default]):
        try:
            number = int(item)
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an integer") from None
        if minimum is not None and number < minimum:
            raise ImproperlyConfigured(f"{name}: {number} must be at least {minimum}")
        numbers.append(number)
    return numbers


def env_secret(name: str, default: str | None = None) -> str | None:
    """A secret from ``NAME`` or from the file named by ``NAME_FILE`` (not both)."""
    direct = os.environ.get(name)
    file_name = os.environ.get(f"{name}_FILE")
    if direct is not None and file_name is not None:
        raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
    if file_name is not None:
        path = Path(file_name)
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ImproperlyConfigured(
                f"{name}_FILE={file_name!r} cannot be read: {error}"
            ) from None
        if not secret:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} is empty")
        return secret
    return direct if direct is not None else default

"""The one base of every domain error: a rule of the domain refused what was asked.

A service raises a subclass with a sentence a person can act on; the API answers it as a 400
with that sentence (``kit.api.api_exception_handler``) and pages show it beside the form. A
domain registers nothing: raising a subclass is enough. (HackSoft's Django-Styleguide calls it
``ApplicationError``.) It is a ``ValueError`` too, so code that reads a value and catches
``ValueError`` keeps working.
"""

from __future__ import annotations


class ApplicationError(ValueError):
    """A domain rule refused the request; ``str(error)`` says why, in words. ``field`` names
    the input the rule is about, when one is: a page shows the sentence on that field, the API
    under that key of ``errors``."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

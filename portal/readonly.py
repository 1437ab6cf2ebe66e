"""An archived project is read-only (``projects.access.project_writable_check``): a page that
tried to change one (a form left open before it was archived, an address typed by hand) answers
with the refusal, in words, on the project's page instead of an error page. The API answers the
same refusal as a 400 with the sentence (``kit.api.api_exception_handler``)."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from projects.access import ProjectReadOnly


class ReadOnlyProjectMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, ProjectReadOnly):
            return None
        messages.error(request, str(exception))
        return redirect("allocations:project-detail", exception.code)

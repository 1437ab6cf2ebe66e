"""The API's filter backend (REST_FRAMEWORK DEFAULT_FILTER_BACKENDS). A module of its own: DRF
imports it while rest_framework.generics is still loading, so it must not import kit.api."""

from __future__ import annotations

from typing import Any

from django_filters.rest_framework import DjangoFilterBackend  # type: ignore[import-untyped]
from rest_framework import exceptions


class ApiFilterBackend(DjangoFilterBackend):
    """django-filter's backend, where a filter given with an empty value (``?end=``,
    ``?import_run=``) is a 400 naming it: django-filter would read it as no filter at all and
    answer everything, which is not what the caller asked for."""

    def get_filterset(self, request: Any, queryset: Any, view: Any) -> Any:
        filterset = super().get_filterset(request, queryset, view)
        if filterset is not None:
            empty = [name for name in filterset.filters if request.query_params.get(name) == ""]
            if empty:
                raise exceptions.ValidationError(
                    {name: ["give a value, or leave the parameter out"] for name in empty}
                )
        return filterset

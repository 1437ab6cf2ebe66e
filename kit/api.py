"""What every REST API view shares (docs/api.md): errors as JSON, page-number pagination,
throttles, permissions, UTC times, the OpenAPI post-processing, and the token endpoints.

Errors always have the same shape, whatever raised them::

    {"message": "one readable sentence", "errors": {"field": ["what is wrong with it"]}}

``PermissionDenied`` from a service is a 403, a rule of the domain (any
``kit.errors.ApplicationError``) a 400, an object the caller may not see a 404.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django import forms
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import IntegrityError, models
from django.forms import ValidationError as FormValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views import csrf as django_csrf
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from django_filters.fields import (  # type: ignore[import-untyped]
    ChoiceField,
    IsoDateTimeField,
)
from django_filters.filters import (  # type: ignore[import-untyped]
    BooleanFilter,
    ChoiceFilter,
    IsoDateTimeFilter,
    NumberFilter,
)
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.fields import SkipField
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import SAFE_METHODS, AllowAny, BasePermission
from rest_framework.relations import PKOnlyObject
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView, set_rollback
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.viewsets import GenericViewSet

from kit.access import is_staff
from kit.errors import ApplicationError

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# Path parameters: anything else is answered by the JSON 404 of ``not_found`` before a view
# (and the database) sees it.
CODE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # a project's Slurm account
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"  # a cluster's name (a slug)
USERNAME_PATTERN = r"[\w.@+-]{1,150}"
ID_PATTERN = r"[0-9]{1,18}"


# --- Errors ---------------------------------------------------------------------------------


def _messages(detail: Any) -> list[str]:
    if isinstance(detail, dict):
        return [text for value in detail.values() for text in _messages(value)]
    if isinstance(detail, list):
        return [text for value in detail for text in _messages(value)]
    return [str(detail)]


def _message_for(detail: Any) -> str:
    """One sentence for a client that shows only ``message``."""
    if isinstance(detail, dict):
        parts = []
        for field_name, value in list(detail.items())[:3]:
            texts = _messages(value)
            text = texts[0] if texts else "invalid"
            parts.append(
                text if field_name == api_settings.NON_FIELD_ERRORS_KEY else f"{field_name}: {text}"
            )
        return "; ".join(parts) or "invalid input"
    texts = _messages(detail)
    return texts[0] if texts else "invalid input"


def error_body(message: str, errors: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"message": message, "errors": errors or {}}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's ``EXCEPTION_HANDLER``: every error as ``{"message", "errors"}``."""
    if isinstance(exc, ApplicationError):
        set_rollback()
        on_field: dict[str, Any] | None = {exc.field: [str(exc)]} if exc.field else None
        return Response(error_body(str(exc), on_field), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, IntegrityError):
        # A race with another request (the input serializers check uniqueness first).
        set_rollback()
        return Response(
            error_body("this conflicts with data saved meanwhile; read it again and retry"),
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        errors = detail if isinstance(detail, dict) else {api_settings.NON_FIELD_ERRORS_KEY: detail}
        response.data = error_body(_message_for(detail), dict(errors))
    elif isinstance(exc, exceptions.APIException):
        response.data = error_body(_message_for(exc.detail))
    return response


@csrf_exempt  # a POST to a wrong URL is a 404 like a GET, never Django's HTML CSRF page
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Every URL under /api/ that names nothing: a JSON 404 like every other error."""
    hint = "" if request.path.endswith("/") else " (API paths end with '/')"
    return JsonResponse(error_body(f"Not found.{hint}"), status=404)


# Errors Django answers before or around a view (CSRF_FAILURE_VIEW and the handler400-500 of
# portal/urls.py): JSON under /api/, Django's own pages everywhere else.


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    if _is_api(request):
        return JsonResponse(error_body(f"CSRF Failed: {reason}"), status=403)
    return django_csrf.csrf_failure(request, reason=reason)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(error_body("Bad request."), status=400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(error_body(str(exception) or "Permission denied."), status=403)
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return not_found(request)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(error_body("Server error: the operators have been told."), status=500)
    return defaults.server_error(request)


# --- Pagination, throttles, permissions -----------------------------------------------------


def _positive_integer(request: Request, name: str) -> int | None:
    """A whole number of at least 1 from the query string, or None when the parameter is
    absent; anything else (empty, ``null``, ``1.5``, ``-1``) is a 400 naming the parameter."""
    if name not in request.query_params:
        return None
    text = request.query_params[name]
    if not (text.isascii() and text.isdigit() and len(text) <= 18 and int(text) >= 1):
        raise exceptions.ValidationError({name: ["must be a whole number, 1 or more"]})
    return int(text)


class ApiPagination(PageNumberPagination):
    """``?page=N&page_size=M`` (50 by default, at most 1000: a larger size is cut to 1000).
    Either parameter, when given, must be a whole number of at least 1 (else 400); a page
    past the last is a 404."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 1000
    last_page_strings = ()  # ``page=last`` is not documented: pages are numbers

    def get_page_number(self, request: Request, paginator: Any) -> int:
        return _positive_integer(request, self.page_query_param) or 1

    def get_page_size(self, request: Request) -> int:
        size = _positive_integer(request, self.page_size_query_param)
        return self.page_size if size is None else min(size, self.max_page_size)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
            if parameter["name"] == self.page_size_query_param:
                parameter["description"] = (
                    f"Results per page: {self.page_size} by default, at most "
                    f"{self.max_page_size} (a larger number is cut to {self.max_page_size})."
                )
        return parameters


class ApiViewSet(GenericViewSet):
    """Base of the API's view sets: paginated lists; each action a thin operation."""

    pagination_class = ApiPagination

    def paginated(self, queryset: Any, serializer: type[BaseSerializer]) -> Response:
        """One page of ``queryset`` rendered by ``serializer``, in the API's page envelope."""
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(serializer(page, many=True).data)


class IsStaff(BasePermission):
    message = "only centre staff may do this"

    def has_permission(self, request: Request, view: Any) -> bool:
        return is_staff(request.user)


class IsStaffOrReadOnly(BasePermission):
    """Any signed-in user reads (what the queryset shows them); only staff write."""

    message = "only centre staff may change this"

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.method in SAFE_METHODS or is_staff(request.user)


class StaffOnlyHidden(BasePermission):
    """Staff resources: everyone else gets 404, as on the staff pages (they are not advertised
    to researchers); anonymous callers still get 401."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user.is_authenticated:
            return False
        if not is_staff(request.user):
            raise exceptions.NotFound()
        return True


def acting_user(request: Request) -> User:
    """The signed-in user (views run behind ``IsAuthenticated``)."""
    from django.contrib.auth.models import User

    user = request.user
    if not isinstance(user, User):
        raise exceptions.NotAuthenticated()
    return user


class SlugField(serializers.SlugRelatedField[Any]):
    """A related object named by one of its fields, in input. A NUL byte is refused as
    invalid: PostgreSQL cannot compare text holding one, and the lookup would fail with a
    DataError (HTTP 500) instead of answering 400."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("invalid")
        return super().to_internal_value(data)


def slug_of(slug_field: str, **kwargs: Any) -> serializers.SlugRelatedField[Any]:
    """A related object rendered as one of its fields (a name, a code, a username)."""
    kwargs.setdefault("read_only", True)
    return serializers.SlugRelatedField(slug_field=slug_field, **kwargs)


# Fields DRF reads in its own way: primary keys without loading the object, nested lists.
_GENERIC_FIELDS = (
    serializers.PrimaryKeyRelatedField,
    serializers.ManyRelatedField,
    serializers.HyperlinkedRelatedField,
    serializers.ListSerializer,
    serializers.SerializerMethodField,
    serializers.HiddenField,
)


# --- UTC times ------------------------------------------------------------------------------


class UtcDateTimeField(serializers.DateTimeField):
    """ISO 8601 in UTC with ``Z``, whatever the portal's display time zone."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("default_timezone", UTC)
        super().__init__(**kwargs)


class QuerySerializer(serializers.Serializer):
    """Query parameters read with a serializer: one given empty (``?end=``) is a 400 naming
    it, like any other bad value. DRF would read it as absent, as it reads an empty input
    of an HTML form, and the schema documents no empty value."""

    def to_internal_value(self, data: Any) -> Any:
        empty = {
            name: ["must not be empty"]
            for name, field in self.fields.items()
            if not field.read_only
            and not getattr(field, "allow_blank", False)
            and hasattr(data, "get")
            and data.get(name) == ""
        }
        if empty:
            raise serializers.ValidationError(empty)
        return super().to_internal_value(data)


class EndsAfterStart(serializers.Serializer):
    """Input with spans (a grant's period, a round's window): each end must come after its
    start, or the request is a 400 naming the end field (never the service's ValueError)."""

    spans: tuple[tuple[str, str], ...] = (("period_start", "period_end"),)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        for start, end in self.spans:
            if start in attrs and end in attrs and attrs[end] <= attrs[start]:
                raise serializers.ValidationError({end: [f"must be after {start}"]})
        return attrs


class RowField(serializers.Field):
    """A read-only field worked out from several columns of its object: it renders the object
    (``source="*"``) and, for :meth:`ApiModelSerializer.render_row`, a ``values()`` row that
    holds its ``row_columns``. Both must give the same output."""

    row_columns: tuple[str, ...] = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def from_row(self, row: dict[str, Any]) -> Any:
        raise NotImplementedError


class ApiModelSerializer(serializers.ModelSerializer):
    """Model serializers of the API: every datetime in UTC, and a quicker rendering.

    ``to_representation`` gives exactly DRF's output (tests compare the two on every API
    serializer) but reads a field that is a plain attribute of the object directly, instead of
    through DRF's generic attribute lookup: a page of 50 jobs renders in about half the time.
    """

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DateTimeField: UtcDateTimeField,
    }

    def _render_plan(self) -> list[tuple[str, serializers.Field[Any, Any, Any, Any], str | None]]:
        plan = self.__dict__.get("_plan")
        if plan is None:
            plan = []
            for field in self._readable_fields:
                attrs = field.source_attrs
                direct = len(attrs) == 1 and not isinstance(field, _GENERIC_FIELDS)
                plan.append((field.field_name, field, attrs[0] if direct else None))
            self.__dict__["_plan"] = plan
        return plan

    def to_representation(self, instance: Any) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name, field, attribute_name in self._render_plan():
            if attribute_name is not None:
                value = getattr(instance, attribute_name)
                if not callable(value):
                    result[name] = None if value is None else field.to_representation(value)
                    continue
            try:
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            if isinstance(attribute, PKOnlyObject):
                result[name] = None if attribute.pk is None else field.to_representation(attribute)
            else:
                result[name] = None if attribute is None else field.to_representation(attribute)
        return result

    # Rows from ``QuerySet.values(*serializer.row_columns())``: the same output as for the
    # objects (tests compare them), without building a model object per row and per relation.

    def _row_plan(self) -> list[tuple[str, serializers.Field[Any, Any, Any, Any] | None, str]]:
        plan = self.__dict__.get("_row_plan_cache")
        if plan is None:
            plan = []
            for field in self._readable_fields:
                attrs = field.source_attrs
                if isinstance(field, RowField):
                    plan.append((field.field_name, field, ""))
                elif isinstance(field, serializers.SlugRelatedField) and len(attrs) == 1:
                    plan.append((field.field_name, None, f"{attrs[0]}__{field.slug_field}"))
                elif len(attrs) == 1 and not isinstance(field, _GENERIC_FIELDS):
                    plan.append((field.field_name, field, attrs[0]))
                else:
                    raise TypeError(f"{type(self).__name__}.{field.field_name} needs an object")
            self.__dict__["_row_plan_cache"] = plan
        return plan

    def row_columns(self) -> list[str]:
        """What to select with ``values()`` to render rows."""
        columns = ["pk"]
        for _, field, column in self._row_plan():
            if isinstance(field, RowField):
                columns.extend(c for c in field.row_columns if c not in columns)
            elif column not in columns:
                columns.append(column)
        return columns

    def render_row(self, row: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name, field, column in self._row_plan():
            if isinstance(field, RowField):
                result[name] = field.from_row(row)
                continue
            value = row[column]
            if field is None or value is None:
                result[name] = value  # a related object's slug, or a missing value
            else:
                result[name] = field.to_representation(value)
        return result


class _UtcIsoDateTimeField(IsoDateTimeField):
    def to_python(self, value: Any) -> datetime | None:
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise FormValidationError("the time is out of range", code="invalid") from None


class IdFilter(NumberFilter):
    """An object's id: a whole number in the database's range (an out-of-range number is a
    400 error, not a database error)."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(*args, **kwargs)


class _NonEmptyChoiceField(ChoiceField):
    def clean(self, value: Any) -> Any:
        if value == "":
            raise FormValidationError("an empty value is not one of the choices", code="invalid")
        return super().clean(value)


class _StrictBooleanField(forms.Field):
    """``true`` or ``false`` (also ``1`` / ``0``): anything else, ``null`` and an empty value
    included, is refused (django-filter would read it as no filter at all)."""

    widget = forms.TextInput

    def to_python(self, value: Any) -> bool | None:
        if value is None:
            return None  # the parameter is absent
        text = str(value).strip().lower()
        if text in {"true", "1"}:
            return True
        if text in {"false", "0"}:
            return False
        raise FormValidationError("must be true or false", code="invalid")


class StrictBooleanFilter(BooleanFilter):
    field_class = _StrictBooleanField


class EnumFilter(ChoiceFilter):
    """One of the documented values: any other, even an empty one, is a 400 naming the
    parameter (django-filter would read ``?state=`` as no filter at all)."""

    field_class = _NonEmptyChoiceField


class UtcIsoDateTimeFilter(IsoDateTimeFilter):
    """An ISO 8601 filter value, in UTC (a time with no zone is UTC)."""

    field_class = _UtcIsoDateTimeField


# --- OpenAPI --------------------------------------------------------------------------------

ERROR_SCHEMA = {
    "type": "object",
    "description": "Every error: one readable message, and what is wrong with each field.",
    "properties": {
        "message": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": {}},
    },
    "required": ["message", "errors"],
}
_ERROR_RESPONSES = {
    "400": "The input or a rule of the allocation process refuses the request.",
    "401": "No credentials, or a token that is not valid.",
    "403": "Signed in, but not allowed to do this.",
    "404": "No such object, or one you may not see.",
    "409": "Conflicts with data saved meanwhile.",
    "415": "A body in a media type the operation does not read, or one it cannot parse.",
    "429": "Too many requests: wait for the number of seconds in Retry-After.",
}


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's schema, where only a GET is a page of a list and takes the list's
    filters: an operation that writes several objects (``POST /profiling-coefficients/``)
    answers a plain list, and the schema must say so."""

    def get_filter_backends(self) -> list[Any]:
        return super().get_filter_backends() if self.method == "GET" else []

    def _get_paginator(self) -> Any:
        return super()._get_paginator() if self.method == "GET" else None


def add_error_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular post-processing hook: document the error body on every operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    reference = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for code, description in _ERROR_RESPONSES.items():
                if code == "409" and method == "get":
                    continue
                if code == "415" and "requestBody" not in operation:
                    continue
                responses.setdefault(code, {"description": description, "content": reference})
    return result


# --- The API root ---------------------------------------------------------------------------


class ApiRootView(APIView):
    """``GET /api/v1/``: where everything is, for people and scripts finding their way (no
    sign-in needed: it names resources, not data)."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [AnonRateThrottle]
    # (name, URL name) of each resource, given by portal/api_urls.py.
    resources: tuple[tuple[str, str], ...] = ()

    @extend_schema(
        tags=["meta"],
        auth=[],
        responses={200: {
            "type": "object",
            "properties": {
                "resources": {"type": "object", "additionalProperties": {"type": "string"}},
                "schema": {"type": "string"}, "docs": {"type": "string"},
                "token": {"type": "string"},
            },
        }},
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        def absolute(name: str) -> str:
            return request.build_absolute_uri(reverse(name))

        return Response(
            {
                "resources": {name: absolute(url) for name, url in self.resources},
                "schema": absolute("api-schema"),
                "docs": absolute("api-docs"),
                "token": absolute("api:token-obtain"),
            }
        )


class PdfRenderer(JSONRenderer):
    """``Accept: application/pdf`` on an endpoint that answers a PDF (a decision letter): the
    view returns the file itself, so this renders only what DRF renders, an error, and that
    stays JSON, labelled as JSON, for a client that asked for a PDF and got a 403 or a 404."""

    media_type = "application/pdf"
    format = "pdf"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = "application/json"
        return super().render(data, "application/json", renderer_context)

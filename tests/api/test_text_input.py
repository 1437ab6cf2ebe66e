"""Every text field of every JSON input refuses a NUL byte and an over-long value with a 400
naming the field, never a 500 from the database. The bodies are the permission matrix's
valid ones, sent by a role that may (staff if they may) with one text field spoiled at a
time; the text fields are those the schema documents for the operation's request body
(nested lists of objects included)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from drf_spectacular.generators import SchemaGenerator

from tests.api.conftest import ROLES, World
from tests.api.test_permissions import CASES, Case

pytestmark = pytest.mark.django_db

# A value no text field accepts: far over any documented maxLength.
OVER_LONG = 100_001


def _allowed_role(case: Case) -> str | None:
    """A role the operation accepts (staff if they may), or None for a 405 everywhere."""
    allowed = [
        role for role, code in zip(ROLES, case.expected.split(), strict=True) if code < "300"
    ]
    return ("staff" if "staff" in allowed else allowed[0]) if allowed else None


JSON_WRITES = [
    case
    for case in CASES
    if case.body and not case.multipart and case.method != "get" and _allowed_role(case)
]


def _schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].split("/")[-1]]
    return node


def _is_text(prop: dict[str, Any]) -> bool:
    return (
        prop.get("type") == "string"
        and "enum" not in prop
        and not prop.get("readOnly")
        and prop.get("format") not in {"date", "date-time", "decimal", "binary"}
    )


def _text_paths(schema: dict[str, Any], node: dict[str, Any], body: Any) -> Iterator[tuple]:
    """(key, ...) paths to each free-text value the schema documents for ``body``, given or
    not (an optional field left out of the matrix's body is added)."""
    node = _resolve(schema, node)
    for branch in node.get("oneOf", []):  # one object or a list of them: the object
        if _resolve(schema, branch).get("type") == "object":
            node = _resolve(schema, branch)
    for name, prop in node.get("properties", {}).items():
        prop = _resolve(schema, prop)
        if _is_text(prop):
            yield (name,)
        elif prop.get("type") == "array" and not prop.get("readOnly"):
            items = _resolve(schema, prop["items"])
            given = body.get(name) or [{}]
            if _is_text(items):
                yield (name, 0)
            elif items.get("type") == "object" or "properties" in items:
                for rest in _text_paths(schema, items, given[0]):
                    yield (name, 0, *rest)


def _operation(schema: dict[str, Any], case: Case, world: World) -> dict[str, Any]:
    import re

    url = case.url(world).split("?")[0]
    if url in schema["paths"]:
        return schema["paths"][url][case.method]
    for path, operations in schema["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", path), url):
            return operations[case.method]
    raise AssertionError(url)


def _spoiled(body: Any, path: tuple, value: str) -> Any:
    body = copy.deepcopy(body)
    target = body
    for key, inner in itertools.pairwise(path):
        if isinstance(target, dict) and key not in target:
            target[key] = [] if isinstance(inner, int) else {}
        if isinstance(target, list) and key >= len(target):
            target.append([] if isinstance(inner, int) else {})
        target = target[key]
    if isinstance(target, list) and path[-1] >= len(target):
        target.append(value)
    else:
        target[path[-1]] = value
    return body


@pytest.mark.parametrize("case", JSON_WRITES, ids=[case.name for case in JSON_WRITES])
def test_every_text_field_refuses_nul_and_over_long_values_naming_the_field(world, case):
    schema = _schema()
    operation = _operation(schema, case, world)
    body = case.body(world)
    request_schema = operation["requestBody"]["content"]["application/json"]["schema"]
    paths = list(_text_paths(schema, request_schema, body))
    client = world.client(_allowed_role(case))
    refused = {}
    for path in paths:
        for label, value in (("NUL", "a\x00b"), ("over-long", "x" * OVER_LONG)):
            with transaction.atomic():
                response = getattr(client, case.method)(
                    case.url(world), _spoiled(body, path, value), format="json"
                )
                transaction.set_rollback(True)
            errors = response.json().get("errors", {}) if response.status_code == 400 else {}
            if response.status_code != 400 or path[0] not in errors:
                refused[(label, path)] = (response.status_code, response.content[:200])
    assert refused == {}

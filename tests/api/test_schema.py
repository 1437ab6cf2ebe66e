"""The OpenAPI schema: it validates, documents every endpoint, and the API keeps to it.

Schemathesis generates requests from /api/schema/ (valid and invalid ones) for every
operation and sends them, as staff, to the WSGI application: no response may be a 500, and
every response must match the schema (status code documented, body of the documented shape).
Bounded: a few examples per operation, no coverage or stateful phase, deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = 6


def test_the_schema_is_valid_openapi_and_documents_errors_on_every_operation():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)  # raises on an invalid document
    assert schema["openapi"].startswith("3.")
    for path, operations in schema["paths"].items():
        assert path.startswith("/api/v1/"), path
        assert path.endswith("/"), path
        for method, operation in operations.items():
            for code in ("400", "401", "403", "404", "429"):
                assert code in operation["responses"], (method, path, code)


def test_the_schema_is_served_without_signing_in(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert "/api/v1/projects/{code}/balance/" in response.json()["paths"]


@pytest.mark.parametrize("url", ["/api/docs/", "/api/docs/redoc/"])
def test_swagger_ui_and_redoc_are_served_from_our_own_static_files(client, url):
    response = client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/drf_spectacular_sidecar/" in page
    assert "cdn.jsdelivr.net" not in page
    assert "unpkg.com" not in page


CONFIG = schemathesis.Config.from_dict(
    {
        "phases": {
            "examples": {"enabled": True},
            "fuzzing": {"enabled": True},
            "coverage": {"enabled": False},
            "stateful": {"enabled": False},
        },
        "generation": {
            "mode": "all",  # valid and invalid input
            "max-examples": MAX_EXAMPLES,
            "deterministic": True,
            "database": "none",
            "no-shrink": True,
        },
        "suppress-health-check": ["all"],
    }
)
# Loaded when the module is collected: generating the schema needs no database.
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application(), config=CONFIG)


@pytest.fixture
def _on_the_test_connection() -> Iterator[None]:
    """Requests go through the real WSGI application, on the test's database connection:
    like Django's test client, they must not close the connection that holds the test's
    transaction."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def _unthrottled(monkeypatch):
    """Hundreds of requests in seconds: the user throttle would answer (documented) 429s."""
    from rest_framework.throttling import SimpleRateThrottle

    rates = {**SimpleRateThrottle.THROTTLE_RATES, "user": "100000/minute"}
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)


@pytest.mark.usefixtures("_on_the_test_connection", "_unthrottled")
@schema.parametrize()
def test_the_api_never_fails_with_a_server_error_and_answers_as_documented(case, world):
    case.call_and_validate(
        headers={"Authorization": f"Token {world.token('staff')}"},
        checks=[not_a_server_error, response_schema_conformance],
    )

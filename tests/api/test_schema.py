"""The OpenAPI schema: it validates, documents every endpoint and its errors, and is served
with its docs. That the API keeps to it is tests/api/test_fuzz.py."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db

# Paths that name a file rather than a resource end with its extension, not "/": a month's
# statement (DESIGN section 8, docs/costs.md "Statements").
FILE_PATHS = {"/api/v1/projects/{code}/statements/{month}.{file_format}"}


def test_the_schema_is_valid_openapi_and_documents_errors_on_every_operation():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)  # raises on an invalid document
    assert schema["openapi"].startswith("3.")
    for path, operations in schema["paths"].items():
        assert path.startswith("/api/v1/"), path
        assert path.endswith("/") or path in FILE_PATHS, path
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

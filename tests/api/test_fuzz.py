"""The API holds under fuzzing: schemathesis generates requests from /api/schema/, valid and
invalid ones, for every operation of the schema, and sends them to the WSGI application,
once with a staff token and once with a plain member's (carol, member of pawsey0003).

Every response must be documented: no 5xx, a status code the operation lists, the documented
content type, headers and body (errors in the API's ``{"message", "errors"}`` shape), and
input the schema calls invalid is refused (4xx). Bounded and reproducible: MAX_EXAMPLES per
operation and role, no coverage or stateful phase, derandomized, no example database; each
example runs in a savepoint that is rolled back, so every one meets the same world.

Last run: 61 operations x 2 roles, 2,402 cases (staff 1,201, member 1,201), plus the
permission matrix's 60 requests as 7 roles, in 87 seconds on 2 cores (the counts are printed
at the end of the run; docs/api.md, "Fuzzing").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.conftest import FUZZ_CASES, ROLES, World
from tests.api.test_permissions import CASES, Case

pytestmark = pytest.mark.django_db

FUZZED_ROLES = ("staff", "member")
MAX_EXAMPLES = 20  # per operation and role
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

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
# The WSGI transport hands the body over as the portal wrote it, and the portal gzips JSON for
# clients that accept it (kit/compression.py); an HTTP client would decode it, this one does not.
PLAIN = {"Accept-Encoding": "identity"}
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


@pytest.fixture
def world(shared_world):
    """The module's one world (tests/api/conftest.py): hundreds of tests read it."""
    return shared_world


@pytest.fixture(autouse=True)
def _uploads_in_tmp(settings, tmp_path):
    settings.VAR_DIR = tmp_path


@pytest.mark.usefixtures("_on_the_test_connection", "_unthrottled")
@pytest.mark.parametrize("role", FUZZED_ROLES)
@schema.parametrize()
def test_the_api_answers_every_generated_request_as_documented(case, world, role, pytestconfig):
    token = world.token(role)
    pytestconfig.stash.setdefault(FUZZ_CASES, Counter())[role] += 1
    with transaction.atomic():
        try:
            case.call_and_validate(
                headers={"Authorization": f"Token {token}", **PLAIN}, checks=CHECKS
            )
        finally:
            transaction.set_rollback(True)


# Random input seldom names an existing project, round or request, so the fuzzer rarely reaches
# an operation's success: the permission matrix's requests, each as every role, do.
DOCUMENTED = [  # those the schema has (staff are not told 405) and sent as JSON
    case for case in CASES if not case.multipart and case.expected.split()[-1] != "405"
]


def _documented_case(matrix_case: Case, world: World) -> schemathesis.Case:
    url = urlsplit(matrix_case.url(world))
    operation = schema.find_operation_by_path(matrix_case.method, url.path)
    assert operation is not None, url.path
    template = re.sub(r"\\{([^}]+)\\}", r"(?P<\1>[^/]+)", re.escape(operation.path))
    match = re.fullmatch(template, url.path)
    assert match is not None, (operation.path, url.path)
    body = matrix_case.body(world) if matrix_case.body else None
    return operation.Case(
        path_parameters=match.groupdict(),
        query=dict(parse_qsl(url.query)),
        **({"body": body, "media_type": "application/json"} if body is not None else {}),
    )


@pytest.mark.usefixtures("_on_the_test_connection")
@pytest.mark.parametrize("matrix_case", DOCUMENTED, ids=[case.name for case in DOCUMENTED])
def test_every_role_gets_a_documented_answer_to_the_permission_matrixs_requests(matrix_case, world):
    for role in ROLES:
        headers = {**PLAIN}
        if role != "anonymous":
            headers["Authorization"] = f"Token {world.token(role)}"
        with transaction.atomic():
            try:
                _documented_case(matrix_case, world).call_and_validate(
                    headers=headers, checks=CHECKS
                )
            finally:
                transaction.set_rollback(True)

"""How the OpenAPI schema describes personal tokens (imported by PeopleConfig.ready)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object


class PersonalTokenScheme(OpenApiAuthenticationExtension):
    target_class = "people.authentication.PersonalTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        definition: dict[str, Any] = build_bearer_security_scheme_object(
            header_name="Authorization",
            token_prefix="Token",  # noqa: S106 (a keyword)
        )
        definition["description"] = "A personal token from /account/tokens/: `Token su_…`"
        return definition

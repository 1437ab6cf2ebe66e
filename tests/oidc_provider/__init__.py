"""A real OpenID Connect provider for the tests, in its own process on the loopback.

It is a small Django project built on django-oidc-provider (``python -m tests.oidc_provider``):
its own SQLite database, users and groups, an RSA signing key, one confidential client for the
portal, a sign-in page, and the standard endpoints (discovery, authorize, token, userinfo,
JWKS). The portal talks to it exactly as to a centre's Keycloak or Entra ID: over HTTP, with
signed ID tokens. ``harness.py`` starts and stops it.
"""

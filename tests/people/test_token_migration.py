"""Tokens of rest_framework.authtoken keep working after the upgrade, stored as digests."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from people.models import ApiToken
from tests.factories import UserFactory

migration = importlib.import_module("people.migrations.0002_authtoken_keys_hashed")

OLD_KEY = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"


@pytest.mark.django_db(transaction=True)
def test_an_old_plaintext_key_becomes_a_digest_and_still_opens_the_api():
    user = UserFactory(username="dana")
    made = timezone.now().replace(microsecond=0) - timezone.timedelta(days=400)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "created timestamp with time zone NOT NULL, user_id integer NOT NULL)"
        )
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, %s)", [OLD_KEY, made, user.pk])
    with connection.schema_editor() as schema_editor:
        migration.authtoken_keys_hash(apps, schema_editor)

    assert "authtoken_token" not in connection.introspection.table_names()  # plaintext gone
    token = ApiToken.objects.get(user=user)
    assert token.digest != OLD_KEY
    assert token.prefix == OLD_KEY[:8]
    assert token.created_at == made
    assert token.expires_at > timezone.now() + timezone.timedelta(days=89)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {OLD_KEY}")
    assert client.get("/api/v1/projects/").status_code == 200

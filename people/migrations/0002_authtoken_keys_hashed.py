"""Tokens of rest_framework.authtoken (plaintext in ``authtoken_token``) become personal
tokens stored as digests, so scripts keep working; then the plaintext table is dropped."""

import hashlib
from datetime import timedelta

from django.db import migrations
from django.utils import timezone

LIFETIME = timedelta(days=90)


def authtoken_keys_hash(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("people", "ApiToken")
    expires_at = timezone.now() + LIFETIME  # scripts get 90 days to move to a new token
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id, created FROM authtoken_token")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        token = ApiToken.objects.create(
            user_id=user_id,
            name="token from before personal tokens",
            prefix=key[:8],
            digest=hashlib.sha256(key.encode()).hexdigest(),
            scope="write",
            expires_at=expires_at,
        )
        # the list shows when the key was really made
        ApiToken.objects.filter(pk=token.pk).update(created_at=created)
    schema_editor.execute(schema_editor.sql_delete_table % {"table": "authtoken_token"})


class Migration(migrations.Migration):
    dependencies = [("people", "0001_api_tokens")]

    operations = [migrations.RunPython(authtoken_keys_hash, migrations.RunPython.noop)]

"""A job looked up by id is read from its own monthly partition, however many months the
ledger holds (issue 33, docs/importing.md "A hundred million jobs"): on the partitioned ledger
the key table keeps each job's ``end`` (the ledger's partition key), so the key row is read
first (its primary key), then the ledger with ``id`` and ``end``
(``accounting.ledger.selectors.job_find``). The key table's triggers keep it for every writer
but the import, which writes it with the key rows (``accounting.ledger_storage.KEY_COLUMNS``).
Rows already there get it from the ledger in one ``UPDATE`` (the key table is rewritten once:
minutes at a hundred million jobs). No index is added to the ledger: its write path keeps the
three of the lean ledger (migration 0022).

Backwards, the column goes and the triggers are 0020's again.
"""

from django.db import migrations

TABLE = "accounting_job"
KEY = "accounting_job_key"
COLUMNS = (
    "cluster_id, job_id_raw, run, source_hash, charge_state, project_id, partition_id, "
    "pending_service_units, reserved_service_units"
)


def _triggers(with_end: bool) -> str:
    """The key table's insert and update trigger functions, with or without the job's end."""
    columns = COLUMNS + (', "end"' if with_end else "")
    names = [c.strip() for c in columns.split(",")]
    new = ", ".join(f"n.{c}" for c in names)
    old = ", ".join(f"k.{c}" for c in names)
    assignments = ", ".join(f"{c} = n.{c}" for c in names)
    return f"""
CREATE OR REPLACE FUNCTION {KEY}_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {KEY} (job_id, {columns})
    SELECT id, {columns} FROM new_jobs;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION {KEY}_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {KEY} AS k SET {assignments}
    FROM new_jobs AS n
    WHERE k.job_id = n.id
      AND ({old}) IS DISTINCT FROM ({new});
    RETURN NULL;
END $$;
"""


def _partitioned(cursor) -> bool:
    cursor.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s))",
        [TABLE],
    )
    return bool(cursor.fetchone()[0])


def key_table_end(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if not _partitioned(cursor):
            return
        cursor.execute(f'ALTER TABLE {KEY} ADD COLUMN "end" timestamp with time zone NULL')
        cursor.execute(
            f'UPDATE {KEY} AS k SET "end" = j."end" FROM {TABLE} AS j '  # noqa: S608
            'WHERE j.id = k.job_id AND j."end" IS NOT NULL'
        )
        cursor.execute(_triggers(with_end=True))


def key_table_end_removed(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if not _partitioned(cursor):
            return
        cursor.execute(_triggers(with_end=False))
        cursor.execute(f'ALTER TABLE {KEY} DROP COLUMN "end"')


class Migration(migrations.Migration):
    dependencies = [
        ("accounting", "0024_rate_drafts"),
    ]

    operations = [
        migrations.RunPython(key_table_end, key_table_end_removed, elidable=False),
    ]

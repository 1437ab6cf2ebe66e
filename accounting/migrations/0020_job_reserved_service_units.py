"""What a queued or running job holds of its project's SU (``reserved_service_units``, issue 27
item 3): a nullable ledger column, and, on the partitioned ledger, the same column in the key
table (accounting/ledger_storage.py), kept in step by the key table's triggers, so that the
balance sums it beside the pending SU without reading the monthly partitions.

Rows already in the ledger stay NULL: a balance counts a NULL as the job's pending SU (what
it used so far) until its next import line sets it.
"""

from django.db import migrations, models

KEY = "accounting_job_key"
TABLE = "accounting_job"
BEFORE = (
    "job_id, cluster_id, job_id_raw, run, source_hash, charge_state, project_id, partition_id, "
    "pending_service_units"
)


def _triggers(key_columns: str) -> str:
    """The key table's insert and update trigger functions over ``key_columns`` (0013's, with
    or without the reserved SU)."""
    job_columns = key_columns.replace("job_id,", "id,", 1)
    new_columns = ", ".join(f"n.{c.strip()}" for c in job_columns.split(","))
    old_columns = ", ".join(f"k.{c.strip()}" for c in key_columns.split(","))
    reserved = (
        ", reserved_service_units = n.reserved_service_units"
        if "reserved_service_units" in key_columns
        else ""
    )
    return f"""
CREATE OR REPLACE FUNCTION {KEY}_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {KEY} ({key_columns})
    SELECT {job_columns} FROM new_jobs;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION {KEY}_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {KEY} AS k SET cluster_id = n.cluster_id, job_id_raw = n.job_id_raw, run = n.run,
        source_hash = n.source_hash, charge_state = n.charge_state, project_id = n.project_id,
        partition_id = n.partition_id, pending_service_units = n.pending_service_units{reserved}
    FROM new_jobs AS n
    WHERE k.job_id = n.id
      AND ({old_columns}) IS DISTINCT FROM ({new_columns});
    RETURN NULL;
END $$;
"""


def _partitioned(cursor) -> bool:
    cursor.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s))",
        [TABLE],
    )
    return bool(cursor.fetchone()[0])


def key_table_column(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if not _partitioned(cursor):
            return
        cursor.execute(f"ALTER TABLE {KEY} ADD COLUMN reserved_service_units numeric(24, 6) NULL")
        cursor.execute(_triggers(f"{BEFORE}, reserved_service_units"))


def key_table_column_removed(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if not _partitioned(cursor):
            return
        cursor.execute(_triggers(BEFORE))
        cursor.execute(f"ALTER TABLE {KEY} DROP COLUMN reserved_service_units")


class Migration(migrations.Migration):
    dependencies = [
        ("accounting", "0019_import_run_upload_deleted_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="reserved_service_units",
            field=models.DecimalField(
                blank=True,
                decimal_places=6,
                help_text="SU a queued or running job holds: its price at its requested size "
                "and time limit (without a limit, its SU so far); null once finished",
                max_digits=24,
                null=True,
            ),
        ),
        # Back: the triggers and key table of 0013 (before the column goes from the ledger).
        migrations.RunPython(key_table_column, key_table_column_removed, elidable=False),
    ]

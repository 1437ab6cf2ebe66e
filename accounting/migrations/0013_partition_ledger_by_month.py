"""Partition the jobs ledger by month of its end, on PostgreSQL (accounting/partitions.py
says why the ledger's key moves to a table of its own). SQLite keeps one plain table.

The rows are copied into the partitioned table in one statement: on a large ledger, run this
migration in a maintenance window (docs/importing.md, "A hundred million jobs").
"""

from datetime import UTC, date, datetime

from django.db import migrations

TABLE = "accounting_job"
OLD = "accounting_job_unpartitioned"
KEY = "accounting_job_key"
OPEN = "accounting_job_open"
# The columns of the ledger that point at a job, and what a deleted job does to them (the
# application deletes the referring rows first where Django cascades).
REFERENCES = [
    ("allocations_adjustment", "job_id"),
    ("allocations_profilingcoefficient", "job_id"),
    ("accounting_jobfairshare", "job_id"),
]

# The key table holds, beside the key, what an import compares (the line's fingerprint and the
# charge state) and what a balance reads of jobs still running (their pending SU, by project
# and partition): neither then needs to look through every monthly partition.
KEY_COLUMNS = (
    "job_id, cluster_id, job_id_raw, run, source_hash, charge_state, project_id, partition_id, "
    "pending_service_units"
)
JOB_COLUMNS = KEY_COLUMNS.replace("job_id,", "id,", 1)
NEW_COLUMNS = ", ".join(f"n.{c.strip()}" for c in JOB_COLUMNS.split(","))
OLD_COLUMNS = ", ".join(f"k.{c.strip()}" for c in KEY_COLUMNS.split(","))
KEY_TRIGGERS = f"""
CREATE FUNCTION {KEY}_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {KEY} ({KEY_COLUMNS})
    SELECT {JOB_COLUMNS} FROM new_jobs;
    RETURN NULL;
END $$;
CREATE TRIGGER {KEY}_insert AFTER INSERT ON {TABLE}
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION {KEY}_insert();

CREATE FUNCTION {KEY}_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {KEY} AS k SET cluster_id = n.cluster_id, job_id_raw = n.job_id_raw, run = n.run,
        source_hash = n.source_hash, charge_state = n.charge_state, project_id = n.project_id,
        partition_id = n.partition_id, pending_service_units = n.pending_service_units
    FROM new_jobs AS n
    WHERE k.job_id = n.id
      AND ({OLD_COLUMNS}) IS DISTINCT FROM ({NEW_COLUMNS});
    RETURN NULL;
END $$;
CREATE TRIGGER {KEY}_update AFTER UPDATE ON {TABLE}
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION {KEY}_update();

CREATE FUNCTION {KEY}_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {KEY} AS k USING old_jobs AS o WHERE k.job_id = o.id;
    RETURN NULL;
END $$;
CREATE TRIGGER {KEY}_delete AFTER DELETE ON {TABLE}
    REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION {KEY}_delete();

CREATE FUNCTION {KEY}_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {KEY};
    RETURN NULL;
END $$;
CREATE TRIGGER {KEY}_truncate AFTER TRUNCATE ON {TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION {KEY}_truncate();
"""


def _month_after(month):
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _months(first, last):
    month = date(first.year, first.month, 1)
    while month <= last:
        yield month
        month = _month_after(month)


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        run = cursor.execute
        run(f"ALTER TABLE {TABLE} RENAME TO {OLD}")
        # Secondary indexes and the unique key are dropped first: their names are the ones
        # the partitioned table takes.
        run(
            "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = %s::regclass AND NOT x.indisprimary",
            [OLD],
        )
        dropped = [name for (name,) in cursor.fetchall()]
        run("SELECT indexdef FROM pg_indexes WHERE tablename = %s", [OLD])
        definitions = [d for (d,) in cursor.fetchall() if " UNIQUE " not in d]
        run(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = %s::regclass AND contype = 'f'",
            [OLD],
        )
        foreign_keys = cursor.fetchall()
        run(f"ALTER TABLE {OLD} DROP CONSTRAINT IF EXISTS job_unique_run_per_cluster")
        for name in dropped:
            run(f'DROP INDEX IF EXISTS "{name}"')

        run(
            f"CREATE TABLE {TABLE} (LIKE {OLD} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
            'INCLUDING IDENTITY) PARTITION BY RANGE ("end")'
        )
        run(f"CREATE TABLE {OPEN} PARTITION OF {TABLE} DEFAULT")
        run(f'SELECT min("end"), max("end") FROM {OLD}')
        first, last = cursor.fetchone()
        today = datetime.now(UTC).date()
        first = min(first.astimezone(UTC).date(), today) if first else today
        last = max(last.astimezone(UTC).date(), today) if last else today
        # Every month the ledger holds, and the next two (the beat task keeps them ahead).
        for month in _months(first, _month_after(_month_after(last))):
            run(
                f"CREATE TABLE {TABLE}_p{month.year:04d}_{month.month:02d} PARTITION OF {TABLE} "
                f"FOR VALUES FROM ('{month.isoformat()} 00:00:00+00') "
                f"TO ('{_month_after(month).isoformat()} 00:00:00+00')"
            )
        run(f"INSERT INTO {TABLE} SELECT * FROM {OLD}")
        run(
            f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'id'), "
            f"COALESCE((SELECT max(id) FROM {TABLE}), 0) + 1, false)"
        )
        # Indexes after the rows (faster than keeping them up row by row); each is made on
        # every partition, and on every partition created later.
        for definition in definitions:
            run(definition.replace(f" ON public.{OLD} ", f" ON public.{TABLE} ", 1))
        run(f"CREATE INDEX accounting_job_id ON {TABLE} (id)")
        for name, definition in foreign_keys:
            run(f'ALTER TABLE {TABLE} ADD CONSTRAINT "{name}" {definition}')
        run(f"DROP TABLE {OLD}")

        run(
            f"CREATE TABLE {KEY} ("
            " job_id bigint PRIMARY KEY,"
            " cluster_id bigint NOT NULL,"
            " job_id_raw varchar(64) NOT NULL,"
            " run varchar(40) NOT NULL,"
            " source_hash varchar(32) NOT NULL,"
            " charge_state varchar(16) NOT NULL,"
            " project_id bigint NOT NULL,"
            " partition_id bigint NOT NULL,"
            " pending_service_units numeric(24, 6) NOT NULL,"
            " CONSTRAINT job_unique_run_per_cluster UNIQUE (cluster_id, job_id_raw, run))"
        )
        run(f"INSERT INTO {KEY} ({KEY_COLUMNS}) SELECT {JOB_COLUMNS} FROM {TABLE}")
        run(
            f"CREATE INDEX {KEY}_pending ON {KEY} (project_id, partition_id) "
            "WHERE charge_state = 'pending'"
        )
        run(KEY_TRIGGERS)
        for table, column in REFERENCES:
            run(
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_key_fk "
                f"FOREIGN KEY ({column}) REFERENCES {KEY} (job_id) DEFERRABLE INITIALLY DEFERRED"
            )
        run(f"ANALYZE {TABLE}")
        run(f"ANALYZE {KEY}")


class Migration(migrations.Migration):
    # One transaction: a failure leaves the ledger as it was.
    atomic = True

    dependencies = [
        ("accounting", "0012_job_reference_checked_by_ledger_key"),
        ("allocations", "0004_job_reference_checked_by_ledger_key"),
    ]

    # No way back: un-partitioning a ledger of millions of rows is a restore from backup.
    operations = [migrations.RunPython(partition, elidable=False)]

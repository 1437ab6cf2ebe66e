"""A lean ledger (issue 30 item 1, docs/importing.md "The lean ledger"): nothing on the jobs
table's write path but its key and the indexes the pages read.

- The seven foreign keys of ``accounting_job`` stay Django ForeignKeys (the ORM, the admin and
  ``on_delete`` follow them) but are no database constraints: the import checks each batch's
  references set-wise (accounting/ledger/references.py). Dropped on the partitioned table, the
  constraint goes from every monthly partition with it.
- The indexes no page and no balance reads go: (username, end), the pending jobs by cluster
  (the balance reads the key table's own index), and the default indexes Django made on
  ``partition_id`` and ``cost_model_version_id``.
- ``node_fractions`` goes: the pages derive it from the job's shape and rate version
  (``accounting.ledger.selectors.job_node_fractions``), to the same figures.
- The key table's insert and update triggers skip the statements of a transaction that set
  ``portal.ledger_import`` to ``on`` (the import, which writes the key rows itself); every other
  writer (the ORM, the admin, the demo, SQL by hand) is kept in step by them as before.

Every step changes the catalogue only: no row is rewritten, however large the ledger.
Backwards, the columns, indexes and constraints come back (the node fractions empty: the pages
derived them from the shape anyway).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

TABLE = "accounting_job"
KEY = "accounting_job_key"
# The import sets this with SET LOCAL in the transaction of each batch (accounting.ledger_storage).
SKIP_WHEN_IMPORTING = "current_setting('portal.ledger_import', true) IS DISTINCT FROM 'on'"


def _partitioned(cursor) -> bool:
    cursor.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s))",
        [TABLE],
    )
    return bool(cursor.fetchone()[0])


def _key_triggers(when: str) -> str:
    return f"""
DROP TRIGGER {KEY}_insert ON {TABLE};
CREATE TRIGGER {KEY}_insert AFTER INSERT ON {TABLE}
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT {when}
    EXECUTE FUNCTION {KEY}_insert();
DROP TRIGGER {KEY}_update ON {TABLE};
CREATE TRIGGER {KEY}_update AFTER UPDATE ON {TABLE}
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT {when}
    EXECUTE FUNCTION {KEY}_update();
"""


def key_triggers_skip_the_import(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        if _partitioned(cursor):
            cursor.execute(_key_triggers(f"WHEN ({SKIP_WHEN_IMPORTING})"))


def key_triggers_for_every_writer(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        if _partitioned(cursor):
            cursor.execute(_key_triggers(""))


class Migration(migrations.Migration):

    dependencies = [
        ('accounting', '0021_usage_shape_monthly'),
        ('projects', '0003_pool_accounts'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(
            key_triggers_skip_the_import, key_triggers_for_every_writer, elidable=False
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='job_username_end',
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='job_pending',
        ),
        migrations.RemoveField(
            model_name='job',
            name='node_fractions',
        ),
        migrations.AlterField(
            model_name='job',
            name='cluster',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='accounting.cluster'),
        ),
        migrations.AlterField(
            model_name='job',
            name='cost_model_version',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='accounting.costmodelversion'),
        ),
        migrations.AlterField(
            model_name='job',
            name='import_run',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to='accounting.importrun'),
        ),
        migrations.AlterField(
            model_name='job',
            name='partition',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='accounting.partition'),
        ),
        migrations.AlterField(
            model_name='job',
            name='partition_version',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='accounting.partitionversion'),
        ),
        migrations.AlterField(
            model_name='job',
            name='project',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='projects.project'),
        ),
        migrations.AlterField(
            model_name='job',
            name='user',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to=settings.AUTH_USER_MODEL),
        ),
    ]

"""The balance's read of the daily roll-up without the user becomes an index-only scan (issue
33, docs/pages.md "Performance"): the unique key ``project_usage_day_unique`` is now (project,
partition, day), and on PostgreSQL it also carries the SU, the money and the job count
(``INCLUDE``).

Every reader of ``ProjectUsageDaily`` asks for one project's days and sums those columns: the
balance's ranges of days (one ``LATERAL`` read per project, pool and range), the usage by
partition, the costliest jobs' month signatures. A project's rows are spread over the whole
table (the import adds them day by day for every project), so reading them from the heap took
a page per row: at ten million jobs the staff dashboard's pass read 17,278 pages in 31.8 ms;
from this key, 1,498 pages in 5.5 ms. The partition comes before the day so that a pool's
range is one stretch of the key. The import's ``ON CONFLICT (project_id, day, partition_id)``
names the same columns (their order and ``INCLUDE`` columns do not matter to it). No index is
added: the key is rebuilt under the same name.

The model says ``UniqueConstraint(fields=["project", "partition", "day"])`` without
``include``: Django creates no unique constraint with ``include`` at all on a database without
covering indexes (SQLite), whose upsert needs one. Backwards, the plain (project, day,
partition) key again.
"""

from django.db import migrations, models

TABLE = "accounting_projectusagedaily"
KEY = "project_usage_day_unique"
BEFORE = models.UniqueConstraint(fields=["project", "day", "partition"], name=KEY)
AFTER = models.UniqueConstraint(fields=["project", "partition", "day"], name=KEY)


def _rebuild(apps, schema_editor, old, new, sql):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"ALTER TABLE {TABLE} DROP CONSTRAINT {KEY}, ADD CONSTRAINT {KEY} {sql}"
        )
        return
    model = apps.get_model("accounting", "ProjectUsageDaily")
    schema_editor.remove_constraint(model, old)
    schema_editor.add_constraint(model, new)


def covering(apps, schema_editor):
    sql = "UNIQUE (project_id, partition_id, day) INCLUDE (service_units, cost, jobs)"
    _rebuild(apps, schema_editor, BEFORE, AFTER, sql)


def plain(apps, schema_editor):
    _rebuild(apps, schema_editor, AFTER, BEFORE, "UNIQUE (project_id, day, partition_id)")


class Migration(migrations.Migration):
    dependencies = [("accounting", "0030_project_usage_daily")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(covering, plain)],
            state_operations=[
                migrations.RemoveConstraint(model_name="projectusagedaily", name=KEY),
                migrations.AddConstraint(model_name="projectusagedaily", constraint=AFTER),
            ],
        )
    ]

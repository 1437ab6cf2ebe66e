"""The ledger's stamp as one row (``LedgerStamp``), moved by every committed import batch: the
project page's charts were cached under an aggregate over every import run, 58 ms at six years
of five-minute imports (issue 33). It starts at 0: the stamp's text is new, so no key cached
under the old one is read again."""

from django.db import migrations, models


def first_row(apps, schema_editor):
    apps.get_model("accounting", "LedgerStamp").objects.get_or_create(pk=1)


class Migration(migrations.Migration):

    dependencies = [
        ('accounting', '0031_project_usage_day_covering'),
    ]

    operations = [
        migrations.CreateModel(
            name='LedgerStamp',
            fields=[
                ('id', models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                ('batches', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(first_row, migrations.RunPython.noop),
    ]

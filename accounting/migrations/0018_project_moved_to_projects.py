"""The ledger's rows name their project in the projects app now; the foreign keys and their
columns are unchanged (projects 0001 kept the table)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounting', '0017_efficiency_monthly'),
        ('projects', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='efficiencybucket',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='efficiency_buckets', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='efficiencydaily',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='efficiency_days', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='efficiencymonthly',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='efficiency_months', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='job',
                    name='project',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='usagedaily',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='usage_days', to='projects.project'),
                ),
            ],
        ),
    ]

"""Projects, memberships, invitations and resource pools live in the projects app now
(projects 0001): allocations' foreign keys point there and its own copies of those models
leave its state. No table or column changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounting', '0018_project_moved_to_projects'),
        ('projects', '0001_initial'),
        ('allocations', '0008_efficiency_summary_notices'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name='invitation',
                    name='accepted_by',
                ),
                migrations.RemoveField(
                    model_name='invitation',
                    name='invited_by',
                ),
                migrations.RemoveField(
                    model_name='invitation',
                    name='project',
                ),
                migrations.RemoveField(
                    model_name='membership',
                    name='project',
                ),
                migrations.RemoveField(
                    model_name='membership',
                    name='user',
                ),
                migrations.RemoveField(
                    model_name='poolpartition',
                    name='partition',
                ),
                migrations.RemoveField(
                    model_name='poolpartition',
                    name='pool',
                ),
                migrations.RemoveField(
                    model_name='resourcepool',
                    name='partitions',
                ),
                migrations.RemoveField(
                    model_name='project',
                    name='pi',
                ),
                migrations.AlterField(
                    model_name='profilingcoefficient',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='profiling_coefficients', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='allocation',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='allocations', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='enforcementaction',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='enforcement_actions', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='priorityaction',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='priority_actions', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='allocationrequest',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='requests', to='projects.project'),
                ),
                migrations.AlterField(
                    model_name='adjustment',
                    name='project',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='adjustments', to='projects.project'),
                ),
                migrations.RemoveField(
                    model_name='resourcepool',
                    name='cluster',
                ),
                migrations.AlterField(
                    model_name='roundpool',
                    name='pool',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.resourcepool'),
                ),
                migrations.AlterField(
                    model_name='enforcementaction',
                    name='pool',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.resourcepool'),
                ),
                migrations.AlterField(
                    model_name='requestamount',
                    name='pool',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='projects.resourcepool'),
                ),
                migrations.AlterField(
                    model_name='allocation',
                    name='pool',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='allocations', to='projects.resourcepool'),
                ),
                migrations.DeleteModel(
                    name='Invitation',
                ),
                migrations.DeleteModel(
                    name='Membership',
                ),
                migrations.DeleteModel(
                    name='PoolPartition',
                ),
                migrations.DeleteModel(
                    name='Project',
                ),
                migrations.DeleteModel(
                    name='ResourcePool',
                ),
            ],
        ),
    ]

"""Projects, memberships, invitations and resource pools move here from allocations.

The tables stay as they are (``db_table`` keeps their names): only Django's idea of which app
holds the models changes. Their content types move with them, so the audit log's entries and
the permissions of these models keep pointing at them.
"""

import django.db.models.deletion
import django.utils.timezone
import projects.models
from django.conf import settings
from django.db import migrations, models


MOVED = ["project", "membership", "invitation", "resourcepool", "poolpartition"]


def content_types_move(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="allocations", model__in=MOVED).update(
        app_label="projects"
    )


def content_types_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="projects", model__in=MOVED).update(
        app_label="allocations"
    )


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('accounting', '0017_efficiency_monthly'),
        ('allocations', '0008_efficiency_summary_notices'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
            migrations.CreateModel(
                name='PoolPartition',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('partition', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='pool_membership', to='accounting.partition')),
                ],
                options={
                    'db_table': 'allocations_poolpartition',
                },
            ),
            migrations.CreateModel(
                name='Project',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('code', models.CharField(help_text='Slurm account name', max_length=64, unique=True)),
                    ('title', models.CharField(blank=True, max_length=300)),
                    ('status', models.CharField(choices=[('active', 'active'), ('expired', 'expired'), ('suspended', 'suspended')], default='active', max_length=16)),
                    ('field_of_science', models.CharField(blank=True, max_length=120)),
                    ('created_at', models.DateTimeField(auto_now_add=True)),
                    ('pi', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='led_projects', to=settings.AUTH_USER_MODEL, verbose_name='PI')),
                ],
                options={
                    'db_table': 'allocations_project',
                    'ordering': ['code'],
                },
            ),
            migrations.CreateModel(
                name='ResourcePool',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=100, unique=True)),
                    ('description', models.TextField(blank=True)),
                    ('budget_months', models.PositiveSmallIntegerField(default=3, help_text='length of a budget period in months (3 = quarterly)')),
                    ('split', models.CharField(choices=[('even', 'even split over the budget periods'), ('custom', 'amounts set per budget period')], default='even', max_length=8)),
                    ('carry_over', models.BooleanField(default=False, help_text='unused SU of a budget period move to the next one')),
                    ('notify_thresholds', models.CharField(default='75,90,100', help_text='percent of a budget period used', max_length=40)),
                    ('limit_command', models.CharField(blank=True, default='sacctmgr -i modify account name={account} set qos=lowpriority', help_text='Slurm action when a project has used its budget period ({account}, {cluster})', max_length=500)),
                    ('restore_command', models.CharField(blank=True, default='sacctmgr -i modify account name={account} set qos=normal', help_text='Slurm action when a limited project gets a new budget period', max_length=500)),
                    ('slurm_parent_account', models.CharField(blank=True, help_text="Slurm account the pool's project accounts are created under (blank: root)", max_length=64)),
                    ('slurm_qos', models.CharField(blank=True, help_text="QOS list of the pool's project accounts, e.g. normal,debug", max_length=200)),
                    ('slurm_default_qos', models.CharField(blank=True, help_text="default QOS of the pool's project accounts", max_length=64)),
                    ('slurm_account_suffix', models.CharField(blank=True, help_text="the pool's projects get a Slurm account of their own, the project code and this suffix (e.g. -gpu), limited to the pool's SU alone (blank: the project's account, limited to what all its pools on the cluster have left)", max_length=16)),
                    ('slurm_partition_associations', models.BooleanField(default=False, help_text="members' associations name the pool's partitions, so the account runs jobs in those partitions only")),
                    ('slurm_limits_auto', models.BooleanField(default=False, help_text="after each import, grant and adjustment, and in each new budget period, set the GrpTRESMins limits of the pool's cluster without review (other changes wait)")),
                    ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='resource_pools', to='accounting.cluster')),
                    ('partitions', models.ManyToManyField(related_name='resource_pools', through='projects.PoolPartition', to='accounting.partition')),
                ],
                options={
                    'db_table': 'allocations_resourcepool',
                    'ordering': ['name'],
                },
            ),
            migrations.AddField(
                model_name='poolpartition',
                name='pool',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='projects.resourcepool'),
            ),
            migrations.CreateModel(
                name='Membership',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('role', models.CharField(choices=[('pi', 'PI'), ('manager', 'manager'), ('member', 'member')], default='member', max_length=8)),
                    ('notify', models.BooleanField(default=False, help_text='e-mail me when the balance runs low')),
                    ('joined_at', models.DateTimeField(auto_now_add=True)),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='projects.project')),
                ],
                options={
                    'db_table': 'allocations_membership',
                    'ordering': ['project', 'user'],
                    'constraints': [models.UniqueConstraint(fields=('project', 'user'), name='membership_unique')],
                },
                bases=(projects.models.AuditedInProject, models.Model),
            ),
            migrations.CreateModel(
                name='Invitation',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('email', models.EmailField(max_length=254)),
                    ('role', models.CharField(choices=[('member', 'member'), ('manager', 'manager')], default='member', max_length=8)),
                    ('nonce', models.CharField(max_length=32, unique=True)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                    ('expires_at', models.DateTimeField()),
                    ('accepted_at', models.DateTimeField(blank=True, null=True)),
                    ('revoked_at', models.DateTimeField(blank=True, null=True)),
                    ('accepted_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('invited_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='projects.project')),
                ],
                options={
                    'db_table': 'allocations_invitation',
                    'ordering': ['-created_at', '-pk'],
                    'constraints': [models.CheckConstraint(condition=models.Q(('expires_at__gt', models.F('created_at'))), name='invitation_expires_after_sent')],
                },
                bases=(projects.models.AuditedInProject, models.Model),
            ),
            ],
        ),
        migrations.RunPython(content_types_move, content_types_back),
    ]

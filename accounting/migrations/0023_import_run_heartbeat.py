"""Runs that finish themselves: a heartbeat, the attempts, the task's arguments, whether the task
could be sent, and what interrupted the run. New columns with defaults: no backfill."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounting', '0022_lean_ledger'),
    ]

    operations = [
        migrations.AddField(
            model_name='importrun',
            name='heartbeat_at',
            field=models.DateTimeField(blank=True, help_text='last sign of life: each committed batch, and the task when it starts', null=True),
        ),
        migrations.AddField(
            model_name='importrun',
            name='attempts',
            field=models.PositiveSmallIntegerField(default=1, help_text="times the import was started (the recovery task's included)"),
        ),
        migrations.AddField(
            model_name='importrun',
            name='task_options',
            field=models.JSONField(blank=True, default=dict, help_text="the import task's arguments, to queue it again"),
        ),
        migrations.AddField(
            model_name='importrun',
            name='task_unsent',
            field=models.BooleanField(default=False, help_text='failed because its task could not be sent (broker down)'),
        ),
        migrations.AddField(
            model_name='importrun',
            name='interruptions',
            field=models.TextField(blank=True, help_text='what interrupted the run and how it went on, one line each'),
        ),
    ]

"""When an upload's kept file was deleted (PORTAL_UPLOAD_RETENTION_DAYS): nullable, no backfill."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounting', '0018_project_moved_to_projects'),
    ]

    operations = [
        migrations.AddField(
            model_name='importrun',
            name='upload_deleted_at',
            field=models.DateTimeField(blank=True, help_text='when the uploaded file was deleted, PORTAL_UPLOAD_RETENTION_DAYS after the run', null=True),
        ),
    ]

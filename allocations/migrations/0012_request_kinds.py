"""Every kind of allocation request (docs/allocations.md, "Changing an allocation"): a request
outside rounds (top-up, extension, appeal) names no round; an extension its grant and new end;
an appeal the decision it appeals, once per decision (a unique key); an application and a
renewal one per project and round. Rows of the release before stay valid: a top-up may still
name a round."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('allocations', '0011_project_requests'),
        ('projects', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='allocationrequest',
            name='one_application_per_project_and_round',
        ),
        migrations.AddField(
            model_name='allocationrequest',
            name='appeal_of',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='appeals', to='allocations.allocationrequest'),
        ),
        migrations.AddField(
            model_name='allocationrequest',
            name='grant',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='change_requests', to='allocations.allocation'),
        ),
        migrations.AddField(
            model_name='allocationrequest',
            name='new_end',
            field=models.DateField(blank=True, help_text="an extension: the grant's new end (the day after)", null=True),
        ),
        migrations.AlterField(
            model_name='allocationrequest',
            name='kind',
            field=models.CharField(choices=[('new', 'application'), ('top_up', 'top-up'), ('extension', 'extension'), ('renewal', 'renewal'), ('appeal', 'appeal')], default='new', max_length=9),
        ),
        migrations.AlterField(
            model_name='allocationrequest',
            name='round',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='requests', to='allocations.allocationround'),
        ),
        migrations.AddConstraint(
            model_name='allocationrequest',
            constraint=models.UniqueConstraint(condition=models.Q(('kind__in', ['new', 'renewal'])), fields=('round', 'project'), name='one_application_per_project_and_round'),
        ),
        migrations.AddConstraint(
            model_name='allocationrequest',
            constraint=models.UniqueConstraint(fields=('appeal_of',), name='one_appeal_per_decision'),
        ),
        migrations.AddConstraint(
            model_name='allocationrequest',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind__in', ['new', 'renewal']), ('round__isnull', False)), ('kind__in', ['top_up', 'extension', 'appeal']), _connector='OR'), name='request_in_a_round_names_it'),
        ),
        migrations.AddConstraint(
            model_name='allocationrequest',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('appeal_of__isnull', False), ('kind', 'appeal')), models.Q(models.Q(('kind', 'appeal'), _negated=True), ('appeal_of__isnull', True)), _connector='OR'), name='request_appeal_names_its_decision'),
        ),
        migrations.AddConstraint(
            model_name='allocationrequest',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('grant__isnull', False), ('kind', 'extension'), ('new_end__isnull', False)), models.Q(models.Q(('kind', 'extension'), _negated=True), ('new_end__isnull', True)), _connector='OR'), name='request_extension_names_grant_and_end'),
        ),
    ]

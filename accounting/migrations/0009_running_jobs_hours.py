# The import now counts the hours a running job has held its allocation (start to start +
# Elapsed, as sacct reported them) in the hourly utilisation rows, and takes them back when the
# job's next line arrives. Running jobs already in the ledger never had theirs added: add them
# here, so that taking them back later leaves the rows right.

from collections import defaultdict
from datetime import timedelta
from zoneinfo import ZoneInfo

from django.db import migrations
from django.db.models import F, Q

from accounting.utilisation.quality import AllocatedJob, hourly_contributions


def _running_hours(apps):
    Job = apps.get_model("accounting", "Job")
    running = (
        Job.objects.filter(
            charge_state="pending", end__isnull=True, start__isnull=False, elapsed_seconds__gt=0
        )
        .filter(Q(cpus__gt=0) | Q(gpus__gt=0))
        .values_list("partition_id", "partition__cluster__timezone", "start", "elapsed_seconds",
                     "cpus", "gpus")
    )
    hours = defaultdict(lambda: [0, 0])
    for partition_id, zone, start, elapsed, cpus, gpus in running.iterator():
        job = AllocatedJob(partition=str(partition_id), start=start,
                           end=start + timedelta(seconds=elapsed), cores=cpus, gpus=gpus)
        for hour in hourly_contributions(job, timezone=ZoneInfo(zone)):
            seconds = hours[(partition_id, hour.hour_start)]
            seconds[0] += hour.core_seconds
            seconds[1] += hour.gpu_seconds
    return hours


def _apply(apps, sign):
    Hourly = apps.get_model("accounting", "UtilisationHourly")
    for (partition_id, hour_start), (core_seconds, gpu_seconds) in _running_hours(apps).items():
        row, _ = Hourly.objects.get_or_create(partition_id=partition_id, hour_start=hour_start)
        Hourly.objects.filter(pk=row.pk).update(
            core_seconds=F("core_seconds") + sign * core_seconds,
            gpu_seconds=F("gpu_seconds") + sign * gpu_seconds,
        )


def add_running_hours(apps, schema_editor):
    _apply(apps, +1)


def remove_running_hours(apps, schema_editor):
    _apply(apps, -1)


class Migration(migrations.Migration):
    dependencies = [("accounting", "0008_cost_and_canonical_unit_checks")]

    operations = [migrations.RunPython(add_running_hours, remove_running_hours)]

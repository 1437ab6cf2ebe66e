"""One Slurm account, so one GrpTRESMins limit, per pool (docs/slurm.md, "One Slurm limit per
pool"): two pools of a cluster may no longer share an account suffix, and members are always
associated in their pool's partitions (the ``slurm_partition_associations`` switch goes).

Pools that shared a suffix on a cluster keep it for the oldest of them; each other one gets a
suffix of its own made from its name (``-gpu`` for "setonix GPU" when free). The next
provisioning plan then shows the new accounts for review, as any change does."""

import re

import django.core.validators
from django.db import migrations, models


def _suffix_from(name: str, taken: set[str]) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-").split("-")
    for candidate in (f"-{words[-1]}" if words and words[-1] else "", "-" + "-".join(words)):
        candidate = candidate[:16].rstrip("-")
        if len(candidate) > 1 and candidate not in taken:
            return candidate
    number = 2
    while f"-pool{number}" in taken:
        number += 1
    return f"-pool{number}"


def suffixes_split(apps, schema_editor):
    pool_model = apps.get_model("projects", "ResourcePool")
    taken: dict[int, set[str]] = {}
    for pool in pool_model.objects.order_by("cluster_id", "pk"):
        suffix = pool.slurm_account_suffix.strip().lower()
        cluster_taken = taken.setdefault(pool.cluster_id, set())
        if suffix in cluster_taken:
            suffix = _suffix_from(pool.name, cluster_taken)
        cluster_taken.add(suffix)
        if suffix != pool.slurm_account_suffix:
            pool.slurm_account_suffix = suffix
            pool.save(update_fields=["slurm_account_suffix"])


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0002_project_archived"),
    ]

    operations = [
        migrations.RunPython(suffixes_split, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name="resourcepool",
            name="slurm_partition_associations",
        ),
        migrations.AlterField(
            model_name="resourcepool",
            name="slurm_account_suffix",
            field=models.CharField(
                blank=True,
                help_text="the pool's Slurm account is the project code and this suffix (e.g. "
                "-gpu; blank: the code itself), limited to the pool's SU alone; each pool of a "
                "cluster has its own suffix",
                max_length=16,
                validators=[
                    django.core.validators.RegexValidator(
                        "^[a-z0-9_.-]*$",
                        "Only lower-case letters, digits, '-', '_' and '.' (Slurm stores "
                        "accounts in lower case).",
                    )
                ],
            ),
        ),
        migrations.AddConstraint(
            model_name="resourcepool",
            constraint=models.UniqueConstraint(
                fields=("cluster", "slurm_account_suffix"),
                name="pool_account_suffix_unique",
                violation_error_code="pool_suffix_taken",
                violation_error_message="Another pool of this cluster already has this account "
                "suffix: each pool needs a Slurm account of its own, so that its GrpTRESMins "
                "holds its SU alone (e.g. blank for the CPU pool, -gpu for the GPU pool).",
            ),
        ),
    ]

"""Asking for quarantined lines to be tried again.

A new rate version, cost model or project can make quarantined lines chargeable, and staff can
ask for a retry. The domains that own those inputs (clusters, costs) sit below the ledger and
must not import it, so this one function lives beside the models and enqueues the ledger's
retry task by name (``kit.queue``). New projects are announced by ``projects`` with a signal
(``projects.signals.projects_created``), received here.
"""

from __future__ import annotations

import logging

from accounting.models import Cluster, QuarantinedRecord
from kit.queue import task_enqueue

logger = logging.getLogger(__name__)


def quarantine_retry_enqueue(*, cluster: Cluster) -> None:
    """After the commit, retry the cluster's open quarantined lines (their cause may be fixed)."""
    if QuarantinedRecord.objects.filter(cluster=cluster, resolved_at__isnull=True).exists():
        # What asked for it (a new project, version or cost model) is saved either way: a
        # retry the queue did not take is logged, and staff can ask again on the quarantine page.
        task_enqueue(
            name="accounting.tasks.quarantine_retry",
            args=(cluster.pk,),
            on_unsent=lambda unsent: logger.warning(
                "quarantined lines of %s not retried: %s", cluster.name, unsent
            ),
        )


def projects_created_received(**kwargs: object) -> None:
    """A new project may be the missing account of quarantined jobs on any cluster."""
    for cluster in Cluster.objects.all():
        quarantine_retry_enqueue(cluster=cluster)

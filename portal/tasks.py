"""Operational tasks of the portal itself."""

from __future__ import annotations

import os
import socket
from typing import Any

from celery import shared_task
from django.db import connection

from accounting.models import PartitionVersion


@shared_task(name="portal.worker_health", soft_time_limit=30, time_limit=60)
def worker_health() -> dict[str, Any]:
    """Report which process answered and what database it sees (``manage.py worker_health``).

    Staff use it to check that a worker is alive and points at the same database as the web.
    """
    return {
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "database_vendor": connection.vendor,
        "database_name": str(connection.settings_dict["NAME"]),
        "partition_versions": PartitionVersion.objects.count(),
    }

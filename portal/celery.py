"""The Celery application.

Configuration comes from Django settings (``CELERY_*``). Without ``CELERY_BROKER_URL`` tasks
run eagerly in the calling process, which is what ``make demo`` uses.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

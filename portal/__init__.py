"""The allocation and accounting portal: project package."""

from portal.celery import app as celery_app

__all__ = ("celery_app",)

"""A cluster's grid carbon intensity over time (docs/energy-and-carbon.md)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from accounting.models.clusters import Cluster


class GridIntensity(models.Model):
    """A step of a cluster's grid carbon intensity: ``g_per_kwh`` from ``starts_at`` until the
    next step (docs/energy-and-carbon.md). Uploaded as CSV by staff."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="grid_intensity")
    starts_at = models.DateTimeField()
    g_per_kwh = models.DecimalField(max_digits=9, decimal_places=3)

    class Meta:
        ordering = ["cluster", "starts_at"]
        verbose_name_plural = "grid intensities"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "starts_at"], name="grid_intensity_unique_start"
            ),
            models.CheckConstraint(
                condition=Q(g_per_kwh__gte=0), name="grid_intensity_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} {self.starts_at.isoformat()} {self.g_per_kwh} g/kWh"

"""A cluster's money cost model, versioned (docs/costs.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from accounting.models.clusters import Cluster


class CostModelVersion(models.Model):
    """A money cost model (PeCoH report, chapter 4 format) in force on a cluster from
    ``effective_from``: versioned like rates, rows never edited. ``text`` is the model file
    as staff uploaded or pasted it; ``currency`` is read from it."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="cost_models")
    number = models.PositiveIntegerField(help_text="1, 2, ... per cluster")
    name = models.CharField(max_length=100)
    effective_from = models.DateTimeField()
    text = models.TextField(help_text="The cost model description (chapter 4 format)")
    currency = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    change_note = models.TextField(blank=True)
    # Why the jobs since ``effective_from`` were not priced again (the task queue did not take
    # the work); empty once they were. The cost models page offers to ask again.
    reprice_error = models.TextField(blank=True, db_default="")

    class Meta:
        ordering = ["cluster", "-effective_from"]
        get_latest_by = "effective_from"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "effective_from"], name="cost_model_unique_effective_from"
            ),
            models.UniqueConstraint(fields=["cluster", "number"], name="cost_model_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name} cost model v{self.number} {self.name}"

"""The chair's what-if drafts: grants proposed for a round's open requests by a method
(``allocations/rounds/what_if.py``), which the chair edits and then applies in one step
(docs/allocations.md, "Fitting a round to capacity")."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from allocations.models.rounds import AllocationRound, RequestAmount


class WhatIfDraft(models.Model):
    """One what-if of a round: its method and parameters, who made it, and when it was applied
    (a draft applies once)."""

    class Method(models.TextChoices):
        PRO_RATA = "pro_rata", "pro rata"
        PROTECT_SMALL = "protect_small", "small requests protected"
        SCORE_WEIGHTED = "score_weighted", "weighted by score"

    round = models.ForeignKey(AllocationRound, on_delete=models.CASCADE, related_name="what_ifs")
    method = models.CharField(max_length=14, choices=Method.choices)
    parameters = models.JSONField(
        default=dict, help_text="threshold_su, exponent and floor_su, as decimal strings"
    )
    fits = models.JSONField(
        default=dict, help_text="per pool id: the method's factor and its notes, as computed"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(applied_at__isnull=True, applied_by__isnull=True)
                | Q(applied_at__isnull=False, applied_by__isnull=False),
                name="what_if_applied_names_who",
            )
        ]

    def __str__(self) -> str:
        return f"what-if {self.pk} ({self.get_method_display()}) of {self.round}"


class WhatIfProposal(models.Model):
    """The SU a draft proposes for one request's amount on one pool, with the reason its
    decision will carry. ``request_state`` and ``requested_su`` are the request as the draft
    saw it: applying refuses when either has changed since."""

    draft = models.ForeignKey(WhatIfDraft, on_delete=models.CASCADE, related_name="proposals")
    request_amount = models.ForeignKey(
        RequestAmount, on_delete=models.CASCADE, related_name="what_if_proposals"
    )
    request_state = models.CharField(max_length=20)
    requested_su = models.DecimalField(max_digits=24, decimal_places=6)
    score = models.DecimalField(
        max_digits=4, decimal_places=2, null=True, blank=True, help_text="mean review score"
    )
    proposed_su = models.DecimalField(max_digits=24, decimal_places=6)
    reason = models.TextField(blank=True)
    edited = models.BooleanField(default=False, help_text="the chair changed the method's figure")

    class Meta:
        ordering = ["draft", "request_amount__request__project__code", "request_amount__pool__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["draft", "request_amount"], name="what_if_proposal_unique"
            ),
            models.CheckConstraint(
                condition=Q(proposed_su__gte=0) & Q(proposed_su__lte=models.F("requested_su")),
                name="what_if_proposal_within_request",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.proposed_su} of {self.requested_su} SU ({self.draft})"

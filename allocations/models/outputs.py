"""What a project gives back for its SU, and what a committee reads at renewal: research
outputs (publications with a DOI, funding grants, data sets, software, other) and the progress
report a round may require with every renewal.

The forms, pages, BibTeX and CSV live in ``allocations/outputs/``; a progress report's rules
(which rounds require one, when it is complete) in ``allocations/rounds/``."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from projects.models import Project


class ResearchOutput(models.Model):
    """One output of a project. A publication has authors, a year, a venue and usually a DOI
    (stored normalised: lower case, no resolver prefix); a grant a funder, a number, an amount
    and a period; a data set, software or other output a URL."""

    class Kind(models.TextChoices):
        PUBLICATION = "publication", "publication"
        GRANT = "grant", "funding grant"
        DATASET = "dataset", "data set"
        SOFTWARE = "software", "software"
        OTHER = "other", "other output"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="research_outputs")
    kind = models.CharField(max_length=11, choices=Kind.choices)
    title = models.CharField(max_length=500)
    # Publications.
    authors = models.TextField(blank=True, help_text="as cited: 'Surname, A. and Other, B.'")
    year = models.PositiveSmallIntegerField(null=True, blank=True)
    venue = models.CharField(max_length=300, blank=True, help_text="journal, proceedings, ...")
    doi = models.CharField(max_length=200, blank=True, verbose_name="DOI")
    # Funding grants.
    funder = models.CharField(max_length=200, blank=True)
    grant_number = models.CharField(max_length=100, blank=True)
    amount = models.DecimalField(max_digits=16, decimal_places=2, null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    period_start = models.DateField(null=True, blank=True)
    period_end = models.DateField(null=True, blank=True)
    # Data sets, software, other outputs (and optionally any output).
    url = models.URLField(max_length=500, blank=True, verbose_name="URL")
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-added_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "doi"], condition=~Q(doi=""), name="research_output_doi_unique"
            ),
            models.CheckConstraint(
                condition=Q(amount__isnull=True) | Q(amount__gte=0),
                name="research_output_amount_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(period_start__isnull=True)
                | Q(period_end__isnull=True)
                | Q(period_start__lte=F("period_end")),
                name="research_output_period_in_order",
            ),
        ]
        indexes = [models.Index(fields=["project", "added_at"], name="research_output_added")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.title}"


class ProgressReport(models.Model):
    """What a renewal reports on the grant it follows: text, and the project's outputs it
    points to. A round with ``requires_progress_report`` refuses to submit a renewal without
    one."""

    request = models.OneToOneField(
        "allocations.AllocationRequest", on_delete=models.CASCADE, related_name="progress_report"
    )
    text = models.TextField()
    outputs = models.ManyToManyField(ResearchOutput, blank=True, related_name="progress_reports")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"progress report of {self.request}"

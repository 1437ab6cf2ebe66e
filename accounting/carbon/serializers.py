"""Input and output serializers of the energy and carbon API (accounting/carbon/api.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rest_framework import serializers

from accounting.carbon.footprint import months_window
from accounting.clusters.serializers import su_field
from kit.api import QuerySerializer

MAX_DAYS = 10 * 366


class CarbonQuerySerializer(QuerySerializer):
    start = serializers.DateField(
        required=False, help_text="first day (inclusive); default: the first day of the month"
        " eleven months before the last day's"
    )  # fmt: skip
    end = serializers.DateField(
        required=False, help_text="day after the last day (exclusive); default: the first day"
        " of next month (UTC)"
    )  # fmt: skip

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Fill in the twelve months before ``end`` (default: up to this month), and bound
        the window to ten years."""
        end = attrs.get("end") or months_window(datetime.now(UTC).date())[1]
        start = attrs.get("start") or months_window(end - timedelta(days=1))[0]
        if end <= start:
            raise serializers.ValidationError({"end": ["must be after start"]})
        if end - start > timedelta(days=MAX_DAYS):
            raise serializers.ValidationError({"end": ["at most ten years after start"]})
        return {"start": start, "end": end}


def _grams(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=24, decimal_places=3, allow_null=True, **kwargs)


class CarbonMonthSerializer(serializers.Serializer):
    """One month of the project on one cluster (``accounting.carbon.selectors.ClusterMonth``)."""

    month = serializers.DateField(source="footprint.month", help_text="its first day")
    cluster = serializers.CharField()
    energy_wh = su_field(
        source="footprint.energy.best_wh",
        help_text="measured where Slurm measured, the engine's estimate elsewhere",
    )
    energy_measured_wh = su_field(
        source="footprint.energy.measured_wh", help_text="Slurm's measurement (ConsumedEnergyRaw)"
    )
    energy_estimated_wh = su_field(
        source="footprint.energy.estimated_wh",
        help_text="the engine's estimate of the jobs Slurm did not measure",
    )
    jobs = serializers.IntegerField(source="footprint.energy.jobs")
    measured_jobs = serializers.IntegerField(source="footprint.energy.measured_jobs")
    co2e_g = _grams(
        source="footprint.co2e_g",
        help_text="grams of CO2e: the sum of the CO2e of the jobs that ended in the month, "
        "each job's energy over the hours it ran at the grid intensity of each hour / 1000; "
        "null when an hour with energy has no intensity",
    )
    mean_g_per_kwh = serializers.DecimalField(
        source="footprint.mean_g_per_kwh", max_digits=12, decimal_places=1, allow_null=True,
        help_text="co2e_g per kWh of energy_wh; null with co2e_g",
    )  # fmt: skip
    days_without_intensity = serializers.IntegerField(
        source="footprint.days_without_intensity",
        help_text="days of the month whose jobs ran in an hour without an intensity",
    )
    intensity_set = serializers.BooleanField(
        help_text="false: the cluster has no series and no constant over these days"
    )


class ProjectCarbonOutputSerializer(serializers.Serializer):
    project = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField(help_text="the day after the last day")
    months = CarbonMonthSerializer(many=True)

"""REST API of utilisation Q(T) (docs/api.md, docs/utilisation.md): JSON or CSV."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import ValidationError
from rest_framework.views import APIView

from accounting.utilisation.peak import PeakError
from accounting.utilisation.quality import (
    ROW_FIELDS,
    PeakInForce,
    UtilisationError,
    WindowError,
    requested_window,
    utc_text,
    utilisation_figures,
    utilisation_rows,
)
from accounting.utilisation.selectors import (
    UtilisationColumnsReport,
    UtilisationReport,
    renderer_json,
    utilisation_columns_get,
    utilisation_report_get,
)
from accounting.utilisation.serializers import (
    UtilisationColumnsOutputSerializer,
    UtilisationOutputSerializer,
    UtilisationQuerySerializer,
)
from kit.api import IsStaff
from kit.csv_export import csv_writer


class UtilisationCsvRenderer(BaseRenderer):
    """``?format=csv`` or ``Accept: text/csv``: rows of ``utilisation_rows`` with a header."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        buffer = io.StringIO()
        csv_writer(buffer).writerows(data)
        return buffer.getvalue().encode(self.charset)


def _flops_text(flops: Decimal) -> str:
    return f"{flops.normalize():f}"


def _peak_body(peak: PeakInForce | None) -> dict[str, Any] | None:
    if peak is None:
        return None
    return {
        "effective_from": utc_text(peak.effective_from),
        "node_count": peak.node_count,
        "peak_flops": _flops_text(peak.peak_flops),
        "cpu_peak_source": str(peak.cpu_source),
        "gpu_peak_source": None if peak.gpu_source is None else str(peak.gpu_source),
    }


SHAPES = ("columns", "buckets")
"""The JSON shapes of a series: ``columns`` (the default since issue 33: the buckets' start
times once, then per series one array per figure) and ``buckets`` (the former default: an
object per bucket, kept for clients written against it)."""


def _report_head(
    report: UtilisationReport | UtilisationColumnsReport, shape: str
) -> dict[str, Any]:
    return {
        "shape": shape,
        "cluster": report.cluster.name,
        "partition": report.partition.name if report.partition else None,
        "timezone": report.cluster.timezone,
        "step": str(report.step),
        "start": utc_text(report.start),
        "end": utc_text(report.end),
        "partitions": [
            {
                "name": peaks.name,
                "now": _peak_body(peaks.now),
                "in_window": [_peak_body(peak) for peak in peaks.in_window],
            }
            for peaks in report.peaks
        ],
    }


def utilisation_columns_body(report: UtilisationColumnsReport) -> dict[str, Any]:
    """The ``columns`` shape: ``starts`` (each bucket's start; a bucket ends where the next
    starts, the last at ``end``) and ``series`` (per partition and ``total``, one array per
    figure). The figures are those of the ``buckets`` shape, value for value."""
    return {**_report_head(report, "columns"), "starts": report.starts, "series": report.series}


def utilisation_columns_json(report: UtilisationColumnsReport) -> bytes:
    """:func:`utilisation_columns_body` as ``JSONRenderer`` writes it, byte for byte, with the
    columns' text as the cache keeps it: a year of hours is never parsed nor printed again."""
    head = renderer_json(_report_head(report, "columns"))
    body = f'{head[:-1]},"starts":{report.starts_json},"series":{report.series_json}}}'
    return body.encode()


def _columns_response(report: UtilisationColumnsReport) -> HttpResponse:
    """The columns as JSON, named by what they were built from (``content_identity``): the
    head's text and the blocks' keys, so the answer's gzip is kept under that name
    (``kit.compression``) without digesting 3 MB of JSON at every request."""
    response = HttpResponse(utilisation_columns_json(report), content_type="application/json")
    if report.identity:
        head = renderer_json(_report_head(report, "columns"))
        named = f"utilisation-columns\n{head}\n{report.identity}".encode()
        response.content_identity = hashlib.sha256(named).hexdigest()  # type: ignore[attr-defined]
    return response


def utilisation_body(report: UtilisationReport) -> dict[str, Any]:
    """The ``buckets`` shape (``UtilisationOutputSerializer``), built directly: an object per
    bucket, too many to pass through serializer fields one by one."""
    return {
        **_report_head(report, "buckets"),
        "buckets": [
            {
                "start": utc_text(window.start),
                "end": utc_text(window.end),
                "total": utilisation_figures(window.total),
                "partitions": {
                    name: utilisation_figures(figures)
                    for name, figures in window.partitions.items()
                },
            }
            for window in report.windows
        ],
    }


def _plain_json(request: Request) -> bool:
    """JSON as ``JSONRenderer`` writes it without options (no ``indent``): the columns' text
    can be sent as it is; the browsable API and indented JSON go through the renderers."""
    return (
        type(request.accepted_renderer) is JSONRenderer
        and request.accepted_media_type == JSONRenderer.media_type
    )


def utilisation_csv_filename(report: UtilisationReport) -> str:
    scope = report.cluster.name + (f"-{report.partition.name}" if report.partition else "")
    return f"utilisation-{scope}-{report.step}-{report.start:%Y%m%d}.csv"


class UtilisationView(APIView):
    """Staff: utilisation Q(T) of a cluster (DESIGN section 4) per hour, day, week or month."""

    permission_classes = [IsAuthenticated, IsStaff]
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, UtilisationCsvRenderer]

    @extend_schema(
        tags=["utilisation"],
        parameters=[UtilisationQuerySerializer],
        responses={
            (200, "application/json"): PolymorphicProxySerializer(
                component_name="UtilisationSeries",
                serializers=[UtilisationColumnsOutputSerializer, UtilisationOutputSerializer],
                resource_type_field_name=None,
            ),
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR,
                description="header, then per bucket one row per partition and one 'total'",
            ),
        },
    )
    def get(self, request: Request) -> HttpResponse:
        """Q(T) = Op_app(T) / Op(T) (eqs 9-12) beside the classical core- and GPU-hour
        utilisation, per bucket, per partition and in total, read from the hourly rows the
        import keeps. Each partition says where its peak came from (eq 3/7 or the vendor's
        figure), its P_peak now and the node-count changes inside the window. Times without a
        zone are the cluster's wall clock; the window is widened to whole local hours."""
        query = UtilisationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        cluster = options["cluster_object"]
        try:
            start, end = requested_window(
                start=options.get("start"), end=options.get("end"), step=options["step"],
                timezone=cluster.zoneinfo, now=timezone.now(),
            )  # fmt: skip
            csv = request.accepted_renderer.format == UtilisationCsvRenderer.format
            if csv or options["shape"] == "buckets":
                report = utilisation_report_get(
                    cluster=cluster, partition=options["partition_object"], start=start,
                    end=end, step=options["step"],
                )  # fmt: skip
            else:  # the columns, kept in the cache month by month (docs/utilisation.md)
                columns = utilisation_columns_get(
                    cluster=cluster, partition=options["partition_object"], start=start,
                    end=end, step=options["step"],
                )  # fmt: skip
                if _plain_json(request):
                    return _columns_response(columns)
                return Response(utilisation_columns_body(columns))
        except WindowError as error:
            raise ValidationError({error.field: [str(error)]}) from None
        except (PeakError, UtilisationError) as error:
            field = "partition" if options["partition_object"] else "cluster"
            raise ValidationError({field: [str(error)]}) from None
        if csv:
            response = Response([ROW_FIELDS, *utilisation_rows(report.windows)])
            filename = utilisation_csv_filename(report)
            response["Content-Disposition"] = f'attachment; filename="{filename}"'
            return response
        return Response(utilisation_body(report))

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # Errors are JSON (the API's error shape) even when CSV was asked for.
        if response.status_code >= 400 and isinstance(
            getattr(request, "accepted_renderer", None), UtilisationCsvRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)

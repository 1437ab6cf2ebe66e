"""GET /api/v1/utilisation/: Q(T) for staff, as JSON or CSV, with its input refused by field.

The world's sample jobs ran on 2026-11-22 around 02:00 UTC on the testbed cluster (UTC).
"""

from __future__ import annotations

import csv
import gzip
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from accounting.models import Partition, UtilisationHourly
from accounting.utilisation.quality import ROW_FIELDS
from accounting.utilisation.selectors import utilisation_series_get

pytestmark = pytest.mark.django_db

URL = "/api/v1/utilisation/"
DAY = "cluster=slurm-testbed&start=2026-11-22T00:00:00Z&end=2026-11-23T00:00:00Z"


@pytest.mark.parametrize(
    ("role", "status"),
    [("anonymous", 401), ("member", 403), ("pi", 403), ("chair", 403), ("staff", 200)],
)
def test_only_staff_read_utilisation(world, role, status):
    response = world.client(role).get(f"{URL}?{DAY}")
    assert response.status_code == status
    if status != 200:
        assert set(response.json()) == {"message", "errors"}
        assert "pawsey" not in response.content.decode()


def test_the_series_has_every_partition_the_total_and_the_peak_sources(world):
    body = world.client("staff").get(f"{URL}?{DAY}&step=hour&shape=buckets").json()
    assert (body["cluster"], body["partition"], body["step"]) == ("slurm-testbed", None, "hour")
    assert (body["start"], body["end"]) == ("2026-11-22T00:00:00Z", "2026-11-23T00:00:00Z")
    assert body["timezone"] == "UTC"
    assert len(body["buckets"]) == 24
    sources = {item["name"]: item["now"] for item in body["partitions"]}
    assert sources["work"]["cpu_peak_source"] == "formula"
    assert sources["work"]["gpu_peak_source"] is None
    assert sources["gpu"]["gpu_peak_source"] == "vendor"  # 23.95e12 per GPU in the spec
    assert sources["work"]["peak_flops"] == "20070400000000"  # 4 nodes * 2 * 2.5088e12
    busy = body["buckets"][2]  # 02:00-03:00, when the sample ran
    assert set(busy["partitions"]) == {"gpu", "work"}
    assert Decimal(busy["total"]["q_percent"]) > 0
    assert busy["partitions"]["work"]["gpu_percent"] is None
    assert body["buckets"][5]["total"]["q_percent"] == "0.000000"


def test_the_figures_are_those_of_the_selector(world):
    body = world.client("staff").get(f"{URL}?{DAY}&step=day&partition=work&shape=buckets").json()
    (bucket,) = body["buckets"]
    work = Partition.objects.get(cluster=world.centre.cluster, name="work")
    (window,) = utilisation_series_get(
        cluster=world.centre.cluster, partition=work, step="day",
        start=datetime(2026, 11, 22, tzinfo=UTC), end=datetime(2026, 11, 23, tzinfo=UTC),
    )  # fmt: skip
    figures = window.total
    assert bucket["total"]["q_percent"] == str(figures.q_percent)
    assert bucket["total"]["core_seconds"] == figures.core_seconds
    assert bucket["total"]["used_flop"] == str(round(figures.used_flop))
    assert bucket["total"]["capacity_flop"] == str(round(figures.capacity_flop))
    assert bucket["partitions"] == {"work": bucket["total"]}
    assert body["partition"] == "work"


def test_the_csv_has_a_row_per_bucket_and_partition_and_the_total(world):
    response = world.client("staff").get(f"{URL}?{DAY}&step=hour&format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert tuple(rows[0]) == ROW_FIELDS
    assert len(rows) == 1 + 24 * 3
    assert [row[2] for row in rows[1:4]] == ["gpu", "work", "total"]
    json_body = world.client("staff").get(f"{URL}?{DAY}&step=hour&shape=buckets").json()
    busy = json_body["buckets"][2]["total"]
    assert rows[9][3] == busy["q_percent"]  # 02:00, total


def test_accept_text_csv_gives_the_csv_too(world):
    response = world.client("staff").get(f"{URL}?{DAY}", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response.content.decode().startswith(",".join(ROW_FIELDS))


def test_errors_are_json_even_when_csv_was_asked_for(world):
    response = world.client("staff").get(f"{URL}?cluster=nowhere&format=csv")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["errors"]["cluster"] == [
        "unknown cluster 'nowhere' (known: slurm-testbed)"
    ]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("", "cluster"),
        ("cluster=nowhere", "cluster"),
        ("cluster=slurm-testbed&partition=nope", "partition"),
        ("cluster=slurm-testbed&step=year", "step"),
        ("cluster=slurm-testbed&start=yesterday", "start"),
        ("cluster=slurm-testbed&start=2026-11-23&end=2026-11-22", "end"),
        ("cluster=slurm-testbed&start=2026-11-22&end=2026-11-22", "end"),
        ("cluster=slurm-testbed&start=2020-01-01&end=2026-01-01&step=hour", "step"),
        ("cluster=slurm-testbed&start=1800-01-01", "start"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(world, query, field):
    response = world.client("staff").get(f"{URL}?{query}")
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"message", "errors"}
    assert field in body["errors"], body


def test_times_off_the_hour_are_widened_and_naive_ones_are_the_clusters_clock(world):
    query = "cluster=slurm-testbed&start=2026-11-22T01:30&end=2026-11-22T02:10&step=hour"
    body = world.client("staff").get(f"{URL}?{query}").json()
    assert (body["start"], body["end"]) == ("2026-11-22T01:00:00Z", "2026-11-22T03:00:00Z")
    assert body["starts"] == ["2026-11-22T01:00:00Z", "2026-11-22T02:00:00Z"]


def test_without_a_window_it_is_the_last_30_days_by_day(world):
    body = world.client("staff").get(f"{URL}?cluster=slurm-testbed").json()
    assert body["step"] == "day"
    assert 30 <= len(body["starts"]) <= 31


def test_a_partition_without_a_peak_is_a_400_not_a_500(world):
    work = Partition.objects.get(cluster=world.centre.cluster, name="work")
    work.versions.update(cpu_peak_n_stream=None, cpu_peak_flops=None)
    response = world.client("staff").get(f"{URL}?{DAY}")
    assert response.status_code == 400
    assert "cluster" in response.json()["errors"]
    assert UtilisationHourly.objects.exists()


def test_writes_are_not_allowed(world):
    assert world.client("staff").post(URL, {}).status_code == 405
    assert world.client("member").post(URL, {}).status_code == 403


def test_the_columns_shape_is_the_default_and_holds_the_buckets_figures_value_for_value(world):
    staff = world.client("staff")
    columns = staff.get(f"{URL}?{DAY}&step=hour").json()
    buckets = staff.get(f"{URL}?{DAY}&step=hour&shape=buckets").json()
    assert (columns["shape"], buckets["shape"]) == ("columns", "buckets")
    head = {key: value for key, value in buckets.items() if key not in ("shape", "buckets")}
    assert {key: columns[key] for key in head} == head
    assert columns["starts"] == [bucket["start"] for bucket in buckets["buckets"]]
    assert [b["end"] for b in buckets["buckets"]] == [*columns["starts"][1:], columns["end"]]
    assert set(columns["series"]) == {"gpu", "work", "total"}
    for name, figures in columns["series"].items():
        for field, values in figures.items():
            old = [
                (bucket["total"] if name == "total" else bucket["partitions"][name])[field]
                for bucket in buckets["buckets"]
            ]
            assert values == old, (name, field)
    assert Decimal(columns["series"]["total"]["q_percent"][2]) > 0  # the sample's hour


def test_an_unknown_shape_is_a_400_naming_it(world):
    response = world.client("staff").get(f"{URL}?{DAY}&shape=rows")
    assert response.status_code == 400
    assert "shape" in response.json()["errors"]


def _a_year_of_hours(cluster):
    """Every hour of 2025 on the testbed's partitions, busy between 35 % and 95 %: what the
    import leaves in the hourly roll-ups whatever the number of jobs."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    rows = []
    for partition in Partition.objects.filter(cluster=cluster):
        version = partition.versions.order_by("effective_from").first()
        cores = version.node_count * version.sockets * version.cores_per_socket * 3600
        gpus = version.node_count * version.gpus * 3600
        for hour in range(8760):
            share = 35 + (hour * 7 + hour // 24 * 13) % 61
            rows.append(
                UtilisationHourly(
                    partition=partition, hour_start=start + timedelta(hours=hour),
                    core_seconds=cores * share // 100, gpu_seconds=gpus * share // 100,
                )
            )  # fmt: skip
    UtilisationHourly.objects.bulk_create(rows)


def test_a_year_by_the_hour_is_under_a_megabyte_compressed_with_the_old_figures(world):
    _a_year_of_hours(world.centre.cluster)
    year = "cluster=slurm-testbed&start=2025-01-01T00:00:00Z&end=2026-01-01T00:00:00Z&step=hour"
    staff = world.client("staff")
    columns = staff.get(f"{URL}?{year}")
    buckets = staff.get(f"{URL}?{year}&shape=buckets")
    assert len(columns.json()["starts"]) == 8760
    wire = staff.get(f"{URL}?{year}", HTTP_ACCEPT_ENCODING="gzip, br")
    assert wire["Content-Encoding"] == "gzip"  # kit/compression.py
    assert len(wire.content) <= 1_000_000
    assert gzip.decompress(wire.content) == columns.content
    assert len(columns.content) < len(buckets.content) / 2
    series, old = columns.json()["series"], buckets.json()["buckets"]
    for field in ("q_percent", "used_flop", "core_seconds", "gpu_percent"):
        assert series["total"][field] == [bucket["total"][field] for bucket in old]
        assert series["work"][field] == [bucket["partitions"]["work"][field] for bucket in old]


def test_a_year_by_the_hour_is_sent_from_what_the_process_kept_until_an_import_moves_it(world):
    """The joined columns and their gzip are kept per process under the blocks' keys: the same
    bytes again, without fetching the blocks; new hourly rows are new keys, a new answer."""
    from accounting.ledger.rollups import hourly_apply

    _a_year_of_hours(world.centre.cluster)
    year = "cluster=slurm-testbed&start=2025-01-01T00:00:00Z&end=2026-01-01T00:00:00Z&step=hour"
    staff = world.client("staff")
    first = staff.get(f"{URL}?{year}", HTTP_ACCEPT_ENCODING="gzip")
    again = staff.get(f"{URL}?{year}", HTTP_ACCEPT_ENCODING="gzip")
    assert again.content == first.content  # the kept gzip, random header included
    plain = staff.get(f"{URL}?{year}")
    assert gzip.decompress(again.content) == plain.content

    work = Partition.objects.get(cluster=world.centre.cluster, name="work")
    hour = datetime(2025, 12, 31, 22, tzinfo=UTC)
    hourly_apply({(work.pk, hour): [3600, 0]})
    moved = staff.get(f"{URL}?{year}", HTTP_ACCEPT_ENCODING="gzip")
    assert moved.content != first.content
    fresh = staff.get(f"{URL}?{year}")
    assert gzip.decompress(moved.content) == fresh.content != plain.content


def test_the_columns_text_is_what_the_json_renderer_writes_byte_for_byte(world):
    """The cached blocks' JSON text is sent as it is (issue 33): the same bytes as rendering the
    uncached body, from a cold cache and from a warm one."""
    from rest_framework.renderers import JSONRenderer

    from accounting.utilisation.api import _report_head
    from accounting.utilisation.quality import utc_text, utilisation_columns
    from accounting.utilisation.selectors import utilisation_report_get

    _a_year_of_hours(world.centre.cluster)
    query = "cluster=slurm-testbed&start=2025-10-03T05:00:00Z&end=2026-01-01T00:00:00Z"
    report = utilisation_report_get(
        cluster=world.centre.cluster, start=datetime(2025, 10, 3, 5, tzinfo=UTC),
        end=datetime(2026, 1, 1, tzinfo=UTC), step="hour",
    )  # fmt: skip
    names = [peaks.name for peaks in report.peaks]
    body = {
        **_report_head(report, "columns"),
        "starts": [utc_text(window.start) for window in report.windows],
        "series": utilisation_columns(report.windows, names),
    }
    staff = world.client("staff")
    for _ in ("cold", "warm"):
        response = staff.get(f"{URL}?{query}&step=hour")
        assert response["Content-Type"] == "application/json"
        assert response.content == JSONRenderer().render(body)
    indented = staff.get(f"{URL}?{query}&step=hour", HTTP_ACCEPT="application/json; indent=2")
    assert indented.content.startswith(b'{\n  "shape": "columns"')
    assert indented.json() == response.json()
    browsable = staff.get(f"{URL}?{query}&step=day", HTTP_ACCEPT="text/html")
    assert browsable.status_code == 200
    assert b"q_percent" in browsable.content

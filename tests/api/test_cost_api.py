"""Money in the API: job cost fields, usage and balance money, and the staff-only cost
distribution endpoint (docs/api.md, docs/costs.md)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from django.db.models import Sum

from accounting.costs.services import BEGINNING, cost_model_version_create, job_costs_recompute
from accounting.models import Job, UsageDaily
from tests.allocations.conftest import PERIOD, SAMPLE_DAY
from tests.factories import usage_day_add

ROOT = Path(__file__).resolve().parents[2]
MODEL = (ROOT / "examples" / "costmodels" / "slurm-testbed.cost").read_text()

pytestmark = pytest.mark.django_db


@pytest.fixture
def priced(world):
    cluster = world.centre.cluster
    version = cost_model_version_create(cluster=cluster, name="demo", text=MODEL)
    job_costs_recompute(cluster=cluster, since=BEGINNING)
    world.job.refresh_from_db()
    assert world.job.cost is not None
    return version


def test_jobs_carry_their_cost_currency_and_model_version(world, priced):
    response = world.client("member").get("/api/v1/jobs/", {"project": "pawsey0003"})
    assert response.status_code == 200
    rows = response.json()["results"]
    costs = dict(Job.objects.filter(pk__in=[row["id"] for row in rows]).values_list("pk", "cost"))
    for row in rows:
        if costs[row["id"]] is None:
            assert (row["cost"], row["currency"], row["cost_model_version"]) == (None, None, None)
        else:
            assert row["cost"] == f"{costs[row['id']]:.6f}"
            assert (row["currency"], row["cost_model_version"]) == ("Euro", 1)
    assert any(row["cost"] for row in rows)
    detail = world.client("member").get(f"/api/v1/jobs/{world.job.pk}/").json()
    assert detail["cost"] == f"{world.job.cost:.6f}"
    breakdown = detail["cost_breakdown"]
    assert breakdown["currency"] == "Euro"
    assert Decimal(breakdown["total"]) == world.job.cost
    rates = [rate for node_set in breakdown["node_sets"] for rate in node_set["rates"]]
    assert {"Hardware", "Power"} <= {rate["name"] for rate in rates}
    # The sample has no energy record: its energy rates are not priced.
    assert all(rate["cost"] is None for rate in rates if rate["kind"] == "energy")
    assert breakdown["missing_data"] is True
    # The demo model's nodes are shared: the job pays its share of each node (eq 1).
    assert breakdown["nodes_are"] == "shared"
    assert 0 < Fraction(breakdown["node_share"]) <= 1


def test_a_job_of_a_cluster_without_a_model_has_null_money(world):
    row = world.client("member").get(f"/api/v1/jobs/{world.job.pk}/").json()
    assert (row["cost"], row["currency"], row["cost_model_version"]) == (None, None, None)
    assert row["cost_breakdown"] is None


def test_usage_rows_sum_the_money(world, priced):
    response = world.client("staff").get(
        "/api/v1/usage/", {"granularity": "total", "project": "pawsey0003"}
    )
    (row,) = response.json()["results"]
    expected = UsageDaily.objects.filter(project__code="pawsey0003").aggregate(total=Sum("cost"))[
        "total"
    ]
    assert Decimal(row["cost"]) == expected > 0
    assert row["currency"] == "Euro"


def test_usage_never_sums_money_across_currencies(world, priced):
    from tests.factories import PartitionVersionFactory

    other = PartitionVersionFactory(partition__name="cpu", partition__cluster__name="abroad")
    cost_model_version_create(
        cluster=other.partition.cluster, name="usd",
        text="currency USD\nnodes all n[1-4]\nrate Hardware 1 k/a\n",
    )  # fmt: skip
    usage_day_add(
        world.centre.p3,
        other.partition,
        "carol",
        SAMPLE_DAY,
        service_units=Decimal(1),
        cost=Decimal("5.5"),
        jobs=1,
    )
    client = world.client("staff")
    (total,) = client.get(
        "/api/v1/usage/", {"granularity": "total", "project": "pawsey0003"}
    ).json()["results"]
    assert (total["cost"], total["currency"]) == (None, None)  # Euro + USD: no sum
    assert Decimal(total["service_units"]) > 1  # everything else still adds up

    rows = client.get(
        "/api/v1/usage/",
        {"granularity": "total", "project": "pawsey0003", "group_by": "partition"},
    ).json()["results"]
    by_cluster = {}
    for row in rows:
        by_cluster.setdefault(row["cluster"], set()).add(row["currency"])
    assert by_cluster["abroad"] == {"USD"}
    assert by_cluster["slurm-testbed"] == {"Euro"}
    abroad = next(row for row in rows if row["cluster"] == "abroad")
    assert Decimal(abroad["cost"]) == Decimal("5.5")

    (one,) = client.get(
        "/api/v1/usage/",
        {"granularity": "total", "project": "pawsey0003", "cluster": "slurm-testbed"},
    ).json()["results"]
    assert one["currency"] == "Euro"
    assert Decimal(one["cost"]) > 0


def test_the_balance_shows_the_money_spent_in_the_period(world, priced):
    body = (
        world.client("member")
        .get("/api/v1/projects/pawsey0003/balance/", {"on": SAMPLE_DAY.isoformat()})
        .json()
    )
    pools = {pool["pool"]: pool for pool in body["pools"]}
    cpu = pools["testbed CPU"]
    assert cpu["currency"] == "Euro"
    spent = UsageDaily.objects.filter(
        project__code="pawsey0003", partition__name="work", day__gte=PERIOD[0],
        day__lt=PERIOD[1],
    ).aggregate(total=Sum("cost"))["total"]  # fmt: skip
    assert Decimal(cpu["current"]["used_cost"]) == spent > 0
    all_periods = (
        world.client("member")
        .get(
            "/api/v1/projects/pawsey0003/balance/", {"on": SAMPLE_DAY.isoformat(), "periods": "all"}
        )
        .json()
    )
    cpu_all = next(pool for pool in all_periods["pools"] if pool["pool"] == "testbed CPU")
    assert cpu_all["current"]["used_cost"] == cpu["current"]["used_cost"]


def test_the_balance_of_a_cluster_without_a_model_has_no_currency(world):
    body = world.client("member").get("/api/v1/projects/pawsey0003/balance/").json()
    assert all(pool["currency"] is None for pool in body["pools"])


@pytest.mark.parametrize(
    ("role", "status"),
    [("anonymous", 401), ("member", 403), ("pi", 403), ("committee", 403), ("staff", 200)],
)
def test_the_cost_distribution_is_for_staff_only(world, priced, role, status):
    response = world.client(role).get("/api/v1/cost-distribution/", {"cluster": "slurm-testbed"})
    assert response.status_code == status


def test_the_cost_distribution_matches_numpy_on_the_sample(world, priced):
    day = SAMPLE_DAY.isoformat()
    response = world.client("staff").get(
        "/api/v1/cost-distribution/",
        {"cluster": "slurm-testbed", "start": day, "end": "2026-11-23"},
    )
    assert response.status_code == 200
    body = response.json()
    jobs = (
        Job.objects.filter(cluster__name="slurm-testbed", end__date=SAMPLE_DAY)
        .exclude(charge_state=Job.ChargeState.PENDING)
        .exclude(nodelist="")
    )
    costs = np.array([float(cost) for cost in jobs.values_list("cost", flat=True)])
    sizes = np.array(list(jobs.values_list("nnodes", flat=True)), dtype=float)
    runtimes = np.array(list(jobs.values_list("elapsed_seconds", flat=True)), dtype=float) / 3600
    assert body["job_count"] == len(costs) > 10
    assert (body["currency"], body["model_version"]["number"], body["costs_from"]) == (
        "Euro", 1, "stored",
    )  # fmt: skip
    assert body["model_version"]["nodes_are"] == "shared"  # the demo cluster shares nodes
    columns = {column["key"]: column for column in body["columns"]}
    for key, values in (("cost", costs), ("size", sizes), ("runtime", runtimes)):
        quantiles = columns[key]["quantiles"]
        assert len(quantiles) == 101
        for point in quantiles:
            expected = np.quantile(values, float(point["percent"]) / 100, method="lower")
            assert float(point["value"]) == pytest.approx(expected, rel=1e-6, abs=1e-6), key
        assert float(columns[key]["sum"]) == pytest.approx(values.sum(), rel=1e-9)
        assert float(columns[key]["mean"]) == pytest.approx(values.mean(), rel=1e-6, abs=1e-6)
        assert float(columns[key]["std_dev"]) == pytest.approx(values.std(), rel=1e-5, abs=1e-6)
    ranked = np.sort(costs)[::-1]
    for point in body["concentration"]:
        # ceil(p/100 * N), exactly (in floating point 29 % of 220 jobs is not 63.8 but 63.800...1)
        top = math.ceil(Decimal(point["top_percent"]) * len(ranked) / 100)
        top = min(max(top, 1), len(ranked))
        assert point["jobs"] == top
        share = ranked[:top].sum() / ranked.sum() * 100
        assert float(point["share_percent"]) == pytest.approx(share, abs=1e-4)


def test_another_version_is_priced_again_for_the_distribution(world, priced):
    cluster = world.centre.cluster
    cost_model_version_create(
        cluster=cluster, name="dearer", text=MODEL.replace("6 k/a", "12 k/a"),
        effective_from=datetime(2030, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    params = {"cluster": "slurm-testbed", "start": "2026-11-22", "end": "2026-11-23"}
    first = (
        world.client("staff")
        .get("/api/v1/cost-distribution/", {**params, "model_version": 1})
        .json()
    )
    second = (
        world.client("staff")
        .get("/api/v1/cost-distribution/", {**params, "model_version": 2})
        .json()
    )
    assert (first["costs_from"], second["costs_from"]) == ("stored", "recomputed")
    assert first["job_count"] == second["job_count"]
    assert Decimal(second["columns"][2]["sum"]) > Decimal(first["columns"][2]["sum"])


@pytest.mark.parametrize(
    "params",
    [
        {"cluster": "nowhere"},
        {"cluster": "slurm-testbed", "model_version": 9},
        {"cluster": "slurm-testbed", "start": "2026-11-23", "end": "2026-11-22"},
        {"cluster": "slurm-testbed", "start": "0001-01-01"},
    ],
)
def test_bad_cost_distribution_queries_are_400(world, priced, params):
    response = world.client("staff").get("/api/v1/cost-distribution/", params)
    assert response.status_code == 400

"""A rate change seen before it ships (issue 29, item 3): drafts of a cluster's rates are kept
but in force nowhere, checked as a spec file is, discarded or published; their impact per
project and pool, the budget periods that would run out earlier, and the slurm.conf lines
they change, through the ``rates_impact`` command, the staff page and the API."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from accounting.clusters.specs import SpecFileError
from accounting.costs.services import cost_model_version_create
from accounting.ledger.pipeline import jobs_import
from accounting.ledger.rate_drafts import (
    RateDraftError,
    rate_draft_create,
    rate_draft_discard,
    rate_draft_publish,
    rate_draft_rates,
)
from accounting.models import Job, PartitionVersion, RateDraft
from allocations.grants.budget import exhaustion_shift
from allocations.grants.rates_impact import rates_impact_get, rates_impact_payload
from allocations.grants.selectors import balance_get
from allocations.grants.services import allocation_grant
from tests.allocations.conftest import PERIOD, SAMPLE
from tests.factories import api_token

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "clusters" / "slurm-testbed.json"
ON = date(2026, 11, 23)  # the day after the sample's jobs ended
HEADER = (
    "JobID|JobIDRaw|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|NNodes|NodeList|"
    "AllocTRES"
)

pytestmark = pytest.mark.django_db


def _spec(**work: object) -> dict:
    """The testbed's spec file with the work partition's fields changed."""
    document = json.loads(SPEC.read_text())
    document["partitions"][0].update(work)
    return document


DOUBLE_WORK = {"weight_override": 256, "weight_override_reason": "new CPUs, twice the power"}


@pytest.fixture
def used(centre):
    """Both CPU projects hold 120 SU on the CPU pool (30 a quarter); the sample's jobs are
    charged: about 6 SU each, 0.9 SU a day over 30 days, so the quarter ends first."""
    for project in (centre.p1, centre.p2):
        allocation_grant(
            project=project, pool=centre.cpu, amount=Decimal(120), period_start=PERIOD[0],
            period_end=PERIOD[1], actor=centre.staff,
        )  # fmt: skip
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    return centre


# --- Drafts: kept, in force nowhere, checked, discarded, published ---------------------------


def test_a_draft_that_fails_the_spec_validation_is_refused_and_nothing_is_written(centre):
    bad = _spec(sockets=0)
    with pytest.raises(SpecFileError, match="sockets"):
        rate_draft_create(cluster=centre.cluster, spec=bad, created_by=centre.staff)
    with pytest.raises(RateDraftError, match="not 'slurm-testbed'"):
        rate_draft_create(cluster=centre.cluster, spec={**_spec(), "name": "setonix"})
    assert not RateDraft.objects.exists()


def test_a_draft_with_a_bad_cost_model_is_refused_with_its_line(centre):
    with pytest.raises(Exception, match="line 2"):
        rate_draft_create(
            cluster=centre.cluster, spec=_spec(), cost_model_text="currency EUR\nrate x\n"
        )
    assert not RateDraft.objects.exists()


def test_an_import_while_a_draft_waits_prices_with_the_version_in_force(centre):
    before = PartitionVersion.objects.count()
    rate_draft_create(cluster=centre.cluster, spec=_spec(**DOUBLE_WORK), created_by=centre.staff)
    line = (
        "9001|9001|alice|pawsey0001|work|COMPLETED|2026-11-22T10:00:00|2026-11-22T10:00:00|"
        "2026-11-22T11:00:00|3600|1|nid1001|cpu=128,mem=1000M,node=1"
    )
    jobs_import(cluster=centre.cluster, lines=[HEADER, line], source="during a draft")

    job = Job.objects.get(job_id_raw="9001")
    assert job.service_units == Decimal(128)  # a whole 128-SU node for an hour, not 256
    assert PartitionVersion.objects.count() == before


def test_a_discarded_draft_leaves_nothing_and_a_published_one_is_the_next_version(centre):
    draft = rate_draft_create(cluster=centre.cluster, spec=_spec(**DOUBLE_WORK))
    rate_draft_discard(draft=draft)
    assert not RateDraft.objects.exists()

    draft = rate_draft_create(cluster=centre.cluster, spec=_spec(**DOUBLE_WORK))
    result = rate_draft_publish(draft=draft, published_by=centre.staff)

    assert result.versioned == ["work"]
    newest = PartitionVersion.objects.filter(partition__name="work").latest()
    assert (newest.number, newest.weight) == (2, Decimal(256))
    assert not RateDraft.objects.exists()


# --- The impact ------------------------------------------------------------------------------


def test_doubling_a_weight_doubles_each_projects_su_on_its_pool(used):
    charged = {
        project.code: sum(
            (
                job.service_units
                for job in Job.objects.filter(
                    project=project, partition__name="work", charge_state=Job.ChargeState.CHARGED
                )
            ),
            Decimal(0),
        )
        for project in (used.p1, used.p2)
    }
    draft = rate_draft_create(cluster=used.cluster, spec=_spec(**DOUBLE_WORK))
    impact = rates_impact_get(rates=rate_draft_rates(draft), months=12, on=ON)

    rows = {(row.project_code, row.pool_name): row for row in impact.usage.rows}
    for code, total in charged.items():
        if not total:
            continue
        row = rows[(code, "testbed CPU")]
        assert row.charged_su == total
        # each job was rounded once to 6 places; the draft rounds the exact sum once
        assert abs(row.draft_su - 2 * total) <= (row.jobs + 1) * Decimal("0.000001")
    assert [line.partition for line in impact.usage.weights] == ["work"]


def test_a_project_whose_period_would_run_out_earlier_is_listed_with_the_days(used):
    draft = rate_draft_create(cluster=used.cluster, spec=_spec(**DOUBLE_WORK))
    impact = rates_impact_get(rates=rate_draft_rates(draft), months=12, on=ON)

    assert impact.earlier, "the sample's jobs burn the CPU pool; doubled, it runs out sooner"
    for item in impact.earlier:
        project = used.p1 if item.project_code == "pawsey0001" else used.p2
        balance = balance_get(project=project, pool=used.cpu, on=ON)
        row = next(r for r in impact.usage.rows if r.project_code == item.project_code)
        assert item.shift == exhaustion_shift(balance, ratio=row.ratio)
        assert item.shift.days_earlier > 0


def test_the_command_prints_a_table_and_the_same_impact_as_json(used, tmp_path):
    path = tmp_path / "draft.json"
    path.write_text(json.dumps(_spec(**DOUBLE_WORK)))
    out = StringIO()
    call_command("rates_impact", "--cluster", "slurm-testbed", "--draft", str(path), stdout=out)
    text = out.getvalue()
    assert "testbed CPU" in text
    assert '+ PartitionName=work TRESBillingWeights="CPU=2,' in text

    out = StringIO()
    call_command(
        "rates_impact", "--cluster", "slurm-testbed", "--draft", str(path), "--months", "3",
        "--json", stdout=out,
    )  # fmt: skip
    payload = json.loads(out.getvalue())
    assert payload["months"] == 3
    assert {row["pool"] for row in payload["projects"]} >= {"testbed CPU"}
    assert payload["tres_billing_weights"][0]["partition"] == "work"
    assert not RateDraft.objects.exists()  # the command reads a draft, it keeps none


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps(_spec(cores_per_socket="many")), "cores_per_socket"),
    ],
)
def test_the_command_refuses_a_bad_draft_in_a_sentence(centre, tmp_path, content, message):
    path = tmp_path / "draft.json"
    path.write_text(content)
    with pytest.raises(CommandError, match=message):
        call_command("rates_impact", "--cluster", "slurm-testbed", "--draft", str(path))
    with pytest.raises(CommandError, match="cannot be read"):
        call_command("rates_impact", "--cluster", "slurm-testbed", "--draft", "/no/such.json")
    with pytest.raises(CommandError, match="months"):
        call_command(
            "rates_impact", "--cluster", "slurm-testbed", "--draft", str(SPEC), "--months", "0"
        )


def test_money_is_repriced_under_a_draft_cost_model(used):
    cost_model_version_create(
        cluster=used.cluster, name="now", text="currency EUR\nnodes all nid[1001-1004]\n"
        "rate node 1 1/h\nnodes gpus nid[2001-2002]\nrate node 4 1/h\n",
    )  # fmt: skip
    draft = rate_draft_create(
        cluster=used.cluster, spec=_spec(),
        cost_model_text="currency EUR\nnodes all nid[1001-1004]\nrate node 3 1/h\n"
        "nodes gpus nid[2001-2002]\nrate node 4 1/h\n",
    )  # fmt: skip
    payload = rates_impact_payload(
        rates_impact_get(rates=rate_draft_rates(draft), months=12, on=ON)
    )
    assert payload["currency"] == "EUR"
    work = [row for row in payload["projects"] if row["pool"] == "testbed CPU"]
    assert work
    for row in work:
        # 3 EUR a node-hour instead of 1: three times the money, each rounded once to 6 places
        difference = Decimal(row["draft_money"]) - 3 * Decimal(row["current_money"])
        assert abs(difference) <= Decimal("0.000002")
        assert Decimal(row["current_money"]) > 0
        # the same SU rates: the draft's SU are the charges, rounded once instead of per job
        difference = Decimal(row["draft_su"]) - Decimal(row["charged_su"])
        assert abs(difference) <= (row["jobs"] + 1) * Decimal("0.0000005")
        assert row["change_percent"] == "0.00"
    assert payload["tres_billing_weights"] == []


# --- Who may see it: staff only, refused before the input is read ---------------------------


def test_only_staff_reach_the_page_and_a_bad_draft_is_shown_not_saved(used):
    client = Client()
    client.force_login(used.alice)
    assert client.get("/allocations/clusters/slurm-testbed/rate-drafts/").status_code == 404
    assert client.post("/allocations/clusters/slurm-testbed/rate-drafts/", {}).status_code == 404

    client.force_login(used.staff)
    page = client.get("/accounting/partitions/")
    assert b"/allocations/clusters/slurm-testbed/rate-drafts/" in page.content
    bad = client.post(
        "/allocations/clusters/slurm-testbed/rate-drafts/", {"spec": json.dumps(_spec(gpus=-1))}
    )
    assert bad.status_code == 200
    assert b"gpus" in bad.content
    assert not RateDraft.objects.exists()

    made = client.post(
        "/allocations/clusters/slurm-testbed/rate-drafts/",
        {"spec": json.dumps(_spec(**DOUBLE_WORK)), "note": "twice"},
    )
    draft = RateDraft.objects.get()
    assert made.status_code == 302
    shown = client.get(f"/allocations/rate-drafts/{draft.pk}/")
    assert b"TRESBillingWeights" in shown.content
    assert b"testbed CPU" in shown.content
    client.post(f"/allocations/rate-drafts/{draft.pk}/", {"action": "discard"})
    assert not RateDraft.objects.exists()


def test_the_api_is_staff_only_before_it_reads_the_body(used):
    client = Client()
    member = api_token(used.alice)
    refused = client.post(
        "/api/v1/rates-impact/", {"spec": "not even a spec"}, content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {member}",
    )  # fmt: skip
    assert refused.status_code == 403

    staff = {"HTTP_AUTHORIZATION": f"Token {api_token(used.staff)}"}
    bad = client.post(
        "/api/v1/rates-impact/", {"cluster": "slurm-testbed", "spec": _spec(sockets=0)},
        content_type="application/json", **staff,
    )  # fmt: skip
    assert bad.status_code == 400
    assert "sockets" in bad.json()["message"]

    kept = client.post(
        "/api/v1/rates-impact/",
        {"cluster": "slurm-testbed", "spec": _spec(**DOUBLE_WORK), "keep": True, "months": 12},
        content_type="application/json", **staff,
    )  # fmt: skip
    assert kept.status_code == 200, kept.content
    body = kept.json()
    assert body["draft"] == RateDraft.objects.get().pk
    assert body["tres_billing_weights"][0]["partition"] == "work"

    url = f"/api/v1/rate-drafts/{body['draft']}/"
    member_headers = {"HTTP_AUTHORIZATION": f"Token {member}"}
    assert client.get(url, **member_headers).status_code == 403
    assert client.delete(url, **member_headers).status_code == 403
    again = client.get(url + "?months=12", **staff).json()
    assert again["projects"] == body["projects"]
    assert client.delete(url, **staff).status_code == 204
    assert not RateDraft.objects.exists()

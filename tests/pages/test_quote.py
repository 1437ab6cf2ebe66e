"""The quote form: SU and energy of a planned job, and the same job on every partition."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from accounting.clusters.quotes import QuoteRequest, quote_compute
from accounting.clusters.selectors import partition_version_at
from accounting.models import Partition
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


def _partition(site, name: str) -> Partition:
    return Partition.objects.get(cluster=site.cluster, name=name)


def test_a_quote_prices_the_job_with_the_engine_and_compares_every_partition(site):
    work = _partition(site, "work")
    page = client_for(site.users["member"]).get(
        reverse("accounting:quote"),
        {"partition": work.pk, "nodes": 1, "cores_per_node": 1, "memory_per_node": "122500M",
         "hours": 1},
    )  # fmt: skip
    result = page.context["result"]
    assert result.charge.service_units == Decimal(64)  # half the node's memory (README)
    assert result.charge.dominant_resource == "memory"
    expected = quote_compute(
        partition_version_at(partition=work, at=result.version.effective_from).spec,
        QuoteRequest(nodes=1, hours=Decimal(1), cores_per_node=Decimal(1),
                     memory_per_node_mb=Decimal(122500)),
    )  # fmt: skip
    assert result.charge == expected
    compared = {row.version.partition.name for row in page.context["rows"]}
    assert compared == {"work", "gpu"}
    content = page.content.decode()
    assert "64 SU" in content
    assert "csv=partitions" in content


def test_a_job_that_cannot_fit_is_explained(site):
    work = _partition(site, "work")
    page = client_for(site.users["member"]).get(
        reverse("accounting:quote"),
        {"partition": work.pk, "nodes": 1, "gpus_per_node": 2, "hours": 1},
    )
    assert page.context["result"] is None
    assert "does not fit on slurm-testbed/work" in page.content.decode()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("memory_per_node", "lots", "Not a memory amount"),
        ("hours", "0", "Must be more than zero."),
        ("nodes", "0", "Ensure this value is greater than or equal to 1."),
    ],
)
def test_bad_input_gets_a_clear_message(site, field, value, message):
    work = _partition(site, "work")
    query = {"partition": work.pk, "nodes": 1, "hours": 1, field: value}
    page = client_for(site.users["pi"]).get(reverse("accounting:quote"), query)
    assert page.status_code == 200
    assert message in page.content.decode()


def test_the_empty_form_explains_the_defaults(site):
    page = client_for(site.users["pi"]).get(reverse("accounting:quote"))
    assert "the cores' share of memory" in page.content.decode().replace("&#x27;", "'")

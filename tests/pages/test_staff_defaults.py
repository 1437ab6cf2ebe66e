"""Staff pages open on the cluster whose data arrived last, and say so plainly when a cluster
has none: a first look used to land on a paper's example system, 0.00 % everywhere."""

from __future__ import annotations

import pytest
from django.utils import timezone

from accounting.clusters.selectors import clusters_by_recent_data
from accounting.models import Cluster, ImportRun
from tests.factories import example_cluster
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def empty_first_by_name(site):
    """A cluster that sorts before the testbed and has never had an import."""
    return example_cluster("paper-test-system")


def test_the_cluster_with_the_newest_import_comes_first(site, empty_first_by_name):
    assert Cluster.objects.order_by("name").first() == empty_first_by_name
    assert clusters_by_recent_data()[0] == site.cluster
    ImportRun.objects.create(cluster=empty_first_by_name, source="later", started_at=timezone.now())
    ImportRun.objects.filter(cluster=empty_first_by_name).update(started_at=timezone.now())
    assert clusters_by_recent_data()[0] == empty_first_by_name


def test_utilisation_and_overhead_open_on_the_cluster_with_data(site, empty_first_by_name):
    staff = client_for(site.users["staff"])
    utilisation = staff.get("/accounting/utilisation/")
    assert utilisation.context["report"].cluster == site.cluster
    assert utilisation.context["form"].initial["cluster"] == site.cluster
    assert 'id="no-data"' not in utilisation.content.decode()
    overhead = staff.get("/accounting/overhead/")
    assert overhead.context["form"].initial["cluster"] == site.cluster


def test_a_cluster_without_data_says_so_instead_of_plotting_zeros(site, empty_first_by_name):
    page = client_for(site.users["staff"]).get(
        f"/accounting/utilisation/?cluster={empty_first_by_name.name}"
    )
    notice = page.content.decode()
    assert 'id="no-data"' in notice
    assert "has no sacct data yet" in notice


def test_a_window_without_jobs_names_when_data_last_arrived(site):
    page = client_for(site.users["staff"]).get(
        f"/accounting/utilisation/?cluster={site.cluster.name}&start=2001-01-01&end=2001-01-31"
    )
    notice = page.content.decode()
    assert "ran in this window" in notice
    assert "last arrived on" in notice

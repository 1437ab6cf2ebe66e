"""Every page reads a bounded number of queries, and the number does not grow with the jobs.

Bounds are for the fixture's centre (two projects with grants on two pools each for carol);
the dashboard and project page add a fixed handful per pool of each project (one balance each),
the rest are constant.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounting.ledger.pipeline import jobs_import
from tests.pages.conftest import client_for, recent_history
from tests.pages.test_access import PAGES

pytestmark = pytest.mark.django_db

# page: (role that sees it, at most this many queries)
BOUNDS = {
    "dashboard": ("pi", 40),
    "project": ("pi", 32),
    "project usage csv": ("pi", 28),
    "jobs": ("pi", 9),
    "jobs csv": ("pi", 5),
    "job detail": ("pi", 4),
    "quote": ("pi", 4),
    "explorer": ("pi", 4),
    "explorer live": ("pi", 4),
    "partitions": ("pi", 4),
    "request new": ("pi", 8),
    "request status": ("pi", 12),
    "review form": ("committee", 10),
    "grant form": ("staff", 9),
    "rounds": ("committee", 5),
    "round overview": ("staff", 15),
    "imports": ("staff", 7),
    "quarantine": ("staff", 7),
    "enforcement": ("staff", 4),
}


def test_every_page_has_a_query_bound():
    assert set(BOUNDS) == set(PAGES)


@pytest.mark.parametrize("page", list(BOUNDS))
def test_each_page_reads_a_bounded_number_of_queries(site, page, django_assert_max_num_queries):
    role, bound = BOUNDS[page]
    client = client_for(site.users[role])
    url = PAGES[page][0](site)
    with django_assert_max_num_queries(bound):
        response = client.get(url)
    assert response.status_code == 200


def _queries(client, url):
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries.captured_queries)


def test_more_jobs_do_not_mean_more_queries(site):
    client = client_for(site.users["pi"])
    urls = [
        reverse("home"),
        reverse("allocations:project-detail", args=["pawsey0003"]),
        reverse("accounting:project-jobs", args=["pawsey0003"]),
        reverse("accounting:project-jobs", args=["pawsey0003"]) + "?sort=-su&page=2",
    ]
    before = [_queries(client, url) for url in urls]
    jobs_import(cluster=site.cluster, lines=recent_history(lines=1000, seed=99), source="more")
    assert [_queries(client, url) for url in urls] == before

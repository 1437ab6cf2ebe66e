"""Every page reads a bounded number of queries, and the number does not grow with the jobs.

Bounds are for the fixture's centre (two projects with grants on two pools each for carol): the
dashboard and project page read the balances of all their pools in a fixed number of queries,
and the project page's charts come from the cache until the next import; the rest are constant.
"""

from __future__ import annotations

import os

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounting.ledger.pipeline import jobs_import
from tests.conftest import needs_real_services
from tests.pages.conftest import client_for, recent_history
from tests.pages.test_access import PAGES

pytestmark = pytest.mark.django_db

# page: (role that sees it, at most this many queries)
BOUNDS = {
    "dashboard": ("pi", 14),
    # the costliest jobs: the roll-ups' signature of each month, then the months not cached
    "project": ("pi", 21),
    "project usage csv": ("pi", 28),
    "jobs": ("pi", 9),
    "jobs csv": ("pi", 5),
    # with the grid intensity at the job's end; the job's end from the key table first, so
    # the job is read from its one monthly partition (docs/pages.md, "Performance")
    "job detail": ("pi", 6),
    # roll-ups, clusters, a cluster's series: never the jobs
    "project energy": ("pi", 7),
    "project energy csv": ("pi", 7),
    "grid intensity": ("staff", 6),
    # Roll-ups only: months (the summary is their sum), users and partitions (each one read of
    # the whole months, two of the days of a month the period ends within), distributions.
    "project efficiency": ("pi", 15),
    "project efficiency csv": ("pi", 15),
    # ranking, their sums, their jobs, the centre's totals (whole months, and the days at the
    # period's ends)
    "efficiency top": ("staff", 9),
    "quote": ("pi", 4),
    "explorer": ("pi", 4),
    "explorer live": ("pi", 4),
    "partitions": ("pi", 4),
    "request new": ("pi", 9),  # + the rounds the project already applied in
    # with what happens next: the chair, seats, reviews so far; the project's link (the
    # viewer's role) and whether they assign reviewers
    "request status": ("pi", 17),
    # with the applicant's record: roll-ups, grants, outputs, and the re-pricing's one grouped
    # read of jobs per cluster (a read per partition for its rate version): never job by job
    "review form": ("committee", 36),
    "grant form": ("staff", 12),  # with the round's capacity left (3 reads)
    "rounds": ("committee", 5),
    # with the top-ups, extensions, appeals to decide (1 read), the reviewers assigned (1 read),
    # each pool against its capacity for the whole committee (2 reads; the chair's overview
    # reads the same sums its own way: one of the two could go)
    "round overview": ("staff", 19),
    "imports": ("staff", 7),
    "quarantine": ("staff", 8),  # + the cluster the retry form defaults to
    "enforcement": ("staff", 4),
    "slurm sync": ("staff", 8),  # clusters, open plans, recent plans, their actions, checks
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
        reverse("accounting:project-energy", args=["pawsey0003"]),
    ]
    before = [_queries(client, url) for url in urls]
    jobs_import(cluster=site.cluster, lines=recent_history(lines=1000, seed=99), source="more")
    assert [_queries(client, url) for url in urls] == before


def test_the_project_page_caches_its_charts_until_the_next_import(site):
    client = client_for(site.users["pi"])
    url = reverse("allocations:project-detail", args=["pawsey0003"])
    first = _queries(client, url)
    cached = _queries(client, url)
    # burn-down per pool, usage by partition and by user: read once, then from the cache
    assert cached < first
    page_before = client.get(url).content

    jobs_import(cluster=site.cluster, lines=recent_history(lines=300, seed=7), source="more")

    assert _queries(client, url) == first  # the stamp moved: read again
    assert client.get(url).content != page_before


def test_chart_data_is_shared_through_redis_when_configured(site, settings):
    needs_real_services("sharing chart data through Redis", broker=True)
    broker = os.environ.get("CELERY_BROKER_URL", "")
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": broker.rsplit("/", 1)[0] + "/12",
        }
    }
    from django.core.cache import cache

    cache.clear()
    client = client_for(site.users["pi"])
    url = reverse("allocations:project-detail", args=["pawsey0003"])
    first = _queries(client, url)

    assert _queries(client, url) < first
    assert any(key.startswith(b":1:charts:") for key in cache._cache.get_client().keys("*"))
    cache.clear()

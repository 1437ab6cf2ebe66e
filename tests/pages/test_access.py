"""Who sees which page: every page for anonymous, member, member of another project, PI,
committee and staff. Projects, jobs and requests a user may not see answer 404, never 403,
so their existence does not leak; anonymous visitors are sent to sign in."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.urls import reverse

from tests.pages.conftest import ROLES, Site, client_for

pytestmark = pytest.mark.django_db

LOGIN = 302
# url builder, then the expected status for each role in ROLES order:
# anonymous, member, other, pi, committee, staff
PAGES: dict[str, tuple[Callable[[Site], str], tuple[int, ...]]] = {
    "dashboard": (lambda s: reverse("home"), (200, 200, 200, 200, 200, 200)),
    "project": (
        lambda s: reverse("allocations:project-detail", args=["pawsey0003"]),
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "project usage csv": (
        lambda s: reverse("allocations:project-detail", args=["pawsey0003"]) + "?csv=usage-user",
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "jobs": (
        lambda s: reverse("accounting:project-jobs", args=["pawsey0003"]),
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "jobs csv": (
        lambda s: reverse("accounting:project-jobs", args=["pawsey0003"]) + "?format=csv",
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "job detail": (
        lambda s: reverse("accounting:job-detail", args=[s.job.pk]),
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "project energy": (
        lambda s: reverse("accounting:project-energy", args=["pawsey0003"]),
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "project energy csv": (
        lambda s: reverse("accounting:project-energy", args=["pawsey0003"]) + "?csv=energy",
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "project efficiency": (
        lambda s: reverse("accounting:project-efficiency", args=["pawsey0003"]),
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "project efficiency csv": (
        lambda s: reverse("accounting:project-efficiency", args=["pawsey0003"]) + "?csv=users",
        (LOGIN, 200, 404, 200, 404, 200),
    ),
    "quote": (lambda s: reverse("accounting:quote"), (LOGIN, 200, 200, 200, 200, 200)),
    "explorer": (lambda s: reverse("accounting:cost-ratio"), (LOGIN, 200, 200, 200, 200, 200)),
    "explorer live": (
        lambda s: (
            reverse("accounting:cost-ratio-live") + "?system=paper&cpu_node_hours=1"
            "&speedup=8&grid_intensity=500"
        ),
        (LOGIN, 200, 200, 200, 200, 200),
    ),
    "partitions": (
        lambda s: reverse("accounting:partition-list"),
        (LOGIN, 200, 200, 200, 200, 200),
    ),
    "request new": (
        lambda s: reverse("allocations:request-new", args=["pawsey0003"]),
        (LOGIN, 403, 404, 200, 404, 200),
    ),
    "request status": (
        lambda s: reverse("allocations:request-detail", args=[s.request.pk]),
        (LOGIN, 200, 404, 200, 200, 200),
    ),
    "review form": (
        lambda s: reverse("allocations:request-review", args=[s.request.pk]),
        (LOGIN, 403, 404, 403, 200, 403),
    ),
    "grant form": (
        lambda s: reverse("allocations:request-grant", args=[s.request.pk]),
        (LOGIN, 403, 404, 403, 403, 200),
    ),
    "rounds": (lambda s: reverse("allocations:round-list"), (LOGIN, 200, 200, 200, 200, 200)),
    "round overview": (
        lambda s: reverse("allocations:round-detail", args=[s.round.pk]),
        (LOGIN, 404, 404, 404, 200, 200),
    ),
    "imports": (lambda s: reverse("accounting:import-list"), (LOGIN, 404, 404, 404, 404, 200)),
    "grid intensity": (
        lambda s: reverse("accounting:grid-intensity", args=[s.cluster.name]),
        (LOGIN, 404, 404, 404, 404, 200),
    ),
    "efficiency top": (
        lambda s: reverse("accounting:efficiency-top"),
        (LOGIN, 404, 404, 404, 404, 200),
    ),
    "quarantine": (
        lambda s: reverse("accounting:quarantine-list"),
        (LOGIN, 404, 404, 404, 404, 200),
    ),
    "enforcement": (
        lambda s: reverse("allocations:enforcement-list"),
        (LOGIN, 404, 404, 404, 404, 200),
    ),
    "slurm sync": (
        lambda s: reverse("allocations:slurm-sync"),
        (LOGIN, 404, 404, 404, 404, 200),
    ),
}


@pytest.mark.parametrize("page", list(PAGES))
def test_each_page_answers_each_role_as_the_visibility_rules_say(site, page):
    build_url, statuses = PAGES[page]
    url = build_url(site)
    expected = dict(zip(ROLES, statuses, strict=True))
    answered = {}
    for role in ROLES:
        response = client_for(site.users[role]).get(url)
        answered[role] = response.status_code
        if response.status_code == LOGIN:
            assert response["Location"].startswith(reverse("login"))
    assert answered == expected


@pytest.mark.parametrize("url_name", ["allocations:project-detail", "accounting:project-jobs"])
def test_a_project_that_does_not_exist_looks_like_one_the_user_may_not_see(site, url_name):
    client = client_for(site.users["other"])
    hidden = client.get(reverse(url_name, args=["pawsey0003"]))
    missing = client.get(reverse(url_name, args=["nosuchproject"]))
    assert hidden.status_code == missing.status_code == 404


def test_the_chair_sees_the_round_overview_and_the_grant_form(site):
    client = client_for(site.users["chair"])
    overview = client.get(reverse("allocations:round-detail", args=[site.round.pk]))
    assert overview.status_code == 200
    assert "Requested against available SU" in overview.content.decode()
    grant = client.get(reverse("allocations:request-grant", args=[site.request.pk]))
    assert grant.status_code == 200


def test_a_committee_member_does_not_see_the_chairs_overview(site):
    page = client_for(site.users["committee"]).get(
        reverse("allocations:round-detail", args=[site.round.pk])
    )
    content = page.content.decode()
    assert "Your reviews" in content
    assert "Requested against available SU" not in content


def test_a_member_sees_the_request_but_not_the_committees_reviews(site):
    page = client_for(site.users["member"]).get(
        reverse("allocations:request-detail", args=[site.request.pk])
    )
    assert page.status_code == 200
    assert "Reviews" not in page.content.decode()


@pytest.mark.parametrize("role", ["member", "other", "committee"])
def test_only_staff_post_to_the_staff_pages(site, role):
    client = client_for(site.users[role])
    retry = client.post(reverse("accounting:quarantine-retry"), {"cluster": site.cluster.pk})
    assert retry.status_code == 404

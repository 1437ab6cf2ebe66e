"""Staff run projects, members, resource pools and rounds from the portal's pages
(docs/allocations.md, "Staff work in the portal"): each form's happy path and its bad input,
shown on the field with what was typed kept; anyone else is answered 404 before the input is
read; each change is in the audit log; and the API answers the same rule with the same
sentence, because both call the same service."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta
from decimal import Decimal
from html import unescape as html_unescape
from typing import Any

import pytest
from auditlog.models import LogEntry
from django.test import Client
from django.utils import timezone

from accounting.models import Partition
from allocations.models import AllocationRound, CommitteeMember, RoundPool
from allocations.rounds.services import round_create
from projects.models import Membership, PoolPartition, Project, ResourcePool
from tests.allocations.conftest import PERIOD, open_round_times
from tests.factories import api_token

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _field_errors(html: str, field: str) -> str:
    """The text of the field's error list as the page draws it (portal/_field.html)."""
    match = re.search(
        rf'id="id_{field}".*?<ul class="errorlist"[^>]*>(.*?)</ul>', html, flags=re.DOTALL
    )
    return html_unescape(re.sub(r"<[^>]+>", " ", match.group(1))) if match else ""


def _audited(model: Any, pk: Any, actor: Any) -> bool:
    return LogEntry.objects.get_for_object(model.objects.get(pk=pk)).filter(actor=actor).exists()


# --- Projects and members ---------------------------------------------------------------------


def test_staff_create_a_project_with_its_pi(centre):
    page = _client(centre.staff).post(
        "/allocations/staff/projects/new/",
        {"code": "pawsey0042", "title": "Tides", "field_of_science": "Oceans", "pi": "bob"},
    )
    assert page.status_code == 302
    project = Project.objects.get(code="pawsey0042")
    assert (project.title, project.field_of_science, project.pi) == ("Tides", "Oceans", centre.bob)
    assert Membership.objects.get(project=project, user=centre.bob).role == Membership.Role.PI
    assert _audited(Project, project.pk, centre.staff)


def test_a_duplicate_code_is_refused_on_its_field_as_the_api_refuses_it(centre):
    page = _client(centre.staff).post(
        "/allocations/staff/projects/new/",
        {"code": "pawsey0001", "title": "Typed title", "pi": "bob"},
    )
    html = page.content.decode()
    assert page.status_code == 400
    assert "a project pawsey0001 exists already" in _field_errors(html, "code")
    assert 'value="Typed title"' in html  # nothing typed is lost
    assert 'value="bob"' in html
    assert Project.objects.filter(code="pawsey0001").get().title == "Climate"
    api = Client(HTTP_AUTHORIZATION=f"Bearer {api_token(centre.staff)}")
    answer = api.post("/api/v1/projects/", {"code": "pawsey0001"}, content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["errors"]["code"] == ["a project pawsey0001 exists already"]


def test_a_code_that_is_no_slurm_account_and_an_unknown_pi_are_refused_on_their_fields(centre):
    html = (
        _client(centre.staff)
        .post("/allocations/staff/projects/new/", {"code": "bad code!", "title": "T"})
        .content.decode()
    )
    assert "Slurm account" in _field_errors(html, "code")
    html = (
        _client(centre.staff)
        .post("/allocations/staff/projects/new/", {"code": "pawsey0042", "pi": "nobody"})
        .content.decode()
    )
    assert "no one with this username can sign in" in _field_errors(html, "pi")
    assert not Project.objects.filter(code__in=["bad code!", "pawsey0042"]).exists()


def test_a_new_pi_leads_the_project_and_the_pi_before_stays_a_member(centre):
    page = _client(centre.staff).post(
        f"/allocations/staff/projects/{centre.p3.code}/",
        {"title": "Astro 2", "field_of_science": "Astronomy", "pi": "carol"},
    )
    assert page.status_code == 302
    centre.p3.refresh_from_db()
    assert (centre.p3.title, centre.p3.pi) == ("Astro 2", centre.carol)
    roles = dict(Membership.objects.filter(project=centre.p3).values_list("user__username", "role"))
    assert roles == {"alice": "member", "carol": "pi"}
    assert _audited(Project, centre.p3.pk, centre.staff)


def test_staff_add_and_remove_members_but_never_the_pi(centre):
    client = _client(centre.staff)
    added = client.post(
        f"/allocations/staff/projects/{centre.p1.code}/members/",
        {"user": "carol", "role": "manager"},
    )
    assert added.status_code == 302
    carol = Membership.objects.get(project=centre.p1, user=centre.carol)
    assert carol.role == Membership.Role.MANAGER
    assert _audited(Membership, carol.pk, centre.staff)
    removed = client.post(f"/allocations/staff/projects/{centre.p1.code}/members/carol/remove/")
    assert removed.status_code == 302
    assert not Membership.objects.filter(project=centre.p1, user=centre.carol).exists()

    last_pi = client.post(f"/allocations/staff/projects/{centre.p1.code}/members/alice/remove/")
    assert last_pi.status_code == 400
    assert "alice is the PI of pawsey0001; appoint another PI first" in last_pi.content.decode()
    assert Membership.objects.filter(project=centre.p1, user=centre.alice).exists()

    unknown = client.post(
        f"/allocations/staff/projects/{centre.p1.code}/members/",
        {"user": "nobody", "role": "member"},
    )
    assert unknown.status_code == 400
    assert "no one with this username" in _field_errors(unknown.content.decode(), "user")


# --- Resource pools ---------------------------------------------------------------------------


def _pool_form(centre: Any, **changes: Any) -> dict[str, Any]:
    form = {
        "cluster": centre.cluster.pk, "name": "testbed debug", "description": "",
        "budget_months": 3, "split": "even", "notify_thresholds": "75,90,100",
        "limit_command": "sacctmgr -i modify account name={account} set qos=lowpriority",
        "restore_command": "", "slurm_parent_account": "", "slurm_qos": "",
        "slurm_default_qos": "", "slurm_account_suffix": "-dbg",
    }  # fmt: skip
    form.update(changes)
    return form


def test_staff_create_a_pool_and_change_its_policy_and_partitions(centre):
    debug = Partition.objects.create(cluster=centre.cluster, name="debug")
    client = _client(centre.staff)
    page = client.post("/allocations/staff/pools/new/", _pool_form(centre, partitions=[debug.pk]))
    assert page.status_code == 302
    pool = ResourcePool.objects.get(name="testbed debug")
    assert list(pool.partitions.all()) == [debug]
    assert (pool.budget_months, pool.slurm_account_suffix) == (3, "-dbg")
    assert _audited(ResourcePool, pool.pk, centre.staff)

    form = _pool_form(centre, budget_months=12, notify_thresholds="50,100", partitions=[])
    del form["cluster"]  # a pool's cluster stays
    page = client.post(f"/allocations/staff/pools/{pool.pk}/", form)
    assert page.status_code == 302
    pool.refresh_from_db()
    assert (pool.budget_months, pool.thresholds) == (12, [50, 100])
    assert not PoolPartition.objects.filter(pool=pool).exists()
    assert LogEntry.objects.get_for_model(PoolPartition).filter(actor=centre.staff).count() == 2


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"notify_thresholds": "75,lots"}, "notify_thresholds", "whole percentages"),
        ({"budget_months": 0}, "budget_months", "from 1 to 120 months"),
        ({"name": "testbed CPU"}, "name", "a pool named 'testbed CPU' exists already"),
        ({"limit_command": "scancel {acount}"}, "limit_command", "only {account} and {cluster}"),
        ({"slurm_account_suffix": "-GPU!"}, "slurm_account_suffix", "lower-case"),
        ({"partitions": "WORK"}, "partitions", "belongs to the pool testbed CPU already"),
    ],
)
def test_bad_pool_input_is_refused_on_its_field_and_keeps_what_was_typed(
    centre, changes, field, message
):
    if changes.get("partitions") == "WORK":
        changes = {"partitions": [Partition.objects.get(cluster=centre.cluster, name="work").pk]}
    page = _client(centre.staff).post(
        "/allocations/staff/pools/new/", _pool_form(centre, description="typed", **changes)
    )
    html = page.content.decode()
    assert page.status_code == 400
    assert message in _field_errors(html, field), html
    assert "typed</textarea>" in html
    assert not ResourcePool.objects.exclude(name__in=["testbed CPU", "testbed GPU"]).exists()


# --- Rounds -----------------------------------------------------------------------------------


def _round_form(centre: Any, **changes: Any) -> dict[str, Any]:
    opens, closes = open_round_times()
    form = {
        "name": "2027 call", "opens_at": opens.strftime("%Y-%m-%dT%H:%M"),
        "closes_at": closes.strftime("%Y-%m-%dT%H:%M"), "period_start": "2027-01-01",
        "period_end": "2028-01-01", f"pool_{centre.cpu.pk}": "1000000", "chair": "chair",
    }  # fmt: skip
    form.update(changes)
    return form


def test_staff_open_a_round_with_its_capacity_and_chair(centre):
    page = _client(centre.staff).post("/allocations/staff/rounds/new/", _round_form(centre))
    assert page.status_code == 302
    round_ = AllocationRound.objects.get(name="2027 call")
    assert {item.pool: item.available_su for item in round_.pools.all()} == {
        centre.cpu: Decimal(1000000)
    }
    assert round_.committee.get(is_chair=True).user == centre.chair
    assert _audited(AllocationRound, round_.pk, centre.staff)


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"closes_at": "2020-01-01T00:00"}, "closes_at", "a round must open before it closes"),
        ({"period_end": "2026-01-01"}, "period_end", "its end comes after its start"),
        ({"pool_CPU": "-5"}, "pool_CPU", "cannot be negative"),
        ({"pool_CPU": "ten"}, "pool_CPU", "Enter a number."),
        ({"chair": "nobody"}, "chair", "no one with this username can sign in"),
    ],
)
def test_bad_round_input_is_refused_on_its_field_and_keeps_what_was_typed(
    centre, changes, field, message
):
    field = field.replace("CPU", str(centre.cpu.pk))
    changes = {key.replace("CPU", str(centre.cpu.pk)): value for key, value in changes.items()}
    page = _client(centre.staff).post(
        "/allocations/staff/rounds/new/", _round_form(centre, **changes)
    )
    html = page.content.decode()
    assert page.status_code == 400
    assert message in _field_errors(html, field), html
    assert 'value="2027 call"' in html
    assert not AllocationRound.objects.exists()


def test_a_duplicate_round_name_gets_the_same_sentence_from_the_page_and_the_api(centre):
    client = _client(centre.staff)
    assert client.post("/allocations/staff/rounds/new/", _round_form(centre)).status_code == 302
    page = client.post("/allocations/staff/rounds/new/", _round_form(centre))
    sentence = "a round named '2027 call' exists already"
    assert sentence in _field_errors(page.content.decode(), "name")
    opens, closes = open_round_times()
    api = Client(HTTP_AUTHORIZATION=f"Bearer {api_token(centre.staff)}")
    answer = api.post(
        "/api/v1/rounds/",
        {"name": "2027 call", "opens_at": opens.isoformat(), "closes_at": closes.isoformat(),
         "period_start": "2027-01-01", "period_end": "2028-01-01", "chair": "chair",
         "available": [{"pool": centre.cpu.name, "su": "10"}]},
        content_type="application/json",
    )  # fmt: skip
    assert answer.status_code == 400
    assert answer.json()["errors"]["name"] == [sentence]


def _round(centre: Any) -> AllocationRound:
    opens, closes = open_round_times()
    return round_create(
        name="2026 call", opens_at=opens, closes_at=closes, period_start=PERIOD[0],
        period_end=PERIOD[1], available={centre.cpu: Decimal(500)}, chair=centre.chair,
        committee=[centre.reviewer], actor=centre.staff,
    )  # fmt: skip


def test_staff_change_a_rounds_window_and_capacity_and_close_it(centre):
    round_ = _round(centre)
    client = _client(centre.staff)
    form = _round_form(centre, name="2026 call, extended")
    form.update({f"pool_{centre.gpu.pk}": "250", f"pool_{centre.cpu.pk}": "800"})
    del form["chair"]
    page = client.post(f"/allocations/staff/rounds/{round_.pk}/", form)
    assert page.status_code == 302
    round_.refresh_from_db()
    assert round_.name == "2026 call, extended"
    offered = dict(RoundPool.objects.filter(round=round_).values_list("pool__name", "available_su"))
    assert offered == {"testbed CPU": Decimal(800), "testbed GPU": Decimal(250)}
    assert LogEntry.objects.get_for_model(RoundPool).filter(actor=centre.staff).count() >= 2

    negative = dict(form, **{f"pool_{centre.cpu.pk}": "-1"})
    page = client.post(f"/allocations/staff/rounds/{round_.pk}/", negative)
    assert "cannot be negative" in _field_errors(page.content.decode(), f"pool_{centre.cpu.pk}")
    assert RoundPool.objects.get(round=round_, pool=centre.cpu).available_su == 800

    assert client.post(f"/allocations/staff/rounds/{round_.pk}/close/").status_code == 302
    round_.refresh_from_db()
    assert round_.closes_at <= timezone.now()
    again = client.post(f"/allocations/staff/rounds/{round_.pk}/close/", follow=True)
    assert "is not open" in again.content.decode()


def test_staff_seat_a_new_chair_and_the_chair_before_stays_on_the_committee(centre):
    round_ = _round(centre)
    client = _client(centre.staff)
    page = client.post(
        f"/allocations/staff/rounds/{round_.pk}/committee/", {"user": "bob", "chair": "on"}
    )
    assert page.status_code == 302
    seats = dict(round_.committee.values_list("user__username", "is_chair"))
    assert seats == {"bob": True, "chair": False, "reviewer": False}
    seat = CommitteeMember.objects.get(round=round_, user=centre.chair)
    assert _audited(CommitteeMember, seat.pk, centre.staff)

    refused = client.post(
        f"/allocations/staff/rounds/{round_.pk}/committee/bob/remove/", follow=True
    )
    assert "bob chairs 2026 call; name another chair first" in refused.content.decode()
    assert round_.committee.filter(user=centre.bob, is_chair=True).exists()
    client.post(f"/allocations/staff/rounds/{round_.pk}/committee/reviewer/remove/")
    assert not round_.committee.filter(user=centre.reviewer).exists()


# --- Who may ---------------------------------------------------------------------------------


def test_no_one_but_staff_reaches_a_staff_form_and_bad_input_tells_them_nothing(centre):
    round_ = _round(centre)
    writes = {
        "/allocations/staff/projects/new/": {"code": "pawsey0001"},
        f"/allocations/staff/projects/{centre.p1.code}/": {"pi": "nobody"},
        f"/allocations/staff/projects/{centre.p1.code}/members/": {"user": "nobody"},
        f"/allocations/staff/projects/{centre.p1.code}/members/alice/remove/": {},
        "/allocations/staff/pools/new/": {"budget_months": "lots"},
        f"/allocations/staff/pools/{centre.cpu.pk}/": {"name": ""},
        "/allocations/staff/rounds/new/": {"closes_at": "2000-01-01"},
        f"/allocations/staff/rounds/{round_.pk}/": {"period_end": "1999-01-01"},
        f"/allocations/staff/rounds/{round_.pk}/close/": {},
        f"/allocations/staff/rounds/{round_.pk}/committee/": {"user": "nobody"},
        f"/allocations/staff/rounds/{round_.pk}/committee/reviewer/remove/": {},
    }
    before = [list(m.objects.order_by("pk").values()) for m in (Project, Membership,
              ResourcePool, AllocationRound, RoundPool, CommitteeMember)]  # fmt: skip
    pi, chair = _client(centre.alice), _client(centre.chair)
    for url, body in writes.items():
        for client in (pi, chair):
            answer = client.post(url, body)
            assert answer.status_code == 404, url
            assert b"exists already" not in answer.content
            assert b"errorlist" not in answer.content
        assert Client().post(url, body).status_code == 302  # to sign in
    after = [list(m.objects.order_by("pk").values()) for m in (Project, Membership,
             ResourcePool, AllocationRound, RoundPool, CommitteeMember)]  # fmt: skip
    assert after == before
    assert _client(centre.alice).get("/allocations/staff/rounds/").status_code == 404


def test_the_staff_menu_and_dashboard_link_the_staff_pages(centre):
    html = _client(centre.staff).get("/").content.decode()
    for url in ("/allocations/staff/projects/", "/allocations/staff/pools/",
                "/allocations/staff/rounds/"):  # fmt: skip
        assert f'href="{url}"' in html
    assert "/allocations/staff/" not in _client(centre.alice).get("/").content.decode()


def test_once_a_round_granted_su_it_never_offers_less_nor_moves_its_period(centre):
    from allocations.grants.services import AllocationError
    from allocations.rounds.services import (
        request_create,
        request_decide,
        request_review_start,
        request_submit,
        round_pool_set,
        round_update,
    )

    round_ = _round(centre)
    application = request_create(
        round_=round_, project=centre.p1, actor=centre.alice, amounts={centre.cpu: Decimal(300)}
    )
    request_submit(request=application, actor=centre.alice)
    request_review_start(request=application, actor=centre.chair)
    request_decide(request=application, actor=centre.chair, granted={centre.cpu: Decimal(300)})

    with pytest.raises(AllocationError, match=r"granted 300 SU on testbed CPU") as less:
        round_pool_set(round_=round_, pool=centre.cpu, available=Decimal(299), actor=centre.staff)
    assert less.value.field == f"pool_{centre.cpu.pk}"
    with pytest.raises(AllocationError, match="the period cannot change") as moved:
        round_update(
            round_=round_, actor=centre.staff, name=round_.name, opens_at=round_.opens_at,
            closes_at=round_.closes_at, period_start=PERIOD[0].replace(day=2),
            period_end=PERIOD[1],
        )  # fmt: skip
    assert moved.value.field == "period_start"
    round_.refresh_from_db()
    assert round_.period_start == PERIOD[0]
    assert RoundPool.objects.get(round=round_, pool=centre.cpu).available_su == 500
    offer = round_pool_set(round_=round_, pool=centre.cpu, available="300", actor=centre.staff)
    assert offer.available_su == 300


# --- The API calls the same services -----------------------------------------------------------


_TOKENS = itertools.count()


def _api(user: Any) -> Client:
    """A client with a new token of ``user`` (each token has a name of its own)."""
    return Client(HTTP_AUTHORIZATION=f"Bearer {api_token(user, name=f'staff {next(_TOKENS)}')}")


def test_staff_change_a_project_through_the_api_as_on_the_page(centre):
    url = f"/api/v1/projects/{centre.p3.code}/"
    refused = _api(centre.alice).patch(url, {"pi": "nobody"}, content_type="application/json")
    assert refused.status_code == 403  # who is asking, before what was asked
    answer = _api(centre.staff).patch(
        url, {"pi": "carol", "title": "Astro 2"}, content_type="application/json"
    )
    assert answer.status_code == 200
    assert (answer.json()["pi"], answer.json()["title"]) == ("carol", "Astro 2")
    roles = dict(Membership.objects.filter(project=centre.p3).values_list("user__username", "role"))
    assert roles == {"alice": "member", "carol": "pi"}


def test_staff_change_close_and_seat_a_round_through_the_api_with_the_pages_sentences(centre):
    round_ = _round(centre)
    url = f"/api/v1/rounds/{round_.pk}/"
    staff, pi = _api(centre.staff), _api(centre.alice)
    early = (round_.opens_at - timedelta(days=1)).isoformat()
    assert pi.patch(url, {"closes_at": early}, content_type="application/json").status_code == 403
    wrong = staff.patch(url, {"closes_at": early}, content_type="application/json")
    assert wrong.status_code == 400
    assert wrong.json()["errors"]["closes_at"] == ["a round must open before it closes"]

    more = {"available": [{"pool": "testbed GPU", "su": "70"}], "name": "2026 call (2)"}
    answer = staff.patch(url, more, content_type="application/json")
    assert answer.status_code == 200
    assert answer.json()["name"] == "2026 call (2)"
    assert {item["pool"] for item in answer.json()["pools"]} == {"testbed CPU", "testbed GPU"}

    seated = staff.post(
        f"{url}committee/", {"username": "bob", "chair": True}, content_type="application/json"
    )
    assert seated.status_code == 200
    assert round_.committee.get(is_chair=True).user == centre.bob
    chair_off = staff.delete(f"{url}committee/bob/")
    assert chair_off.status_code == 400
    assert chair_off.json()["message"] == "bob chairs 2026 call (2); name another chair first"
    assert staff.delete(f"{url}committee/reviewer/").status_code == 204

    assert staff.post(f"{url}close/").status_code == 200
    again = staff.post(f"{url}close/")
    assert again.status_code == 400
    assert "is not open" in again.json()["message"]


def test_staff_create_and_change_a_pool_through_the_api_with_the_pages_sentences(centre):
    Partition.objects.create(cluster=centre.cluster, name="debug")
    body = {"cluster": centre.cluster.name, "name": "testbed debug", "partitions": ["debug"],
            "budget_months": 6, "slurm_account_suffix": "-dbg"}  # fmt: skip
    refused = _api(centre.alice).post("/api/v1/pools/", body, content_type="application/json")
    assert refused.status_code == 403
    staff = _api(centre.staff)
    taken = staff.post(
        "/api/v1/pools/", dict(body, name="testbed CPU"), content_type="application/json"
    )
    assert taken.status_code == 400
    assert taken.json()["errors"]["name"] == ["a pool named 'testbed CPU' exists already"]
    made = staff.post("/api/v1/pools/", body, content_type="application/json")
    assert made.status_code == 201
    assert (made.json()["partitions"], made.json()["budget_months"]) == (["debug"], 6)

    url = f"/api/v1/pools/{made.json()['id']}/"
    wrong = staff.patch(url, {"notify_thresholds": "90,x"}, content_type="application/json")
    assert wrong.status_code == 400
    assert "whole percentages" in wrong.json()["errors"]["notify_thresholds"][0]
    other = staff.patch(url, {"partitions": ["work"]}, content_type="application/json")
    assert other.json()["errors"]["partitions"] == [
        "slurm-testbed/work belongs to the pool testbed CPU already: a partition charges one pool"
    ]
    changed = staff.patch(url, {"notify_thresholds": "80,100"}, content_type="application/json")
    assert changed.status_code == 200
    assert (changed.json()["notify_thresholds"], changed.json()["partitions"]) == (
        "80,100",
        ["debug"],
    )
    assert _api(centre.alice).get(url).status_code == 200  # pools are no secret


def test_an_archived_project_is_read_only_on_the_staff_page_too(centre):
    Project.objects.filter(pk=centre.p1.pk).update(status=Project.Status.ARCHIVED)
    client = _client(centre.staff)
    edit = client.post(f"/allocations/staff/projects/{centre.p1.code}/", {"title": "New"})
    add = client.post(
        f"/allocations/staff/projects/{centre.p1.code}/members/",
        {"user": "carol", "role": "member"},
    )
    for page in (edit, add):
        assert page.status_code == 400
        assert "pawsey0001 is archived: it is read-only" in page.content.decode()
    centre.p1.refresh_from_db()
    assert centre.p1.title == "Climate"
    assert not Membership.objects.filter(project=centre.p1, user=centre.carol).exists()

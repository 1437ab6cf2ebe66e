"""The permission matrix: every URL of the portal, pages and API, as every role.

The URL patterns come from the URL configuration itself, so a new page or endpoint without
an entry in ``MATRIX`` fails ``test_every_url_pattern_has_an_entry`` until someone writes down
who may read and write it (docs/access.md). Each entry names the roles that may read (GET) and
write (POST, PATCH, DELETE) the URL for an object of project pawsey0003. The roles are
anonymous; ``member`` (alice) and ``pi`` (carol) of pawsey0003; ``other`` (bob, PI of other
projects: the view from another project); ``committee`` (erin, reviewer of the round, in no
project); ``conflicted`` (frank, reviewer of the round and a member of pawsey0003: a conflict
of interest, so he reads the request as its member and never its reviews); ``chair`` (dana,
the round's chair); and ``staff``.

- Allowed: any status below 400, or 400 for a write whose body is empty or invalid (the
  caller may call the operation; the input is wrong).
- Denied: a page sends anonymous visitors to sign in and answers 403 or 404 to others; the API
  answers 401 or 403 to anonymous callers and 403 or 404 to others. A denied write never
  answers 400: who is asking is checked before what was asked.

Writes run in the test's transaction, which is rolled back: nothing they do is kept, and tasks
they enqueue after the commit never run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from accounting.models import ImportRun, Partition, QuarantinedRecord
from allocations.grants.services import adjustment_top_up
from allocations.models import (
    Adjustment,
    Allocation,
    CommitteeMember,
    EnforcementAction,
    PriorityAction,
    Review,
    ReviewAssignment,
    SlurmSyncPlan,
)
from allocations.priorities.services import priority_policy_set
from allocations.rounds.services import review_submit
from projects.services import membership_add
from tests.pages.conftest import Site

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "member", "other", "pi", "committee", "conflicted", "chair", "staff")
SIGNED_IN = frozenset(ROLES) - {"anonymous"}
EVERYONE = frozenset(ROLES)
STAFF = frozenset({"staff"})
PROJECT = frozenset({"member", "pi", "conflicted", "staff"})  # pawsey0003's people, and staff
PI = frozenset({"pi", "staff"})
REQUEST_READERS = PROJECT | {"committee", "chair"}  # a submitted request: also its committee
CHAIR = frozenset({"chair", "staff"})
COMMITTEE = frozenset({"committee", "chair", "staff"})  # never one in conflict (reviews)
SEATS = COMMITTEE | {"conflicted"}  # the round's committee, conflicted or not, and staff
REVIEWERS = frozenset({"committee", "chair"})  # review pawsey0003's request: not frank
ANY_PI = frozenset({"pi", "other", "member", "staff"})  # alice (member here) leads pawsey0001

# Not in the matrix, on purpose: Django's admin (its own staff checks), the sign-in, password
# and single sign-on pages (for everyone by nature), the schema and its viewers (public
# documentation), and the API's catch-all 404.
EXCLUDED_PREFIXES = ("admin:",)
EXCLUDED = {
    "login", "logout", "password_change", "password_change_done", "password_reset",
    "password_reset_done", "password_reset_confirm", "password_reset_complete",
    "api-schema", "api-docs", "api-redoc", "api:not-found",
    "oidc_authentication_init", "oidc_authentication_callback", "oidc_logout",
}  # fmt: skip


@dataclass(frozen=True)
class Entry:
    url: Callable[[Site], str]
    read: frozenset[str] | None = None  # None: the URL answers no GET
    write: frozenset[str] | None = None  # None: the URL takes no write
    method: str = "post"
    body: Callable[[Site], dict[str, Any]] = field(default=lambda s: {})


def _first(model: Any, **filters: Any) -> int:
    pk = model.objects.filter(**filters).order_by("pk").values_list("pk", flat=True).first()
    assert pk is not None, f"the scenario has no {model.__name__}"
    return int(pk)


def _slurm_plan(s: Site) -> int:
    """A pending Slurm plan of the scenario's cluster (approving it enqueues a task, which the
    rolled-back transaction never sends)."""
    plan, _ = SlurmSyncPlan.objects.get_or_create(cluster=s.cluster)
    return plan.pk


def _what_if_url(s: Site, tail: str, *, api: bool = False) -> str:
    """A what-if draft the chair made of the round, and the page of ``tail`` under it
    (``proposal``: its first proposal's)."""
    from allocations.rounds.what_if_services import what_if_draft_create

    chair = s.users["chair"]
    assert chair is not None
    draft = what_if_draft_create(round_=s.round, actor=chair, method="pro_rata")
    first = draft.proposals.order_by("pk").first()
    assert first is not None
    base = f"/{'api/v1' if api else 'allocations'}/rounds/{s.round.pk}/what-if/{draft.pk}/"
    return base + tail.replace("proposal", f"proposals/{first.pk}/")


def _rate_draft(s: Site) -> int:
    """A kept draft of the scenario cluster's rates: its spec as the versions in force say."""
    from accounting.clusters.selectors import partition_versions_current
    from accounting.ledger.rate_drafts import rate_draft_create

    partitions = [
        {
            "name": version.partition.name, "nodelist": version.nodelist,
            "sockets": version.sockets, "cores_per_socket": version.cores_per_socket,
            "memory_mb": version.memory_mb, "gpus": version.gpus,
            "cpu_tdp_watts": str(version.cpu_tdp_watts),
            **({"gpu_tdp_watts": str(version.gpu_tdp_watts)} if version.gpus else {}),
        }
        for version in partition_versions_current(cluster=s.cluster)
    ]  # fmt: skip
    spec = {"name": s.cluster.name, "timezone": s.cluster.timezone, "partitions": partitions}
    return rate_draft_create(cluster=s.cluster, spec=spec).pk


def _code(s: Site) -> str:
    return s.project.code


def _invitation_of(s: Site) -> int:
    from projects.invitations import invitation_send

    pi = s.users["pi"]
    assert pi is not None
    return invitation_send(
        project=s.project, email="x@y.org", role="member", actor=pi
    ).invitation.pk


def _invitation_link(s: Site) -> str:
    from projects.invitations import invitation_link
    from projects.models import Invitation

    return invitation_link(Invitation.objects.get(pk=_invitation_of(s))).split("8000", 1)[1]


def _members_token(s: Site) -> int:
    """A token of the member's: only its owner may revoke it (staff use the admin)."""
    from people.tokens import token_create

    member = s.users["member"]
    assert member is not None
    return token_create(user=member, name="m", scope="read", expires_in_days=7).token.pk


def _output_of(s: Site) -> int:
    """A research output of pawsey0003, added by its PI (rolled back with the test)."""
    from allocations.outputs.services import OutputDetails, output_add

    pi = s.users["pi"]
    assert pi is not None
    details = OutputDetails(kind="publication", title="Matrix paper", doi="10.1234/matrix")
    return output_add(project=s.project, actor=pi, details=details).pk


def _bib_file(s: Site) -> dict[str, Any]:
    from django.core.files.uploadedfile import SimpleUploadedFile

    content = b"@article{m, title={Matrix}, year={2024}}"
    return {"file": SimpleUploadedFile("m.bib", content, content_type="text/x-bibtex")}


def _project_request(s: Site) -> int:
    """alice (member of pawsey0003) asks for a project naming carol (its PI) as PI: it waits
    for carol. Readers: alice, carol and staff; anyone else gets 404."""
    from allocations.project_requests.services import project_request_create

    alice = s.users["member"]
    assert alice is not None
    return project_request_create(
        requester=alice, title="Matrix", abstract="a", field_of_science="f", pi="carol",
        amounts={s.cpu.name: "10"},
    ).pk  # fmt: skip


def _decided(s: Site) -> int:
    """pawsey0003's request, decided by the round's chair (in the test's rolled-back
    transaction): only a decided request has a letter."""
    from allocations.rounds.services import request_decide

    request = s.request
    request.refresh_from_db()
    if request.state == "under_review":
        chair = s.users["chair"]
        assert chair is not None
        granted = {amount.pool: amount.requested_su for amount in request.amounts.all()}
        request_decide(request=request, actor=chair, granted=granted)
    return request.pk


# The decision letter: the project's PI (and managers), the chair who decided it, and staff.
LETTER_READERS = frozenset({"pi", "chair", "staff"})


def _user_pk(s: Site, role: str) -> int:
    user = s.users[role]
    assert user is not None
    return user.pk


def _assigned_erin(s: Site) -> str:
    """erin assigned (by dana) to review pawsey0003's request: the URL that takes her off."""
    erin, dana = s.users["committee"], s.users["chair"]
    assert erin is not None
    assert dana is not None
    ReviewAssignment.objects.get_or_create(
        request=s.request, reviewer=erin, defaults={"assigned_by": dana}
    )
    return f"/api/v1/requests/{s.request.pk}/assignments/erin/"


# A project request (``_project_request``): who asked, who is named PI, and staff read it.
PROJECT_REQUEST_READERS = frozenset({"member", "pi", "staff"})

MATRIX: dict[str, Entry] = {
    # --- Site ---------------------------------------------------------------------------
    "home": Entry(lambda s: "/", read=EVERYONE),
    "healthz": Entry(lambda s: "/healthz/", read=EVERYONE),
    "readyz": Entry(lambda s: "/readyz/", read=EVERYONE),
    "audit": Entry(lambda s: "/audit/", read=ANY_PI),  # staff, and whoever leads a project
    # --- Accounting pages ---------------------------------------------------------------
    "accounting:partition-list": Entry(lambda s: "/accounting/partitions/", read=SIGNED_IN),
    "accounting:import-list": Entry(lambda s: "/accounting/imports/", read=STAFF, write=STAFF),
    "accounting:import-detail": Entry(
        lambda s: f"/accounting/imports/{_first(ImportRun)}/", read=STAFF
    ),
    "accounting:quarantine-list": Entry(lambda s: "/accounting/quarantine/", read=STAFF),
    "accounting:quarantine-retry": Entry(
        lambda s: "/accounting/quarantine/retry/",
        write=STAFF,
        body=lambda s: {"cluster": s.cluster.pk},
    ),
    "accounting:utilisation": Entry(lambda s: "/accounting/utilisation/", read=STAFF),
    "accounting:overhead": Entry(lambda s: "/accounting/overhead/", read=STAFF, write=STAFF),
    "accounting:project-jobs": Entry(
        lambda s: f"/accounting/projects/{_code(s)}/jobs/", read=PROJECT
    ),
    "accounting:job-detail": Entry(lambda s: f"/accounting/jobs/{s.job.pk}/", read=PROJECT),
    "accounting:project-energy": Entry(
        lambda s: f"/accounting/projects/{_code(s)}/energy/", read=PROJECT
    ),
    "accounting:project-efficiency": Entry(
        lambda s: f"/accounting/projects/{_code(s)}/efficiency/", read=PROJECT
    ),
    "accounting:efficiency-top": Entry(lambda s: "/accounting/efficiency/", read=STAFF),
    "accounting:quote": Entry(lambda s: "/accounting/quote/", read=SIGNED_IN),
    "accounting:cost-ratio": Entry(lambda s: "/accounting/cost-ratio/", read=SIGNED_IN),
    "accounting:cost-ratio-live": Entry(lambda s: "/accounting/cost-ratio/live/", read=SIGNED_IN),
    "accounting:cost-models": Entry(
        lambda s: f"/accounting/clusters/{s.cluster.name}/cost-models/", read=STAFF, write=STAFF
    ),
    "accounting:cost-distribution": Entry(lambda s: "/accounting/costs/", read=STAFF),
    "accounting:grid-intensity": Entry(
        lambda s: f"/accounting/clusters/{s.cluster.name}/grid-intensity/",
        read=STAFF,
        write=STAFF,
    ),
    # --- Allocation pages ---------------------------------------------------------------
    "allocations:rate-drafts": Entry(
        lambda s: f"/allocations/clusters/{s.cluster.name}/rate-drafts/", read=STAFF, write=STAFF
    ),
    "allocations:rate-draft": Entry(
        lambda s: f"/allocations/rate-drafts/{_rate_draft(s)}/", read=STAFF, write=STAFF
    ),
    "allocations:enforcement-list": Entry(lambda s: "/allocations/enforcement/", read=STAFF),
    "allocations:enforcement-decide": Entry(
        lambda s: f"/allocations/enforcement/{_first(EnforcementAction)}/", write=STAFF
    ),
    "allocations:slurm-sync": Entry(lambda s: "/allocations/slurm/", read=STAFF),
    "allocations:slurm-sync-approve": Entry(
        lambda s: f"/allocations/slurm/plans/{_slurm_plan(s)}/approve/", write=STAFF
    ),
    "allocations:slurm-sync-refresh": Entry(
        lambda s: f"/allocations/slurm/{s.cluster.name}/refresh/",
        write=STAFF,
        body=lambda s: {"what": "check"},
    ),
    "allocations:priorities": Entry(lambda s: "/allocations/priorities/", read=STAFF),
    "allocations:priority-policy": Entry(
        lambda s: f"/allocations/priorities/{s.cluster.name}/policy/", write=STAFF
    ),
    "allocations:priority-coefficient": Entry(
        lambda s: f"/allocations/priorities/{s.cluster.name}/coefficients/", write=STAFF
    ),
    "allocations:priority-upload": Entry(
        lambda s: f"/allocations/priorities/{s.cluster.name}/coefficients/csv/", write=STAFF
    ),
    "allocations:priority-propose": Entry(
        lambda s: f"/allocations/priorities/{s.cluster.name}/propose/", write=STAFF
    ),
    "allocations:priority-action-decide": Entry(
        lambda s: f"/allocations/priorities/actions/{_first(PriorityAction)}/", write=STAFF
    ),
    "allocations:project-detail": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/", read=PROJECT
    ),
    # Staff un-archive a project (on one that is not archived it changes nothing).
    "allocations:project-unarchive": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/unarchive/", write=STAFF
    ),
    "allocations:request-new": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/requests/new/", read=PI, write=PI
    ),
    "allocations:request-detail": Entry(
        lambda s: f"/allocations/requests/{s.request.pk}/", read=REQUEST_READERS
    ),
    "allocations:request-edit": Entry(
        lambda s: f"/allocations/requests/{s.request.pk}/edit/", write=PI
    ),
    "allocations:request-estimate": Entry(
        lambda s: f"/allocations/requests/{s.request.pk}/estimate/", write=PI
    ),
    "allocations:request-submit": Entry(
        lambda s: f"/allocations/requests/{s.request.pk}/submit/", write=PI
    ),
    "allocations:request-progress-report": Entry(
        lambda s: f"/allocations/requests/{s.request.pk}/progress-report/", write=PI
    ),
    "allocations:request-letter": Entry(
        lambda s: f"/allocations/requests/{_decided(s)}/letter.pdf", read=LETTER_READERS
    ),
    "allocations:request-start-review": Entry(
        lambda s: f"/allocations/requests/{s.request.pk}/start-review/", write=CHAIR
    ),
    "allocations:request-review": Entry(  # the chair sits on the committee; staff do not
        lambda s: f"/allocations/requests/{s.request.pk}/review/", read=REVIEWERS, write=REVIEWERS
    ),
    # The chair (never in conflict) and staff assign committee members to review a request.
    "allocations:request-assignments": Entry(
        lambda s: f"/allocations/requests/{s.request.pk}/assignments/",
        write=CHAIR,
        body=lambda s: {"reviewer": _user_pk(s, "committee")},
    ),
    "allocations:request-grant": Entry(
        lambda s: f"/allocations/requests/{s.request.pk}/grant/", read=CHAIR, write=CHAIR
    ),
    "allocations:invitation-send": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/invitations/",
        write=PI,
        body=lambda s: {"email": "new@x.org", "role": "member"},
    ),
    "allocations:invitation-revoke": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/invitations/{_invitation_of(s)}/revoke/",
        write=PI,
    ),
    "allocations:member-role": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/members/alice/role/",
        write=PI,
        body=lambda s: {"role": "manager"},
    ),
    "allocations:member-remove": Entry(  # the PI removes alice; alice may leave
        lambda s: f"/allocations/projects/{_code(s)}/members/alice/remove/",
        write=frozenset({"member", "pi", "staff"}),
    ),
    # Research outputs: the project's people read and export them; the PI (managers) and staff
    # add, change, delete and upload.
    "allocations:output-new": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/outputs/new/",
        read=PI,
        write=PI,
        body=lambda s: {"kind": "other", "title": "A talk"},
    ),
    "allocations:output-edit": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/outputs/{_output_of(s)}/edit/",
        read=PI,
        write=PI,
        body=lambda s: {"kind": "other", "title": "A talk"},
    ),
    "allocations:output-delete": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/outputs/{_output_of(s)}/delete/", write=PI
    ),
    "allocations:output-upload": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/outputs/upload/",
        read=PI,
        write=PI,
        body=_bib_file,
    ),
    "allocations:output-export-csv": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/outputs/export.csv", read=PROJECT
    ),
    "allocations:output-export-bibtex": Entry(
        lambda s: f"/allocations/projects/{_code(s)}/outputs/export.bib", read=PROJECT
    ),
    "allocations:invitation": Entry(  # the link is the proof: anyone signed in may accept
        _invitation_link, read=SIGNED_IN, write=SIGNED_IN
    ),
    "allocations:project-request-list": Entry(
        lambda s: "/allocations/project-requests/", read=SIGNED_IN
    ),
    "allocations:project-request-new": Entry(
        lambda s: "/allocations/project-requests/new/", read=SIGNED_IN, write=SIGNED_IN
    ),
    "allocations:project-request-queue": Entry(
        lambda s: "/allocations/project-requests/queue/", read=STAFF
    ),
    "allocations:project-request-detail": Entry(
        lambda s: f"/allocations/project-requests/{_project_request(s)}/",
        read=PROJECT_REQUEST_READERS,
    ),
    "allocations:project-request-confirm": Entry(  # the person named PI
        lambda s: f"/allocations/project-requests/{_project_request(s)}/confirm/",
        write=frozenset({"pi"}),
    ),
    "allocations:project-request-edit": Entry(  # the person who asked
        lambda s: f"/allocations/project-requests/{_project_request(s)}/edit/",
        read=frozenset({"member"}),
        write=frozenset({"member"}),
    ),
    "allocations:project-request-decide": Entry(
        lambda s: f"/allocations/project-requests/{_project_request(s)}/decide/", write=STAFF
    ),
    "allocations:round-list": Entry(lambda s: "/allocations/rounds/", read=SIGNED_IN),
    "allocations:round-detail": Entry(lambda s: f"/allocations/rounds/{s.round.pk}/", read=SEATS),
    # The chair's what-if: the rest of the committee sees the round (403), drafts are the
    # chair's (404 to the rest).
    "allocations:round-what-if": Entry(
        lambda s: f"/allocations/rounds/{s.round.pk}/what-if/",
        read=CHAIR,
        write=CHAIR,
        body=lambda s: {"method": "pro_rata", "floor_su": "1"},
    ),
    "allocations:round-what-if-draft": Entry(lambda s: _what_if_url(s, ""), read=CHAIR),
    "allocations:round-what-if-proposal": Entry(
        lambda s: _what_if_url(s, "proposal"),
        write=CHAIR,
        body=lambda s: {"proposed_su": "1", "reason": "a smaller start"},
    ),
    "allocations:round-what-if-apply": Entry(lambda s: _what_if_url(s, "apply/"), write=CHAIR),
    # Staff's projects, pools and rounds: 404 to everyone else, before the input is read.
    "allocations:staff-projects": Entry(lambda s: "/allocations/staff/projects/", read=STAFF),
    "allocations:staff-project-new": Entry(
        lambda s: "/allocations/staff/projects/new/", read=STAFF, write=STAFF
    ),
    "allocations:staff-project-edit": Entry(
        lambda s: f"/allocations/staff/projects/{_code(s)}/", read=STAFF, write=STAFF
    ),
    "allocations:staff-member-add": Entry(
        lambda s: f"/allocations/staff/projects/{_code(s)}/members/",
        write=STAFF,
        body=lambda s: {"user": "erin", "role": "member"},
    ),
    "allocations:staff-member-remove": Entry(
        lambda s: f"/allocations/staff/projects/{_code(s)}/members/alice/remove/", write=STAFF
    ),
    "allocations:staff-pools": Entry(lambda s: "/allocations/staff/pools/", read=STAFF),
    "allocations:staff-pool-new": Entry(
        lambda s: "/allocations/staff/pools/new/", read=STAFF, write=STAFF
    ),
    "allocations:staff-pool-edit": Entry(
        lambda s: f"/allocations/staff/pools/{s.cpu.pk}/", read=STAFF, write=STAFF
    ),
    "allocations:staff-rounds": Entry(lambda s: "/allocations/staff/rounds/", read=STAFF),
    "allocations:staff-round-new": Entry(
        lambda s: "/allocations/staff/rounds/new/", read=STAFF, write=STAFF
    ),
    "allocations:staff-round-edit": Entry(
        lambda s: f"/allocations/staff/rounds/{s.round.pk}/", read=STAFF, write=STAFF
    ),
    "allocations:staff-round-close": Entry(
        lambda s: f"/allocations/staff/rounds/{s.round.pk}/close/", write=STAFF
    ),
    "allocations:staff-committee-add": Entry(
        lambda s: f"/allocations/staff/rounds/{s.round.pk}/committee/",
        write=STAFF,
        body=lambda s: {"user": "bob"},
    ),
    "allocations:staff-committee-remove": Entry(
        lambda s: f"/allocations/staff/rounds/{s.round.pk}/committee/erin/remove/", write=STAFF
    ),
    # --- A person's own pages ------------------------------------------------------------
    "people:tokens": Entry(
        lambda s: "/account/tokens/",
        read=SIGNED_IN,
        write=SIGNED_IN,
        body=lambda s: {"name": "matrix", "scope": "read", "expires_in_days": 7},
    ),
    "people:notifications": Entry(
        lambda s: "/account/notifications/",
        read=SIGNED_IN,
        write=SIGNED_IN,
        body=lambda s: {"allocation_events": "on"},
    ),
    "people:token-revoke": Entry(
        lambda s: f"/account/tokens/{_members_token(s)}/revoke/", write=frozenset({"member"})
    ),
    # --- API: tokens ----------------------------------------------------------------------
    "api:root": Entry(lambda s: "/api/v1/", read=EVERYONE),
    "api:project-invitation-list": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/invitations/",
        read=PI,
        write=PI,
        body=lambda s: {"email": "new@x.org"},
    ),
    "api:project-invitation-detail": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/invitations/{_invitation_of(s)}/",
        write=PI,
        method="delete",
    ),
    "api:project-output-list": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/outputs/",
        read=PROJECT,
        write=PI,
        body=lambda s: {"kind": "other", "title": "A talk"},
    ),
    "api:project-output-detail": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/outputs/{_output_of(s)}/",
        read=PROJECT,
        write=PI,
        method="delete",
    ),
    "api:project-output-bibtex": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/outputs/bibtex/", read=PROJECT, write=PI
    ),  # the matrix sends JSON: the PI's upload is a 415 (multipart only), refused after access
    "api:project-output-csv": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/outputs/csv/", read=PROJECT
    ),
    "api:project-statement": Entry(  # the PI and managers (and staff) read the money
        lambda s: f"/api/v1/projects/{_code(s)}/statements/2026-01.csv", read=PI
    ),
    "api:token-obtain": Entry(lambda s: "/api/v1/auth/token/", write=EVERYONE),
    "api:token-regenerate": Entry(lambda s: "/api/v1/auth/token/regenerate/", write=SIGNED_IN),
    # --- API: accounting ------------------------------------------------------------------
    "api:cluster-list": Entry(lambda s: "/api/v1/clusters/", read=SIGNED_IN, write=STAFF),
    "api:cluster-detail": Entry(lambda s: f"/api/v1/clusters/{s.cluster.name}/", read=SIGNED_IN),
    "api:partition-list": Entry(lambda s: "/api/v1/partitions/", read=SIGNED_IN, write=STAFF),
    "api:partition-detail": Entry(
        lambda s: f"/api/v1/partitions/{_first(Partition)}/", read=SIGNED_IN
    ),
    "api:job-list": Entry(lambda s: f"/api/v1/jobs/?project={_code(s)}", read=SIGNED_IN),
    "api:job-detail": Entry(lambda s: f"/api/v1/jobs/{s.job.pk}/", read=PROJECT),
    "api:usage-list": Entry(lambda s: "/api/v1/usage/", read=SIGNED_IN),
    "api:efficiency": Entry(lambda s: "/api/v1/efficiency/", read=SIGNED_IN),
    "api:import-list": Entry(lambda s: "/api/v1/imports/", read=STAFF, write=STAFF),
    "api:import-detail": Entry(lambda s: f"/api/v1/imports/{_first(ImportRun)}/", read=STAFF),
    "api:import-quarantined-lines": Entry(
        lambda s: f"/api/v1/imports/{_first(ImportRun)}/quarantined-lines/", read=STAFF
    ),
    "api:quarantined-line-list": Entry(lambda s: "/api/v1/quarantined-lines/", read=STAFF),
    "api:quarantined-line-retry": Entry(lambda s: "/api/v1/quarantined-lines/retry/", write=STAFF),
    "api:quarantined-line-detail": Entry(
        lambda s: f"/api/v1/quarantined-lines/{_first(QuarantinedRecord)}/", read=STAFF
    ),
    "api:quote": Entry(lambda s: "/api/v1/quote/", write=SIGNED_IN),
    "api:cost-ratio": Entry(lambda s: "/api/v1/cost-ratio/", read=SIGNED_IN),
    "api:utilisation": Entry(lambda s: "/api/v1/utilisation/", read=STAFF),
    "api:cost-distribution": Entry(lambda s: "/api/v1/cost-distribution/", read=STAFF),
    "api:overhead": Entry(lambda s: "/api/v1/overhead/", read=STAFF),
    "api:rates-impact": Entry(lambda s: "/api/v1/rates-impact/", write=STAFF),
    "api:rate-draft": Entry(
        lambda s: f"/api/v1/rate-drafts/{_rate_draft(s)}/",
        read=STAFF,
        write=STAFF,
        method="delete",
    ),
    # --- API: allocations -----------------------------------------------------------------
    "api:project-list": Entry(lambda s: "/api/v1/projects/", read=SIGNED_IN, write=STAFF),
    "api:project-detail": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/", read=PROJECT, write=STAFF, method="patch"
    ),
    "api:project-unarchive": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/unarchive/", write=STAFF
    ),
    "api:project-balance": Entry(lambda s: f"/api/v1/projects/{_code(s)}/balance/", read=PROJECT),
    "api:project-carbon": Entry(lambda s: f"/api/v1/projects/{_code(s)}/carbon/", read=PROJECT),
    "api:project-member-list": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/members/", read=PROJECT, write=PI
    ),
    "api:project-member-detail": Entry(
        lambda s: f"/api/v1/projects/{_code(s)}/members/alice/",
        read=PROJECT,
        write=PI | {"member"},  # a member may leave a project
        method="delete",
    ),
    # Grants and top-ups through the API are staff's; a chair grants by deciding a request.
    "api:allocation-list": Entry(lambda s: "/api/v1/allocations/", read=SIGNED_IN, write=STAFF),
    "api:allocation-detail": Entry(
        lambda s: f"/api/v1/allocations/{_first(Allocation, project=s.project)}/", read=PROJECT
    ),
    "api:round-list": Entry(lambda s: "/api/v1/rounds/", read=SIGNED_IN, write=STAFF),
    "api:round-detail": Entry(
        lambda s: f"/api/v1/rounds/{s.round.pk}/", read=SIGNED_IN, write=STAFF, method="patch"
    ),
    "api:pool-list": Entry(lambda s: "/api/v1/pools/", read=SIGNED_IN, write=STAFF),
    "api:pool-detail": Entry(
        lambda s: f"/api/v1/pools/{s.cpu.pk}/", read=SIGNED_IN, write=STAFF, method="patch"
    ),
    "api:round-close": Entry(lambda s: f"/api/v1/rounds/{s.round.pk}/close/", write=STAFF),
    "api:round-committee": Entry(
        lambda s: f"/api/v1/rounds/{s.round.pk}/committee/",
        write=STAFF,
        body=lambda s: {"username": "bob"},
    ),
    "api:round-committee-seat": Entry(
        lambda s: f"/api/v1/rounds/{s.round.pk}/committee/erin/", write=STAFF, method="delete"
    ),
    "api:round-overview": Entry(lambda s: f"/api/v1/rounds/{s.round.pk}/overview/", read=CHAIR),
    "api:round-what-if": Entry(
        lambda s: f"/api/v1/rounds/{s.round.pk}/what-if/",
        write=CHAIR,
        body=lambda s: {"method": "protect_small", "threshold_su": "50"},
    ),
    "api:round-what-if-draft": Entry(lambda s: _what_if_url(s, "", api=True), read=CHAIR),
    "api:round-what-if-proposal": Entry(
        lambda s: _what_if_url(s, "proposal", api=True),
        write=CHAIR,
        method="patch",
        body=lambda s: {"proposed_su": "1", "reason": "a smaller start"},
    ),
    "api:round-what-if-apply": Entry(lambda s: _what_if_url(s, "apply/", api=True), write=CHAIR),
    # Applying and transferring: PIs (of any project) and staff; reviewing: any committee.
    "api:request-list": Entry(lambda s: "/api/v1/requests/", read=SIGNED_IN, write=ANY_PI),
    "api:request-detail": Entry(
        lambda s: f"/api/v1/requests/{s.request.pk}/",
        read=REQUEST_READERS,
        write=PI,
        method="patch",
    ),
    "api:request-decide": Entry(lambda s: f"/api/v1/requests/{s.request.pk}/decide/", write=CHAIR),
    "api:request-estimates": Entry(
        lambda s: f"/api/v1/requests/{s.request.pk}/estimates/", write=PI
    ),
    "api:request-progress-report": Entry(
        lambda s: f"/api/v1/requests/{s.request.pk}/progress-report/", write=PI, method="put"
    ),
    "api:request-letter": Entry(
        lambda s: f"/api/v1/requests/{_decided(s)}/letter/", read=LETTER_READERS
    ),
    "api:request-review-start": Entry(
        lambda s: f"/api/v1/requests/{s.request.pk}/review-start/", write=CHAIR
    ),
    "api:request-submit": Entry(lambda s: f"/api/v1/requests/{s.request.pk}/submit/", write=PI),
    # The applicant's record: the request's reviewers (no one is assigned: the committee), the
    # chair and staff; frank, the member and the PI see the request but not the record (403).
    "api:request-record": Entry(
        lambda s: f"/api/v1/requests/{s.request.pk}/record/", read=COMMITTEE
    ),
    "api:request-assignments": Entry(
        lambda s: f"/api/v1/requests/{s.request.pk}/assignments/",
        read=CHAIR,
        write=CHAIR,
        body=lambda s: {"username": "erin"},
    ),
    "api:request-assignment": Entry(_assigned_erin, write=CHAIR, method="delete"),
    # Any committee member may send a review (frank too: of another project's request).
    "api:review-list": Entry(
        lambda s: "/api/v1/reviews/", read=SIGNED_IN, write=REVIEWERS | {"conflicted"}
    ),
    # A review of pawsey0003's request: frank, on the committee but of the project, gets 404.
    "api:review-detail": Entry(
        lambda s: f"/api/v1/reviews/{_first(Review, request=s.request)}/", read=COMMITTEE
    ),
    "api:adjustment-list": Entry(lambda s: "/api/v1/adjustments/", read=SIGNED_IN),
    "api:adjustment-refund": Entry(lambda s: "/api/v1/adjustments/refund/", write=STAFF),
    "api:adjustment-top-up": Entry(lambda s: "/api/v1/adjustments/top-up/", write=STAFF),
    "api:adjustment-transfer": Entry(lambda s: "/api/v1/adjustments/transfer/", write=ANY_PI),
    "api:adjustment-detail": Entry(
        lambda s: f"/api/v1/adjustments/{_first(Adjustment, project=s.project)}/", read=PROJECT
    ),
    # Anyone signed in asks for a project; the requester, the named PI and staff read it.
    "api:project-request-list": Entry(
        lambda s: "/api/v1/project-requests/", read=SIGNED_IN, write=SIGNED_IN
    ),
    "api:project-request-detail": Entry(
        lambda s: f"/api/v1/project-requests/{_project_request(s)}/",
        read=PROJECT_REQUEST_READERS,
    ),
    "api:project-request-approve": Entry(
        lambda s: f"/api/v1/project-requests/{_project_request(s)}/approve/", write=STAFF
    ),
    "api:project-request-reject": Entry(
        lambda s: f"/api/v1/project-requests/{_project_request(s)}/reject/", write=STAFF
    ),
    "api:project-request-request-changes": Entry(
        lambda s: f"/api/v1/project-requests/{_project_request(s)}/request-changes/", write=STAFF
    ),
    "api:project-request-confirm": Entry(
        lambda s: f"/api/v1/project-requests/{_project_request(s)}/confirm/",
        write=frozenset({"pi"}),
    ),
    "api:project-request-resubmit": Entry(
        lambda s: f"/api/v1/project-requests/{_project_request(s)}/resubmit/",
        write=frozenset({"member"}),
    ),
    "api:project-request-estimates": Entry(
        lambda s: f"/api/v1/project-requests/{_project_request(s)}/estimates/",
        write=frozenset({"member"}),
    ),
    "api:priorities": Entry(lambda s: "/api/v1/priorities/", read=STAFF),
    "api:priority-policy": Entry(
        lambda s: f"/api/v1/priority-policies/{s.cluster.name}/",
        read=STAFF,
        write=STAFF,
        method="put",
    ),
    "api:profiling-coefficient-list": Entry(
        lambda s: "/api/v1/profiling-coefficients/", read=STAFF, write=STAFF
    ),
    "api:profiling-coefficient-csv": Entry(
        lambda s: "/api/v1/profiling-coefficients/csv/", write=STAFF
    ),
}


@pytest.fixture
def rare_objects(site: Site) -> None:
    rare_objects_make(site)


def rare_objects_make(site: Site) -> None:
    """Objects the shared scenario lacks, made for the test (rolled back with it): a quarantined
    line, a proposed priority action, a priority policy, an adjustment of pawsey0003, erin's
    review of pawsey0003's request, and frank (``conflicted``): on the round's committee and a
    member of pawsey0003."""
    staff, pi, erin = site.users["staff"], site.users["pi"], site.users["committee"]
    assert staff is not None
    assert pi is not None
    assert erin is not None
    frank = User.objects.create_user("frank", "frank@example.org")
    membership_add(project=site.project, user=frank, actor=pi)
    CommitteeMember.objects.create(round=site.round, user=frank)
    site.users["conflicted"] = frank
    review_submit(request=site.request, reviewer=erin, score=3, comment="matrix")
    QuarantinedRecord.objects.create(
        cluster=site.cluster, source="matrix", line_number=1, header="JobID|Account",
        raw="1|nobody", raw_hash="0" * 64, reason="unknown project (Slurm account 'nobody')",
    )  # fmt: skip
    PriorityAction.objects.create(
        cluster=site.cluster, project=site.project, k_prof=Decimal(1), priority=Decimal(1000),
        command=f"sacctmgr -i modify account {site.project.code} set priority=1000",
    )  # fmt: skip
    priority_policy_set(
        cluster=site.cluster, base_priority=1000, k1="0.5", k2=2, c0="0.5", c1=1, c2=2,
        updated_by=staff,
    )  # fmt: skip
    adjustment_top_up(
        project=site.project, pool=site.cpu, amount=Decimal(10), actor=staff, reason="matrix"
    )


def _url_names() -> set[str]:
    def walk(resolver: URLResolver, namespace: str | None) -> set[str]:
        names: set[str] = set()
        for item in resolver.url_patterns:
            if isinstance(item, URLResolver):
                inner = item.namespace or namespace
                if namespace and item.namespace:
                    inner = f"{namespace}:{item.namespace}"
                names |= walk(item, inner)
            elif isinstance(item, URLPattern) and item.name:
                names.add(f"{namespace}:{item.name}" if namespace else item.name)
        return names

    return {
        name
        for name in walk(get_resolver(), None)
        if name not in EXCLUDED and not name.startswith(EXCLUDED_PREFIXES)
    }


def test_every_url_pattern_has_an_entry() -> None:
    missing = sorted(_url_names() - set(MATRIX))
    assert not missing, (
        f"URL patterns without an entry in the permission matrix: {missing}. Add an entry to "
        "MATRIX saying which roles may read and write them (docs/access.md)."
    )
    stale = sorted(set(MATRIX) - _url_names())
    assert not stale, f"matrix entries for URL patterns that no longer exist: {stale}"


def _client(site: Site, role: str) -> Client:
    client = Client()
    user: User | None = site.users.get(role)
    if user is not None:
        client.force_login(user)
    return client


# A caller who may use an operation but sent a wrong or empty input gets 400 (or 415 for the
# wrong media type): that proves the access check let them through.
INVALID_INPUT = {400, 415}


def _denied(status: int, *, role: str, api: bool) -> bool:
    if role == "anonymous":
        return status in ({401, 403} if api else {302})
    return status in {403, 404}


def _allowed(status: int) -> bool:
    return status < 400 or status in INVALID_INPUT


def _call(client: Client, method: str, url: str, body: dict[str, Any], api: bool) -> Any:
    if api:
        return getattr(client, method)(url, body, content_type="application/json")
    return getattr(client, method)(url, body)


def _check_role(entry: Entry, url: str, site: Site, role: str) -> list[str]:
    api = url.startswith("/api/")
    client = _client(site, role)
    checks = []
    if entry.read is not None:
        checks.append(("GET", role in entry.read, client.get(url).status_code))
    if entry.write is not None:
        response = _call(client, entry.method, url, entry.body(site), api)
        checks.append((entry.method.upper(), role in entry.write, response.status_code))
    return [
        f"{method} as {role}: {status} ({'should be allowed' if allowed else 'should be denied'})"
        for method, allowed, status in checks
        if not (_allowed(status) if allowed else _denied(status, role=role, api=api))
    ]


@pytest.mark.parametrize("name", sorted(MATRIX))
@pytest.mark.usefixtures("rare_objects")
def test_each_role_reads_and_writes_exactly_what_the_matrix_says(name: str, site: Site) -> None:
    entry = MATRIX[name]
    url = entry.url(site)
    problems = []
    for role in ROLES:
        with transaction.atomic():  # each role meets the world as it was: writes roll back
            problems += _check_role(entry, url, site, role)
            transaction.set_rollback(True)
    assert not problems, f"{name} {url}: " + "; ".join(problems)

"""The permission matrix: every endpoint x every role x (read, write), with the status each
role gets, and no other project's data in any response body.

Statuses are listed per role in the order of ``ROLES``:
anonymous, member, outsider (member of another project), PI, committee, chair, staff.
Each role's request runs in a savepoint that is rolled back, so every role meets the same
world. Objects a role may not see are 404, never 403, so their existence does not leak;
a project named in a body that the caller may not see is "unknown" (400), like one that does
not exist.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction

from tests.allocations.conftest import SAMPLE
from tests.api.conftest import CODES, ROLES, World

pytestmark = pytest.mark.django_db

SPEC: dict[str, Any] = {
    "name": "api-test",
    "timezone": "UTC",
    "partitions": [
        {"name": "cpu", "nodelist": "n[1-2]", "sockets": 2, "cores_per_socket": 32,
         "memory_mb": 256000, "cpu_tdp_watts": 200}
    ],
}  # fmt: skip
QUOTE = {"cluster": "slurm-testbed", "partition": "work", "cores_per_node": "1", "hours": "1"}
AMOUNT = [{"pool": "testbed CPU", "su": "10"}]


def _upload(world: World) -> dict[str, Any]:
    content = (SAMPLE / "sacct_allocations.psv").read_bytes()
    return {"cluster": "slurm-testbed", "file": SimpleUploadedFile("jobs.psv", content)}


def _assigned_reviewer(world: World) -> str:
    """The reviewer assigned (by the chair) to pawsey0003's request: the URL that takes them
    off (inside each role's rolled-back savepoint)."""
    from allocations.models import ReviewAssignment

    c = world.centre
    ReviewAssignment.objects.get_or_create(
        request=world.under_review, reviewer=c.reviewer, defaults={"assigned_by": c.chair}
    )
    return f"/api/v1/requests/{world.under_review.pk}/assignments/reviewer/"


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    url: Callable[[World], str]
    expected: str  # one status per role, in the order of ROLES
    body: Callable[[World], Any] | None = None
    multipart: bool = False
    # Codes a role may see in this response besides its own projects: those it named itself
    # (echoed in "unknown project X", or the target of its transfer).
    named: frozenset[str] = frozenset()


def _url(text: str) -> Callable[[World], str]:
    return lambda w: text


def _with_what_if(tail: str) -> Callable[[World], str]:
    """A what-if draft the chair made of the round (inside each role's rolled-back savepoint),
    and the URL of ``tail`` under it: ``proposal`` names its first proposal."""

    def build(world: World) -> str:
        from allocations.rounds.what_if_services import what_if_draft_create

        draft = what_if_draft_create(
            round_=world.round, actor=world.centre.chair, method="pro_rata"
        )
        base = f"/api/v1/rounds/{world.round.pk}/what-if/{draft.pk}/"
        first = draft.proposals.order_by("pk").first()
        assert first is not None
        return base + tail.replace("proposal", f"proposals/{first.pk}/")

    return build


def _k_prof_csv(world: World) -> dict[str, Any]:
    content = b"project,k_prof\npawsey0003,0.5\n"
    return {"cluster": "slurm-testbed", "file": SimpleUploadedFile("k.csv", content)}


def _with_priorities(text: str) -> Callable[[World], str]:
    """The URL, after giving the testbed a priority policy and pawsey0003 a K_prof (inside
    each role's rolled-back savepoint)."""

    def build(world: World) -> str:
        from allocations.priorities.services import priority_policy_set, profiling_coefficient_post

        c = world.centre
        priority_policy_set(
            cluster=c.cluster, base_priority=1000, k1="0.4", k2="0.7", c0="0.5", c1="1", c2="3",
            updated_by=c.staff,
        )  # fmt: skip
        profiling_coefficient_post(cluster=c.cluster, project=c.p3, k_prof="0.9", posted_by=c.staff)
        return text

    return build


def _testbed_spec() -> dict[str, Any]:
    from pathlib import Path

    spec_file = Path(__file__).resolve().parents[2] / "examples/clusters/slurm-testbed.json"
    return dict(json.loads(spec_file.read_text()))


def _with_rate_draft() -> Callable[[World], str]:
    """A kept draft of the testbed's rates (inside each role's rolled-back savepoint)."""

    def build(world: World) -> str:
        from accounting.ledger.rate_drafts import rate_draft_create

        draft = rate_draft_create(cluster=world.centre.cluster, spec=_testbed_spec())
        return f"/api/v1/rate-drafts/{draft.pk}/"

    return build


def _with_overhead_run(text: str) -> Callable[[World], str]:
    """The URL, after computing the testbed's true overhead of the sample's day (inside each
    role's rolled-back savepoint), so staff read a stored run."""

    def build(world: World) -> str:
        from datetime import UTC, datetime

        from accounting.utilisation.overhead import overhead_run_compute

        overhead_run_compute(
            cluster=world.centre.cluster, start=datetime(2026, 11, 22, tzinfo=UTC),
            end=datetime(2026, 11, 23, tzinfo=UTC), step="hour",
        )  # fmt: skip
        return text

    return build


def _with_invitation(world: World) -> str:
    """An invitation of pawsey0003's, made inside each role's rolled-back savepoint."""
    from projects.invitations import invitation_send

    c = world.centre
    sent = invitation_send(project=c.p3, email="new@x.org", role="member", actor=c.alice)
    return f"/api/v1/projects/pawsey0003/invitations/{sent.invitation.pk}/"


def _with_output(world: World) -> str:
    """A research output of pawsey0003, added by its PI inside each role's savepoint."""
    from allocations.outputs.services import OutputDetails, output_add

    c = world.centre
    details = OutputDetails(kind="publication", title="API paper")
    output = output_add(project=c.p3, actor=c.alice, details=details)
    return f"/api/v1/projects/pawsey0003/outputs/{output.pk}/"


def _bib_upload(world: World) -> dict[str, Any]:
    content = b"@article{a, title={Uploaded}, year={2024}, doi={10.1234/up}}"
    return {"file": SimpleUploadedFile("refs.bib", content)}


def _project_request(state: str) -> Callable[[World], str]:
    """The URL of a project request asked for by carol (member of pawsey0003), made inside each
    role's rolled-back savepoint: ``awaiting_pi`` names alice (PI of pawsey0003) as its PI;
    ``submitted`` has carol lead it; ``changes_requested`` is that one sent back by staff."""

    def build(world: World) -> str:
        from allocations.project_requests.services import (
            project_request_changes_ask,
            project_request_create,
        )

        c = world.centre
        request = project_request_create(
            requester=c.carol, title="API matrix", abstract="a", field_of_science="f",
            pi="alice" if state == "awaiting_pi" else "", amounts={"testbed CPU": "10"},
        )  # fmt: skip
        if state == "changes_requested":
            project_request_changes_ask(request=request, actor=c.staff, reason="more detail")
        return f"/api/v1/project-requests/{request.pk}/"

    return build


def _action(state: str, action: str) -> Callable[[World], str]:
    return lambda w: f"{_project_request(state)(w)}{action}/"


def _letter_of_decided(world: World) -> str:
    """The letter of pawsey0003's request, decided by the chair inside each role's
    rolled-back savepoint (a letter exists only once a request is decided)."""
    from allocations.rounds.services import request_decide

    c = world.centre
    request = world.under_review
    request.refresh_from_db()
    if request.state == "under_review":
        request_decide(request=request, actor=c.chair, granted={c.cpu: Decimal(6)}, reason="less")
    return f"/api/v1/requests/{request.pk}/letter/"


NEW_PROJECT = {
    "title": "Coral reefs", "abstract": "Reef growth.", "field_of_science": "Marine science",
    "amounts": AMOUNT,
}  # fmt: skip
ESTIMATE = {"cluster": "slurm-testbed", "partition": "work", "jobs": 10, "hours": "2"}

ALL_200 = "401 200 200 200 200 200 200"
P3_READ = "401 200 404 200 404 404 200"  # pawsey0003: its member, its PI, staff
PI_READ = "401 403 404 200 404 404 200"  # pawsey0003's PI and staff; its member is refused
STAFF_ONLY_HIDDEN = "401 404 404 404 404 404 200"
STAFF_WRITE = "401 403 403 403 403 403 201"
NOT_ALLOWED = "401 405 405 405 405 405 405"  # the endpoint has no such operation
STAFF_NOT_ALLOWED = "401 403 403 403 403 403 405"
STAFF_CHANGE = "401 403 403 403 403 403 200"
CHAIR_WRITE = "401 403 403 403 403 201 201"  # the round is seen by all; the chair runs it
CHAIR_HIDDEN = "401 404 404 404 404 200 200"  # the chair's drafts: not found for the others
CHAIR_HIDDEN_CHANGE = CHAIR_HIDDEN

CASES = [
    # --- accounting ---
    Case("clusters: read", "get", _url("/api/v1/clusters/"), ALL_200),
    Case("clusters: apply a spec", "post", _url("/api/v1/clusters/"), STAFF_WRITE,
         body=lambda w: SPEC),
    Case("cluster: read", "get", _url("/api/v1/clusters/slurm-testbed/"), ALL_200),
    Case("cluster: write", "patch", _url("/api/v1/clusters/slurm-testbed/"), STAFF_NOT_ALLOWED,
         body=lambda w: {"description": "x"}),
    Case("partitions: read", "get", _url("/api/v1/partitions/"), ALL_200),
    Case("partitions: apply a spec", "post", _url("/api/v1/partitions/"), STAFF_WRITE,
         body=lambda w: {"cluster": "slurm-testbed", **SPEC["partitions"][0]}),
    Case("partition: read", "get", lambda w: f"/api/v1/partitions/{w.work.pk}/", ALL_200),
    Case("partition: write", "delete", lambda w: f"/api/v1/partitions/{w.work.pk}/",
         STAFF_NOT_ALLOWED),
    Case("jobs: read", "get", _url("/api/v1/jobs/"), ALL_200),
    Case("jobs: write", "post", _url("/api/v1/jobs/"), NOT_ALLOWED, body=lambda w: {}),
    Case("job: read", "get", lambda w: f"/api/v1/jobs/{w.job.pk}/", P3_READ),
    Case("job: write", "delete", lambda w: f"/api/v1/jobs/{w.job.pk}/", NOT_ALLOWED),
    Case("usage: read", "get", _url("/api/v1/usage/?group_by=project&group_by=user"), ALL_200),
    Case("usage: write", "post", _url("/api/v1/usage/"), NOT_ALLOWED, body=lambda w: {}),
    Case("efficiency: read", "get", _url("/api/v1/efficiency/?start=2026-01-01"), ALL_200),
    Case("efficiency: read a project", "get", _url("/api/v1/efficiency/?project=pawsey0003"),
         ALL_200, named=frozenset({"pawsey0003"})),
    # Who is asking is checked first: an anonymous caller's bad dates are not read.
    Case("efficiency: bad period", "get",
         _url("/api/v1/efficiency/?start=2026-02-01&end=2026-01-01"),
         "401 400 400 400 400 400 400"),
    Case("efficiency: write", "post", _url("/api/v1/efficiency/"), NOT_ALLOWED,
         body=lambda w: {}),
    Case("quote: price a job", "post", _url("/api/v1/quote/"), ALL_200, body=lambda w: QUOTE),
    Case("quote: other methods", "get", _url("/api/v1/quote/"), NOT_ALLOWED),
    Case("cost-ratio: read", "get", _url("/api/v1/cost-ratio/?cluster=slurm-testbed&model=energy"),
         ALL_200),
    Case("cost-ratio: write", "post", _url("/api/v1/cost-ratio/"), NOT_ALLOWED, body=lambda w: {}),
    Case("utilisation: read (staff)", "get", _url("/api/v1/utilisation/?cluster=slurm-testbed"),
         "401 403 403 403 403 403 200"),
    # Staff only; the world's cluster has no cost model, so staff get a 400 that says so.
    Case("cost-distribution: read (staff)", "get",
         _url("/api/v1/cost-distribution/?cluster=slurm-testbed"), "401 403 403 403 403 403 400"),
    Case("cost-distribution: write", "post", _url("/api/v1/cost-distribution/"),
         STAFF_NOT_ALLOWED, body=lambda w: {}),
    Case("utilisation: write", "post", _url("/api/v1/utilisation/"), STAFF_NOT_ALLOWED,
         body=lambda w: {}),
    # Staff only, refused before the body is read; staff get the draft's impact.
    Case("rates-impact: a draft's impact (staff)", "post", _url("/api/v1/rates-impact/"),
         STAFF_CHANGE, body=lambda w: {"cluster": "slurm-testbed", "spec": _testbed_spec()}),
    Case("rates-impact: other methods", "get", _url("/api/v1/rates-impact/"), STAFF_NOT_ALLOWED),
    Case("rate-draft: its impact (staff)", "get", _with_rate_draft(), STAFF_CHANGE),
    Case("rate-draft: discard (staff)", "delete", _with_rate_draft(),
         "401 403 403 403 403 403 204"),
    Case("overhead: read (staff)", "get",
         _with_overhead_run("/api/v1/overhead/?cluster=slurm-testbed&start=2026-11-22T00:00:00Z"
                            "&end=2026-11-23T00:00:00Z"), STAFF_ONLY_HIDDEN),
    Case("overhead: write", "post", _url("/api/v1/overhead/"), "401 404 404 404 404 404 405",
         body=lambda w: {}),
    Case("imports: read", "get", _url("/api/v1/imports/"), STAFF_ONLY_HIDDEN),
    Case("imports: upload", "post", _url("/api/v1/imports/"), "401 404 404 404 404 404 202",
         body=_upload, multipart=True),
    Case("import: read", "get", lambda w: f"/api/v1/imports/{w.run.pk}/", STAFF_ONLY_HIDDEN),
    Case("import: write", "delete", lambda w: f"/api/v1/imports/{w.run.pk}/",
         "401 404 404 404 404 404 405"),
    Case("import's quarantined lines: read", "get",
         lambda w: f"/api/v1/imports/{w.run.pk}/quarantined-lines/", STAFF_ONLY_HIDDEN),
    Case("import's quarantined lines: write", "post",
         lambda w: f"/api/v1/imports/{w.run.pk}/quarantined-lines/",
         "401 404 404 404 404 404 405", body=lambda w: {}),
    Case("quarantined lines: read", "get", _url("/api/v1/quarantined-lines/"),
         STAFF_ONLY_HIDDEN),
    Case("quarantined lines: write", "post", _url("/api/v1/quarantined-lines/"),
         "401 404 404 404 404 404 405", body=lambda w: {}),
    Case("quarantined lines: retry", "post", _url("/api/v1/quarantined-lines/retry/"),
         "401 404 404 404 404 404 202", body=lambda w: {"cluster": "slurm-testbed"}),
    Case("quarantined lines: retry has no read", "get",
         _url("/api/v1/quarantined-lines/retry/"), "401 404 404 404 404 404 405"),
    Case("quarantined line: read", "get",
         lambda w: f"/api/v1/quarantined-lines/{w.quarantined.pk}/", STAFF_ONLY_HIDDEN),
    Case("quarantined line: write", "delete",
         lambda w: f"/api/v1/quarantined-lines/{w.quarantined.pk}/",
         "401 404 404 404 404 404 405"),
    # --- projects, members, balances ---
    Case("projects: read", "get", _url("/api/v1/projects/"), ALL_200),
    Case("projects: create", "post", _url("/api/v1/projects/"), STAFF_WRITE,
         body=lambda w: {"code": "pawsey0042", "title": "New", "pi": "alice"}),
    Case("project: read", "get", _url("/api/v1/projects/pawsey0003/"), P3_READ),
    Case("project: write", "patch", _url("/api/v1/projects/pawsey0003/"), STAFF_CHANGE,
         body=lambda w: {"title": "x"}),
    Case("unarchive: no read", "get", _url("/api/v1/projects/pawsey0003/unarchive/"),
         STAFF_NOT_ALLOWED),
    Case("unarchive", "post", _url("/api/v1/projects/pawsey0003/unarchive/"),
         "401 403 403 403 403 403 200"),  # staff; a project not archived stays as it is
    Case("members: read", "get", _url("/api/v1/projects/pawsey0003/members/"), P3_READ),
    Case("members: add", "post", _url("/api/v1/projects/pawsey0003/members/"),
         "401 403 404 201 404 404 201", body=lambda w: {"username": "bob"}),
    Case("member: read", "get", _url("/api/v1/projects/pawsey0003/members/carol/"), P3_READ),
    Case("member: role (the PI's to give)", "patch",
         _url("/api/v1/projects/pawsey0003/members/carol/"), "401 403 404 200 404 404 200",
         body=lambda w: {"role": "manager"}),
    Case("invitations: read (PI, managers)", "get",
         _url("/api/v1/projects/pawsey0003/invitations/"), "401 403 404 200 404 404 200"),
    Case("invitations: send", "post", _url("/api/v1/projects/pawsey0003/invitations/"),
         "401 403 404 201 404 404 201", body=lambda w: {"email": "new@x.org"}),
    Case("invitation: revoke", "delete", _with_invitation, "401 403 404 204 404 404 204"),
    Case("invitation: no read (they are listed)", "get", _with_invitation, NOT_ALLOWED),
    Case("member: remove (a member may leave)", "delete",
         _url("/api/v1/projects/pawsey0003/members/carol/"), "401 204 404 204 404 404 204"),
    Case("balance: read", "get", _url("/api/v1/projects/pawsey0003/balance/?on=2026-11-22"),
         P3_READ),
    Case("balance: write", "post", _url("/api/v1/projects/pawsey0003/balance/"), NOT_ALLOWED,
         body=lambda w: {}),
    Case("carbon: read", "get", _url("/api/v1/projects/pawsey0003/carbon/?start=2026-01-01"),
         P3_READ),
    Case("carbon: write", "post", _url("/api/v1/projects/pawsey0003/carbon/"), NOT_ALLOWED,
         body=lambda w: {}),
    # --- research outputs: members read; the PI (managers) and staff write ---
    Case("outputs: read", "get", _url("/api/v1/projects/pawsey0003/outputs/"), P3_READ),
    Case("outputs: add", "post", _url("/api/v1/projects/pawsey0003/outputs/"),
         "401 403 404 201 404 404 201", body=lambda w: {"kind": "other", "title": "A talk"}),
    Case("output: read", "get", _with_output, P3_READ),
    Case("output: change", "patch", _with_output, "401 403 404 200 404 404 200",
         body=lambda w: {"title": "Renamed"}),
    Case("output: delete", "delete", _with_output, "401 403 404 204 404 404 204"),
    Case("outputs as BibTeX: read", "get", _url("/api/v1/projects/pawsey0003/outputs/bibtex/"),
         P3_READ),
    Case("outputs from BibTeX: upload", "post",
         _url("/api/v1/projects/pawsey0003/outputs/bibtex/"), "401 403 404 201 404 404 201",
         body=_bib_upload, multipart=True),
    Case("outputs as CSV: read", "get", _url("/api/v1/projects/pawsey0003/outputs/csv/"),
         P3_READ),
    Case("outputs as CSV: write", "post", _url("/api/v1/projects/pawsey0003/outputs/csv/"),
         NOT_ALLOWED, body=lambda w: {}),
    # A month's statement: the project's PI (and managers) and staff; a member is refused.
    Case("statement: read", "get",
         _url("/api/v1/projects/pawsey0003/statements/2026-11.csv"), PI_READ),
    Case("statement: write", "post",
         _url("/api/v1/projects/pawsey0003/statements/2026-11.csv"), NOT_ALLOWED,
         body=lambda w: {}),
    # --- allocations and rounds ---
    Case("allocations: read", "get", _url("/api/v1/allocations/"), ALL_200),
    Case("allocations: grant", "post", _url("/api/v1/allocations/"), STAFF_WRITE,
         body=lambda w: {"project": "pawsey0003", "pool": "testbed GPU", "amount": "12",
                         "period_start": "2027-10-01", "period_end": "2028-10-01"}),
    Case("allocation: read", "get", lambda w: f"/api/v1/allocations/{w.allocation.pk}/",
         P3_READ),
    Case("allocation: write", "delete", lambda w: f"/api/v1/allocations/{w.allocation.pk}/",
         STAFF_NOT_ALLOWED),
    Case("rounds: read", "get", _url("/api/v1/rounds/"), ALL_200),
    Case("rounds: create", "post", _url("/api/v1/rounds/"), STAFF_WRITE,
         body=lambda w: {"name": "2028 call", "opens_at": "2027-06-01T00:00:00Z",
                         "closes_at": "2027-07-01T00:00:00Z", "period_start": "2027-10-01",
                         "period_end": "2028-10-01", "available": AMOUNT, "chair": "chair",
                         "committee": ["reviewer"]}),
    Case("round: read", "get", lambda w: f"/api/v1/rounds/{w.round.pk}/", ALL_200),
    Case("round: write", "patch", lambda w: f"/api/v1/rounds/{w.round.pk}/", STAFF_CHANGE,
         body=lambda w: {"name": "x"}),
    Case("round close: write", "post", lambda w: f"/api/v1/rounds/{w.round.pk}/close/",
         STAFF_CHANGE),
    Case("round close: no read", "get", lambda w: f"/api/v1/rounds/{w.round.pk}/close/",
         NOT_ALLOWED),
    Case("round committee: seat", "post", lambda w: f"/api/v1/rounds/{w.round.pk}/committee/",
         STAFF_CHANGE, body=lambda w: {"username": "bob"}),
    Case("round committee: no read", "get",
         lambda w: f"/api/v1/rounds/{w.round.pk}/committee/", NOT_ALLOWED),
    Case("round committee seat: remove", "delete",
         lambda w: f"/api/v1/rounds/{w.round.pk}/committee/reviewer/",
         "401 403 403 403 403 403 204"),
    Case("round committee seat: no read", "get",
         lambda w: f"/api/v1/rounds/{w.round.pk}/committee/reviewer/", NOT_ALLOWED),
    Case("pools: read", "get", _url("/api/v1/pools/"), ALL_200),
    Case("pools: create", "post", _url("/api/v1/pools/"), STAFF_WRITE,
         body=lambda w: {"cluster": "slurm-testbed", "name": "testbed debug",
                        "slurm_account_suffix": "-debug"}),
    Case("pool: read", "get", lambda w: f"/api/v1/pools/{w.centre.cpu.pk}/", ALL_200),
    Case("pool: write", "patch", lambda w: f"/api/v1/pools/{w.centre.cpu.pk}/", STAFF_CHANGE,
         body=lambda w: {"description": "x"}),
    Case("round overview: read", "get", lambda w: f"/api/v1/rounds/{w.round.pk}/overview/",
         "401 403 403 403 403 200 200"),
    Case("round overview: write", "post", lambda w: f"/api/v1/rounds/{w.round.pk}/overview/",
         STAFF_NOT_ALLOWED, body=lambda w: {}),
    # --- requests and reviews ---
    Case("requests: read", "get", _url("/api/v1/requests/"), ALL_200),
    # Who leads no project (the committee, the chair) is refused before the body is read.
    Case("requests: apply for a top-up", "post", _url("/api/v1/requests/"),
         "401 403 400 201 403 403 201",
         body=lambda w: {"project": "pawsey0003", "kind": "top_up",
                         "amounts": [{"pool": "testbed CPU", "su": "5"}]},
         named=frozenset({"pawsey0003"})),
    Case("request under review: read", "get",
         lambda w: f"/api/v1/requests/{w.under_review.pk}/", "401 200 404 200 200 200 200"),
    Case("draft: read (not even the committee)", "get",
         lambda w: f"/api/v1/requests/{w.draft.pk}/", "401 404 200 404 404 404 200"),
    Case("draft: edit", "patch", lambda w: f"/api/v1/requests/{w.draft.pk}/",
         "401 404 200 404 404 404 200", body=lambda w: {"justification": "more genomes"}),
    Case("draft: add an estimate", "post", lambda w: f"/api/v1/requests/{w.draft.pk}/estimates/",
         "401 404 201 404 404 404 201",
         body=lambda w: {"cluster": "slurm-testbed", "partition": "work", "jobs": 10,
                         "hours": "2", "cores_per_node": "16"}),
    Case("estimates have no read here", "get",
         lambda w: f"/api/v1/requests/{w.draft.pk}/estimates/", NOT_ALLOWED),
    Case("submit has no read", "get", lambda w: f"/api/v1/requests/{w.draft.pk}/submit/",
         NOT_ALLOWED),
    Case("draft: submit", "post", lambda w: f"/api/v1/requests/{w.draft.pk}/submit/",
         "401 404 200 404 404 404 200"),
    Case("submitted: open review (the chair)", "post",
         lambda w: f"/api/v1/requests/{w.submitted.pk}/review-start/",
         "401 404 404 403 403 200 200"),
    Case("review-start has no read", "get",
         lambda w: f"/api/v1/requests/{w.submitted.pk}/review-start/", NOT_ALLOWED),
    Case("decide has no read", "get", lambda w: f"/api/v1/requests/{w.under_review.pk}/decide/",
         NOT_ALLOWED),
    Case("under review: decide (the chair)", "post",
         lambda w: f"/api/v1/requests/{w.under_review.pk}/decide/",
         "401 403 404 403 403 200 200", body=lambda w: {"granted": AMOUNT}),
    # A draft's progress report: its project's PI (bob, here outsider) and staff write it;
    # this draft is an application, so the service answers that only a renewal carries one.
    Case("draft: write its progress report", "put",
         lambda w: f"/api/v1/requests/{w.draft.pk}/progress-report/",
         "401 404 400 404 404 404 400", body=lambda w: {"text": "what we did"}),
    Case("progress report has no read here", "get",
         lambda w: f"/api/v1/requests/{w.draft.pk}/progress-report/", NOT_ALLOWED),
    # The decision letter: the PI (and managers), the deciding chair and staff; a member and
    # the committee see the request but not its letter; no letter before the decision.
    Case("decided: read its letter", "get", _letter_of_decided, "401 403 404 200 403 200 200"),
    Case("under review: no letter yet", "get",
         lambda w: f"/api/v1/requests/{w.under_review.pk}/letter/",
         "401 404 404 404 404 404 404"),
    Case("letter: no write", "post", _letter_of_decided, NOT_ALLOWED),
    # The applicant's record: the reviewers (no one assigned: the committee), the chair and
    # staff; the project's member and PI see the request but not the record (403).
    Case("under review: the applicant's record", "get",
         lambda w: f"/api/v1/requests/{w.under_review.pk}/record/",
         "401 403 404 403 200 200 200"),
    Case("record has no write", "post",
         lambda w: f"/api/v1/requests/{w.under_review.pk}/record/", NOT_ALLOWED),
    Case("under review: its assigned reviewers (the chair)", "get",
         lambda w: f"/api/v1/requests/{w.under_review.pk}/assignments/",
         "401 403 404 403 403 200 200"),
    Case("under review: assign a reviewer (the chair)", "post",
         lambda w: f"/api/v1/requests/{w.under_review.pk}/assignments/",
         "401 403 404 403 403 200 200", body=lambda w: {"username": "reviewer"}),
    Case("under review: take a reviewer off (the chair)", "delete", _assigned_reviewer,
         "401 403 404 403 403 204 204"),
    Case("an assignment has no read", "get", _assigned_reviewer, NOT_ALLOWED),
    # --- project requests: anyone asks; the requester (carol), the named PI (alice), staff read
    Case("project requests: read", "get", _url("/api/v1/project-requests/"), ALL_200),
    Case("project requests: ask for a project", "post", _url("/api/v1/project-requests/"),
         "401 201 201 201 201 201 201", body=lambda w: NEW_PROJECT),
    Case("project request: read", "get", _project_request("awaiting_pi"),
         "401 200 404 200 404 404 200"),
    Case("project request: no edit in place", "patch", _project_request("awaiting_pi"),
         NOT_ALLOWED, body=lambda w: {"title": "x"}),
    Case("project request: the named PI confirms", "post",
         _action("awaiting_pi", "confirm"), "401 403 404 200 404 404 403",
         body=lambda w: {"accept": True}),
    Case("confirm has no read", "get", _action("awaiting_pi", "confirm"), NOT_ALLOWED),
    Case("project request: the requester adds an estimate", "post",
         _action("awaiting_pi", "estimates"), "401 201 404 403 404 404 403",
         body=lambda w: ESTIMATE),
    Case("project request estimates have no read", "get", _action("awaiting_pi", "estimates"),
         NOT_ALLOWED),
    Case("project request: the requester resubmits", "post",
         _action("changes_requested", "resubmit"), "401 200 404 404 404 404 403",
         body=lambda w: {"title": "Coral reefs, again"}),
    Case("resubmit has no read", "get", _action("changes_requested", "resubmit"), NOT_ALLOWED),
    Case("project request: staff approve", "post", _action("submitted", "approve"),
         "401 403 404 404 404 404 200", body=lambda w: {}),
    Case("approve has no read", "get", _action("submitted", "approve"), NOT_ALLOWED),
    Case("project request: staff ask for changes", "post",
         _action("submitted", "request-changes"), "401 403 404 404 404 404 200",
         body=lambda w: {"reason": "say more"}),
    Case("request-changes has no read", "get", _action("submitted", "request-changes"),
         NOT_ALLOWED),
    Case("project request: staff reject", "post", _action("submitted", "reject"),
         "401 403 404 404 404 404 200", body=lambda w: {"reason": "out of scope"}),
    Case("reject has no read", "get", _action("submitted", "reject"), NOT_ALLOWED),
    Case("reviews: read", "get", _url("/api/v1/reviews/"), ALL_200),
    Case("reviews: write one (the committee)", "post", _url("/api/v1/reviews/"),
         "401 403 403 403 201 201 403",
         body=lambda w: {"request": w.under_review.pk, "score": 5, "comment": "great"}),
    Case("review: read", "get", lambda w: f"/api/v1/reviews/{w.review.pk}/",
         "401 404 404 404 200 200 200"),
    Case("review: write", "patch", lambda w: f"/api/v1/reviews/{w.review.pk}/", NOT_ALLOWED,
         body=lambda w: {"score": 1}),
    # --- adjustments ---
    Case("adjustments: read", "get", _url("/api/v1/adjustments/"), ALL_200),
    Case("adjustments: write", "post", _url("/api/v1/adjustments/"), NOT_ALLOWED,
         body=lambda w: {}),
    Case("adjustments: refund", "post", _url("/api/v1/adjustments/refund/"),
         "401 403 403 403 403 403 201",
         body=lambda w: {"project": "pawsey0003", "pool": "testbed CPU", "amount": "1",
                         "reason": "fault", "on": "2026-11-22"}),
    Case("refund has no read", "get", _url("/api/v1/adjustments/refund/"), STAFF_NOT_ALLOWED),
    Case("adjustments: top up", "post", _url("/api/v1/adjustments/top-up/"),
         "401 403 403 403 403 403 201",
         body=lambda w: {"project": "pawsey0003", "pool": "testbed CPU", "amount": "1",
                         "reason": "course", "on": "2026-11-22"}),
    Case("top-up has no read", "get", _url("/api/v1/adjustments/top-up/"), STAFF_NOT_ALLOWED),
    Case("transfer has no read", "get", _url("/api/v1/adjustments/transfer/"), NOT_ALLOWED),
    Case("adjustments: transfer (the source's PI)", "post",
         _url("/api/v1/adjustments/transfer/"), "401 403 400 201 403 403 201",
         body=lambda w: {"source": "pawsey0003", "target": "pawsey0002", "pool": "testbed CPU",
                         "amount": "1", "reason": "collaboration", "on": "2026-11-22"},
         named=frozenset({"pawsey0002", "pawsey0003"})),
    Case("adjustment: read", "get", lambda w: f"/api/v1/adjustments/{w.adjustment.pk}/",
         P3_READ),
    Case("adjustment: write", "delete", lambda w: f"/api/v1/adjustments/{w.adjustment.pk}/",
         NOT_ALLOWED),
    # --- dynamic priority (staff only) ---
    Case("profiling coefficients: read", "get",
         _url("/api/v1/profiling-coefficients/?cluster=slurm-testbed"), STAFF_ONLY_HIDDEN),
    Case("profiling coefficients: post", "post", _url("/api/v1/profiling-coefficients/"),
         "401 404 404 404 404 404 201",
         body=lambda w: {"cluster": "slurm-testbed", "project": "pawsey0003", "k_prof": "0.5"}),
    Case("profiling coefficients csv: upload", "post",
         _url("/api/v1/profiling-coefficients/csv/"), "401 404 404 404 404 404 201",
         body=_k_prof_csv, multipart=True),
    Case("profiling coefficients csv: no read", "get",
         _url("/api/v1/profiling-coefficients/csv/"), "401 404 404 404 404 404 405"),
    Case("priorities: read", "get", _with_priorities("/api/v1/priorities/?cluster=slurm-testbed"),
         STAFF_ONLY_HIDDEN),
    Case("priorities: no write", "post", _url("/api/v1/priorities/"),
         "401 404 404 404 404 404 405", body=lambda w: {}),
    Case("priority policy: read", "get",
         _with_priorities("/api/v1/priority-policies/slurm-testbed/"), STAFF_ONLY_HIDDEN),
    Case("priority policy: set", "put", _url("/api/v1/priority-policies/slurm-testbed/"),
         "401 404 404 404 404 404 201",
         body=lambda w: {"base_priority": "1000", "k1": "0.4", "k2": "0.7", "c0": "0.5",
                         "c1": "1", "c2": "3"}),
    # --- auth ---
    Case("token: obtain", "post", _url("/api/v1/auth/token/"), "201 201 201 201 201 201 201",
         body=lambda w: {"username": "carol", "password": "pw-for-tests"}),
    Case("token: no read", "get", _url("/api/v1/auth/token/"), "405 405 405 405 405 405 405"),
    Case("token regenerate: no read", "get", _url("/api/v1/auth/token/regenerate/"),
         NOT_ALLOWED),
    Case("token: regenerate", "post", _url("/api/v1/auth/token/regenerate/"),
         "401 201 201 201 201 201 201"),
    # --- the API root: links only, for everyone ---
    Case("root: links", "get", _url("/api/v1/"), "200 200 200 200 200 200 200"),
    Case("round what-if: propose", "post", lambda w: f"/api/v1/rounds/{w.round.pk}/what-if/",
         CHAIR_WRITE, body=lambda w: {"method": "pro_rata", "floor_su": "2"}),
    Case("round what-if: no read", "get", lambda w: f"/api/v1/rounds/{w.round.pk}/what-if/",
         NOT_ALLOWED),
    Case("what-if draft: read", "get", _with_what_if(""), CHAIR_HIDDEN),
    Case("what-if draft: no write", "post", _with_what_if(""), NOT_ALLOWED, body=lambda w: {}),
    Case("what-if proposal: edit", "patch", _with_what_if("proposal"), CHAIR_HIDDEN_CHANGE,
         body=lambda w: {"proposed_su": "5", "reason": "a smaller start"}),
    Case("what-if proposal: no read", "get", _with_what_if("proposal"), NOT_ALLOWED),
    Case("what-if apply", "post", _with_what_if("apply/"), CHAIR_HIDDEN_CHANGE),
    Case("what-if apply: no read", "get", _with_what_if("apply/"), NOT_ALLOWED),
    Case("root: no write", "post", _url("/api/v1/"), "405 405 405 405 405 405 405"),
]  # fmt: skip


@pytest.fixture
def world(shared_world):
    """The module's one world (tests/api/conftest.py): hundreds of tests read it."""
    return shared_world


@pytest.fixture(autouse=True)
def _uploads_in_tmp(settings, tmp_path):
    settings.VAR_DIR = tmp_path


def test_every_operation_of_the_schema_and_every_endpoint_read_and_write_are_in_the_matrix(
    world,
):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    patterns = {
        path: re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")
        for path in schema["paths"]
    }
    cases_of = {path: [] for path in patterns}
    for case in CASES:
        # Each case builds its URL in a savepoint rolled back after it, as the status test
        # does: one case's writes (a decision for a letter) do not change the next one's world.
        with transaction.atomic():
            url = case.url(world).split("?")[0]
            transaction.set_rollback(True)
        matching = [url] if url in patterns else [p for p, rx in patterns.items() if rx.match(url)]
        # A literal segment wins over a parameter (``outputs/bibtex/`` is not ``outputs/{id}/``,
        # whose id is digits): keep the matches with the fewest parameters.
        fewest = min((path.count("{") for path in matching), default=0)
        matching = [path for path in matching if path.count("{") == fewest]
        assert len(matching) == 1, (case.name, url, matching)
        cases_of[matching[0]].append(case)
    for path, operations in schema["paths"].items():
        methods = {case.method for case in cases_of[path]}
        assert set(operations) <= methods, (path, set(operations) - methods)
        assert len(cases_of[path]) >= 2, f"{path}: a read and a write"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_role_gets_the_expected_status_and_only_its_projects_data(world, case):
    expected = dict(zip(ROLES, (int(code) for code in case.expected.split()), strict=True))
    clients = {role: world.client(role) for role in ROLES}
    got = {}
    leaks = {}
    for role in ROLES:
        with transaction.atomic():
            url = case.url(world)
            body = case.body(world) if case.body else None
            send = getattr(clients[role], case.method)
            if case.multipart:
                response = send(url, body, format="multipart")
            elif body is not None:
                response = send(url, body, format="json")
            else:
                response = send(url)
            transaction.set_rollback(True)
        got[role] = response.status_code
        text = response.content.decode(errors="replace")  # a PDF letter is not text
        allowed = world.visible[role] | case.named
        leaked = {code for code in CODES if code in text} - allowed
        if leaked:
            leaks[role] = leaked
        if response.status_code >= 400 and response.status_code != 405:
            assert set(response.json()) == {"message", "errors"}, (role, text)
    assert got == expected
    assert leaks == {}


REFUSED = {401, 403, 404}
WRITES = [case for case in CASES if case.method in {"post", "put", "patch", "delete"}]


@pytest.mark.parametrize("case", WRITES, ids=[case.name for case in WRITES])
@pytest.mark.parametrize("body", [{}, {"unknown": "\x00", "amount": []}], ids=["empty", "junk"])
def test_a_role_refused_an_operation_is_refused_before_its_body_is_read(world, case, body):
    """Validation never runs before the permission check: whoever may not call an operation
    gets the same 401/403/404 with an empty or a junk body, never a 400 listing fields."""
    expected = dict(zip(ROLES, (int(code) for code in case.expected.split()), strict=True))
    refused = {role: code for role, code in expected.items() if code in REFUSED}
    got = {}
    for role in refused:
        with transaction.atomic():
            url = case.url(world)
            send = getattr(world.client(role), case.method)
            if case.multipart:
                response = send(url, body, format="multipart")
            else:
                response = send(url, body, format="json")
            transaction.set_rollback(True)
        got[role] = response.status_code
    assert got == refused

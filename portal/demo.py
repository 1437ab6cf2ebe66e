"""Demo data for ``make demo``: example clusters, projects, logins, the real sacct sample and
months of generated history, so that balances and charts have something to show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db.models import Max, Min, Sum
from django.utils import timezone

from accounting.carbon.footprint import IntensityStep
from accounting.carbon.services import grid_intensity_load
from accounting.clusters.selectors import cluster_get
from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_load
from accounting.costs.services import cost_model_version_create
from accounting.ledger.pipeline import jobs_import
from accounting.models import (
    Cluster,
    CostModelVersion,
    GridIntensity,
    Job,
    OverheadRun,
    Partition,
    UsageDaily,
)
from accounting.utilisation.overhead import overhead_run_compute
from allocations.grants.expiry import project_status_follow
from allocations.grants.services import allocation_grant
from allocations.models import Allocation, AllocationRound, PriorityPolicy
from allocations.outputs.services import OutputDetails, output_add
from allocations.priorities.services import (
    priority_actions_propose,
    priority_policy_set,
    profiling_coefficient_post,
)
from allocations.project_requests.services import (
    project_request_approve,
    project_request_create,
)
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_review_start,
    request_submit,
    review_assign,
    review_submit,
    round_create,
)
from allocations.slurm.enforcement import thresholds_check
from allocations.slurm.services import slurm_accounts_sync
from kit.calendar import add_months
from projects.access import project_is_writable
from projects.models import Membership, PoolPartition, Project, ResourcePool

DEMO_CLUSTER = "slurm-testbed"
HISTORY_DAYS = 180
HISTORY_LINES = 60_000  # about 14,000 jobs with their steps


@dataclass(frozen=True)
class DemoAccount:
    username: str
    password: str
    role: str
    is_staff: bool = False


DEMO_ACCOUNTS = (
    DemoAccount(
        "staff", "staff-demo-pw", "centre staff (admin), chair of the open round", is_staff=True
    ),
    DemoAccount(
        "alice", "alice-demo-pw", "researcher, PI of pawsey0001 (a top-up granted in part: appeal)"
    ),
    DemoAccount("bob", "bob-demo-pw", "researcher, PI of pawsey0002 and the archived pawsey0005"),
    DemoAccount(
        "carol",
        "carol-demo-pw",
        "researcher, PI of pawsey0003 and pawsey0004 (93 % used, ending soon: top-up, renewal, "
        "extension), reviewer in the open round",
    ),
    DemoAccount(
        "dave", "dave-demo-pw", "researcher without a project; his project request waits for staff"
    ),
)
DEMO_PIS = {
    "pawsey0001": "alice",
    "pawsey0002": "bob",
    "pawsey0003": "carol",
    "pawsey0004": "carol",
}


def _accounts() -> list[str]:
    user_model = get_user_model()
    lines = []
    for account in DEMO_ACCOUNTS:
        user, created = user_model.objects.get_or_create(username=account.username)
        if created or not user.has_usable_password():
            user.set_password(account.password)
            user.email = f"{account.username}@example.org"
            user.is_staff = user.is_superuser = account.is_staff
            user.save()
        lines.append(f"user {account.username}: {'created' if created else 'exists'}")
    return lines


def demo_load(*, examples: Path, report: Callable[[str], None] = print) -> None:
    """Load everything the demo shows; safe to run again (imports are idempotent)."""
    for path in sorted((examples / "clusters").glob("*.json")):
        result = cluster_apply(definition=cluster_definition_load(path), note="loaddemo")
        report(f"cluster {result.cluster.name}: {'loaded' if result.changed else 'unchanged'}")
        _cost_model(result.cluster, examples / "costmodels" / f"{result.cluster.name}.cost", report)
    sample = examples / "sacct"
    slurm_accounts_sync(
        lines=(sample / "sacctmgr_assoc.psv").read_text().splitlines(),
        cluster=cluster_get(name="setonix"),
    )
    for line in _accounts():
        report(line)
    for code, username in DEMO_PIS.items():
        project = Project.objects.get(code=code)
        pi = get_user_model().objects.get(username=username)
        if project.pi_id is None:
            project.pi = pi
            project.title = f"Demo project {code}"
            project.save(update_fields=["pi", "title"])
        Membership.objects.update_or_create(
            project=project, user=pi, defaults={"role": Membership.Role.PI}
        )

    cluster = Cluster.objects.get(name=DEMO_CLUSTER)
    _grid_intensity(cluster, report)
    for name in ("sacct_all_duplicates.psv", "sacct_all_allstates.psv"):
        with (sample / name).open() as lines:
            _, summary = jobs_import(cluster=cluster, lines=lines, source=f"demo sample {name}")
        report(f"import {name}: {summary.as_dict()}")

    # Months of history in the shape of the sample (benchmarks/sacct_generator.py), with what
    # each job used (the efficiency pages' data), generated once: a second loaddemo finds the
    # jobs already there and skips the generation.
    if not Job.objects.filter(cluster=cluster, job_name__startswith="bench-").exists():
        from benchmarks.sacct_generator import sacct_lines

        now = timezone.now()
        gap = int(HISTORY_DAYS * 86400 / (HISTORY_LINES / 4.2))
        # The real sample's hours stay the sample's: generated jobs keep off its nodes then.
        sampled = Job.objects.filter(cluster=cluster).aggregate(Min("start"), Max("end"))
        reserved = [(sampled["start__min"], sampled["end__max"])] if sampled["end__max"] else []
        history = sacct_lines(
            lines=HISTORY_LINES, seed=2026, start=now - timedelta(days=HISTORY_DAYS),
            mean_gap_seconds=gap, now=now, reserved=reserved,
            usage=True,  # what each job used: the efficiency pages and mail have data
        )  # fmt: skip
        _, summary = jobs_import(cluster=cluster, lines=history, source="demo history (generated)")
        report(f"import generated history: {summary.as_dict()}")
    _grants(cluster, report)
    _priorities(cluster, report)
    _overhead(cluster, report)
    _research_outputs(report)


# A few research outputs (docs/allocations.md, "Research outputs"): what the project page lists
# and exports, and what a reviewer reads at renewal.
DEMO_OUTPUTS = {
    "pawsey0003": (
        OutputDetails(
            kind="publication", title="Coral reef growth under marine heatwaves, simulated",
            authors="Carol, C. and Müller, J.", year=2025,
            venue="Journal of Computational Marine Science", doi="10.5555/demo.reef.2025",
        ),
        OutputDetails(
            kind="grant", title="Reef futures", funder="Australian Research Council",
            grant_number="DP250100001", amount=Decimal("480000"), currency="AUD",
            period_start=datetime(2025, 1, 1).date(), period_end=datetime(2027, 12, 31).date(),
        ),
        OutputDetails(
            kind="software", title="reefsim: a coral growth model",
            url="https://github.com/example/reefsim", year=2025,
        ),
    ),
    "pawsey0001": (
        OutputDetails(
            kind="publication", title="Regional climate downscaling at 1 km",
            authors="Alice, A.", year=2024, venue="Proceedings of SC24",
            doi="10.5555/demo.climate.2024",
        ),
    ),
}  # fmt: skip


def _research_outputs(report: Callable[[str], None]) -> None:
    for code, outputs in DEMO_OUTPUTS.items():
        project = Project.objects.get(code=code)
        if (
            project.research_outputs.exists()
            or project.pi is None
            or not project_is_writable(project)
        ):
            continue
        for details in outputs:
            output_add(project=project, actor=project.pi, details=details)
        report(f"research outputs of {code}: {len(outputs)} added")


def _cost_model(cluster: Cluster, path: Path, report: Callable[[str], None]) -> None:
    """The cluster's demo money cost model (examples/costmodels/<cluster>.cost), once: attached
    before the imports, it prices every demo job and money shows beside SU."""
    if not path.exists() or CostModelVersion.objects.filter(cluster=cluster).exists():
        return
    version = cost_model_version_create(
        cluster=cluster, name=path.stem, text=path.read_text(encoding="utf-8"),
        change_note="loaddemo",
    )  # fmt: skip
    report(f"cost model of {cluster.name}: v{version.number} ({version.currency})")


# An invented grid for the demo's CO2e: a constant, and over the history a day with solar
# (07:00-17:00 local) and a night without. Real figures come from the grid's operator.
DEMO_GRID = {"constant": Decimal(480), "day": Decimal(310), "night": Decimal(540)}


def _grid_intensity(cluster: Cluster, report: Callable[[str], None]) -> None:
    """The demo cluster's grid intensity, once: a constant and a day/night series."""
    if GridIntensity.objects.filter(cluster=cluster).exists():
        return
    Cluster.objects.filter(pk=cluster.pk).update(grid_intensity_g_per_kwh=DEMO_GRID["constant"])
    zone = cluster.zoneinfo
    first = timezone.now().astimezone(zone).date() - timedelta(days=HISTORY_DAYS + 1)
    steps = []
    for offset in range(HISTORY_DAYS + 3):
        day = first + timedelta(days=offset)
        for hour, kind in ((7, "day"), (17, "night")):
            starts_at = datetime.combine(day, time(hour), tzinfo=zone)
            steps.append(IntensityStep(starts_at=starts_at, g_per_kwh=DEMO_GRID[kind]))
    result = grid_intensity_load(cluster=cluster, steps=steps)
    report(f"grid intensity of {cluster.name}: {result}")


# How much of its current budget period each demo project has used: the dashboard then shows
# a calm project, a busy one and two past the 75 % alert.
DEMO_USE = {"pawsey0001": "0.45", "pawsey0002": "0.62", "pawsey0003": "0.8", "pawsey0004": "0.93"}
DEMO_ENDING = "pawsey0004"  # its grant ends with the current quarter


def _grants(cluster: Cluster, report: Callable[[str], None]) -> None:
    """Pools, a year of grants whose current quarter began 50 days ago, and an open round."""
    staff = get_user_model().objects.get(username="staff")
    pools = {}
    # Setonix's accounts: pawsey0001 in the CPU pool, pawsey0001-gpu in the GPU pool.
    for key, partition, suffix in (("CPU", "work", ""), ("GPU", "gpu", "-gpu")):
        pool, _ = ResourcePool.objects.get_or_create(
            name=f"testbed {key}", cluster=cluster, defaults={"slurm_account_suffix": suffix}
        )
        PoolPartition.objects.get_or_create(
            partition=Partition.objects.get(cluster=cluster, name=partition),
            defaults={"pool": pool},
        )
        pools[key] = pool
    if Allocation.objects.exists():
        return
    start = timezone.localdate() - timedelta(days=50)
    end = start.replace(year=start.year + 1)
    quarter_end = add_months(start, 3)
    for code, share in DEMO_USE.items():
        project = Project.objects.get(code=code)
        # pawsey0004's grant is this quarter alone: it ends within 60 days, so its page offers
        # a renewal into the open round and an extension beside the top-up its alert offers.
        ends = quarter_end if code == DEMO_ENDING else end
        for pool in pools.values():
            used = UsageDaily.objects.filter(
                project=project, partition__in=pool.partitions.all(), day__gte=start,
                day__lt=quarter_end,
            ).aggregate(total=Sum("service_units"))["total"] or Decimal(0)  # fmt: skip
            quarter = max((used / Decimal(share)).quantize(Decimal(1)), Decimal(100))
            allocation_grant(
                project=project, pool=pool, amount=quarter * (4 if ends == end else 1),
                period_start=start, period_end=ends, actor=staff, reason="demo grant",
            )  # fmt: skip
    report(
        f"grants: 4 projects x 2 pools, {start} .. {end}, quarterly budgets; {DEMO_ENDING}'s "
        f"ends on {quarter_end} (renewal, extension and, "
        f"{Decimal(DEMO_USE[DEMO_ENDING]):.0%} used, a top-up)"
    )
    thresholds_check()
    now = timezone.now()
    round_ = round_create(
        name=f"{end.year} merit round", opens_at=now - timedelta(days=3),
        closes_at=now + timedelta(days=25), period_start=end,
        period_end=end.replace(year=end.year + 1),
        # Less than bob's request under review asks (120,000 and 30,000 SU), and far less than
        # his and alice's: the round is oversubscribed, and the chair's what-if cuts.
        available={pools["CPU"]: Decimal(100_000), pools["GPU"]: Decimal(20_000)},
        chair=staff, committee=[get_user_model().objects.get(username="carol")], actor=staff,
        requires_progress_report=True,
    )  # fmt: skip
    report(
        "an open allocation round: staff chairs it, carol reviews; alice's request waits to be "
        "opened, bob's is under review (carol assigned: she reads his record), carol's is a "
        "draft; the round is oversubscribed (its what-if cuts bob's request to fit); a renewal "
        "in it carries a progress report (pawsey0004's grant is ending: renew it)"
    )
    _requests(round_, pools)
    _lifecycle(pools, report)


def _requests(round_: AllocationRound, pools: dict[str, ResourcePool]) -> None:
    """Requests at each step of the journey, so every role has something to do: alice's is
    submitted (the chair opens it), bob's is under review with carol's score (the chair decides),
    carol's own project has a draft (she submits it)."""
    users = {user.username: user for user in get_user_model().objects.all()}
    projects = {project.code: project for project in Project.objects.all()}
    staging = (
        ("pawsey0001", "alice", "Ensembles of the next climate campaign.", "submitted"),
        ("pawsey0002", "bob", "Assembly of 400 genomes.", "under review"),
        ("pawsey0003", "carol", "Imaging of the new survey fields.", "draft"),
    )
    for code, pi, justification, stage in staging:
        request = request_create(
            round_=round_, project=projects[code], actor=users[pi],
            justification=justification,
            amounts={pools["CPU"]: Decimal(120_000), pools["GPU"]: Decimal(30_000)},
        )  # fmt: skip
        if stage == "draft":
            continue
        request_submit(request=request, actor=users[pi])
        if stage == "under review":
            request_review_start(request=request, actor=users["staff"])
            # The chair assigns carol: she reads the applicant's record on the review page.
            review_assign(request=request, reviewer=users["carol"], actor=users["staff"])
            review_submit(
                request=request, reviewer=users["carol"], score=4, comment="A clear plan."
            )


def _lifecycle(pools: dict[str, ResourcePool], report: Callable[[str], None]) -> None:
    """The rest of the allocation lifecycle (docs/allocations.md), through the real services:
    alice's top-up granted in part (her project page offers an appeal and the decision
    letter), dave's project request
    waiting in staff's queue, and bob's earlier project whose grant ended long ago (expired,
    then archived: read-only)."""
    users = {user.username: user for user in get_user_model().objects.all()}
    project = Project.objects.get(code="pawsey0001")
    quarter = next(
        grant.granted_su for grant in project.allocations.filter(pool=pools["CPU"])
    ) / 4  # fmt: skip
    asked = max((quarter / 500).to_integral_value() * 100, Decimal(200))  # a fifth, in hundreds
    top_up = request_create(
        project=project, actor=users["alice"], kind="top_up",
        justification="The campaign's last ensemble needs more SU this quarter.",
        amounts={pools["CPU"]: asked},
    )  # fmt: skip
    request_submit(request=top_up, actor=users["alice"])
    request_decide(
        request=top_up, actor=users["staff"], granted={pools["CPU"]: asked / 2},
        reason="Half now; the rest from the next round.",
    )  # fmt: skip
    project_request_create(
        requester=users["dave"], title="Turbulence in stellar convection zones",
        abstract="Direct numerical simulation of convection in Sun-like stars.",
        field_of_science="Astronomy and astrophysics",
        amounts={pools["CPU"].name: "50000", pools["GPU"].name: "5000"},
    )  # fmt: skip
    today = timezone.localdate()
    old = project_request_create(
        requester=users["bob"], title="Pilot genome assembly",
        abstract="The pilot for the 400-genome assembly.", field_of_science="Biological sciences",
        amounts={pools["CPU"].name: "20000"},
    )  # fmt: skip
    project_request_approve(
        request=old, actor=users["staff"], period_start=today - timedelta(days=500),
        period_end=today - timedelta(days=135),
    )  # fmt: skip
    assert old.project is not None
    statuses = project_status_follow(project=old.project, today=today)
    report(
        f"lifecycle: alice's top-up granted in part (she may appeal; its decision letter is on "
        f"the request's page), dave's project request "
        f"waits for staff, bob's {old.project.code} ended {today - timedelta(days=135)} and is "
        f"{' then '.join(statuses) or old.project.status}"
    )


# Profilers' coefficients K_prof of the demo projects: below K1, between, above K2, and one
# project measured per job (its K is the SU-weighted mean of its jobs').
DEMO_K_PROF = {"pawsey0001": "0.35", "pawsey0002": "0.55", "pawsey0003": "0.82"}


def _overhead(cluster: Cluster, report: Callable[[str], None]) -> None:
    """True overhead of the last seven whole days (the overhead page's default window), so the
    page and the jobs' fair-share boxes show something. Once: skipped when a run exists."""
    if OverheadRun.objects.filter(cluster=cluster).exists():
        return
    today = timezone.localtime(timezone.now(), cluster.zoneinfo).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    run = overhead_run_compute(
        cluster=cluster, start=today - timedelta(days=7), end=today, step="hour"
    )
    report(f"true overhead of {cluster.name}, last 7 days: run {run.pk} {run.status}, "
           f"{run.jobs_seen} jobs")  # fmt: skip


def _priorities(cluster: Cluster, report: Callable[[str], None]) -> None:
    """A dynamic priority policy (Figure 2's shape, Pr_base 1000) with a few K_prof and the
    Slurm commands they propose; execution stays off. Once: skipped when a policy exists."""
    if PriorityPolicy.objects.filter(cluster=cluster).exists():
        return
    staff = get_user_model().objects.get(username="staff")
    priority_policy_set(
        cluster=cluster, base_priority=1000, k1="0.4", k2="0.7", c0="0.5", c1="1", c2="3",
        updated_by=staff,
    )  # fmt: skip
    for code, k_prof in DEMO_K_PROF.items():
        profiling_coefficient_post(
            cluster=cluster, project=Project.objects.get(code=code), k_prof=k_prof,
            note="demo profiler run", posted_by=staff,
        )  # fmt: skip
    project = Project.objects.get(code="pawsey0004")
    jobs = Job.objects.filter(cluster=cluster, project=project, run="", service_units__gt=0)
    for job, k_prof in zip(jobs.order_by("-service_units")[:2], ("0.6", "0.75"), strict=False):
        profiling_coefficient_post(
            cluster=cluster, project=project, job=job, k_prof=k_prof, posted_by=staff
        )
    proposed = priority_actions_propose(cluster=cluster)
    report(f"dynamic priority on {cluster.name}: a policy, {len(proposed)} proposed commands")

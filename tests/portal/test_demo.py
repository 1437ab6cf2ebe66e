"""``make demo``'s data load, in a fresh interpreter on SQLite as a first-time user runs it: its
output is the logins and a line per step, not mail bodies or warnings."""

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _manage(args: list[str], var_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update({"PORTAL_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "portal.settings"})
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The demo loaded once, into its own SQLite database: its folder and loaddemo's run."""
    var_dir = tmp_path_factory.mktemp("demo")
    assert _manage(["migrate", "--noinput", "-v0"], var_dir).returncode == 0
    loaded = _manage(["loaddemo"], var_dir)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    return var_dir, loaded


def test_the_demo_prints_logins_with_their_roles_and_files_its_mail(demo):
    tmp_path, loaded = demo
    output = loaded.stdout + loaded.stderr
    assert "No hostname was supplied" not in output  # kombu, about the in-process broker
    assert "Subject:" not in output  # budget-alert mails went to files, not the terminal
    assert "celery.app.trace" not in output
    assert "chair of the open round" in output
    assert "reviewer in the open round" in output
    mails = list((tmp_path / "mail").glob("*.log"))
    assert mails, "the demo's budget alerts were not written to var/mail/"
    assert f"{tmp_path / 'mail'}/" in output
    # The committee journey has something at each step (issue 16, item 3).
    assert "alice's request waits to be opened, bob's is under review" in output


LIFECYCLE_CHECK = """
import json
from datetime import timedelta
from django.utils import timezone
from allocations.models import Allocation, AllocationRequest, ProjectRequest
from projects.models import Membership, Project
today = timezone.localdate()
print(json.dumps({
    "dave_projects": Membership.objects.filter(user__username="dave").count(),
    "waiting": list(ProjectRequest.objects.filter(state="submitted").values_list(
        "requester__username", flat=True)),
    "ending": sorted({a.project.code for a in Allocation.objects.filter(
        period_end__gt=today, period_end__lte=today + timedelta(days=60))}),
    "appealable": [(r.project.code, r.kind) for r in AllocationRequest.objects.filter(
        state="partially_granted", appeals__isnull=True)],
    "archived": list(Project.objects.filter(status="archived").values_list("code", flat=True)),
}))
"""


def test_the_demo_shows_each_step_of_the_allocation_lifecycle(demo):
    """Issue 27's journeys have something to show without setup: a user without a project and
    a project request in staff's queue, pawsey0004 near exhaustion with its grant ending within
    60 days (top-up, renewal, extension), a partial decision to appeal, an archived project."""
    output = demo[1].stdout
    assert "dave's project request waits for staff" in output
    assert "pawsey0004's ends on" in output
    assert "93% used, a top-up" in output
    assert "pawsey0005 ended" in output
    assert "expired then archived" in output
    checked = _manage(["shell", "-c", LIFECYCLE_CHECK], demo[0])
    assert checked.returncode == 0, checked.stderr[-2000:]
    found = json.loads(checked.stdout.strip().splitlines()[-1])
    assert found["dave_projects"] == 0
    assert found["waiting"] == ["dave"]
    assert found["ending"] == ["pawsey0004"]
    assert found["appealable"] == [["pawsey0001", "top_up"]]
    assert found["archived"] == ["pawsey0005"]


HOURLY_CHECK = """
import json
from datetime import timedelta
from django.utils import timezone
from accounting.models import Cluster
from accounting.utilisation.selectors import utilisation_report_get
cluster = Cluster.objects.get(name="slurm-testbed")
end = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
report = utilisation_report_get(
    cluster=cluster, start=end - timedelta(days=182), end=end, step="hour"
)
figures = [w.total for w in report.windows] + [
    p for w in report.windows for p in w.partitions.values()
]
print(json.dumps({
    "hours": len(report.windows),
    "flagged": sum(f.overcommitted for f in figures),
    "core": float(max(f.core_percent or 0 for f in figures)),
    "gpu": float(max(f.gpu_percent or 0 for f in figures)),
    "q": float(max(f.q_percent or 0 for f in figures)),
    "mean_core": float(sum(w.total.core_percent or 0 for w in report.windows))
    / len(report.windows),
}))
"""


def test_no_hour_of_the_demo_history_is_above_100_percent(demo):
    """Issue 16, item 1: the demo's months of jobs by the hour, as the utilisation page shows
    them. Every hour's core, GPU and Q(T) figures stay at or below 100 %, and the machine is
    busy enough for the charts to show something."""
    checked = _manage(["shell", "-c", HOURLY_CHECK], demo[0])
    assert checked.returncode == 0, checked.stderr[-2000:]
    figures = json.loads(checked.stdout.strip().splitlines()[-1])
    assert figures["hours"] > 24 * 180
    assert figures["flagged"] == 0, figures
    assert max(figures["core"], figures["gpu"], figures["q"]) <= 100, figures
    assert figures["mean_core"] > 30, figures


OUTPUTS_CHECK = """
import json
from allocations.models import ResearchOutput
print(json.dumps(sorted(
    [o.project.code, o.kind, o.doi or o.url or o.funder] for o in ResearchOutput.objects.all()
)))
"""


def test_the_demo_projects_have_research_outputs_to_list_and_export(demo):
    """A publication with a DOI, a funding grant and software with its URL on pawsey0003, and a
    paper of pawsey0001: the project page's "Research outputs" has something to show."""
    assert "research outputs of pawsey0003: 3 added" in demo[1].stdout
    checked = _manage(["shell", "-c", OUTPUTS_CHECK], demo[0])
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert json.loads(checked.stdout.strip().splitlines()[-1]) == [
        ["pawsey0001", "publication", "10.5555/demo.climate.2024"],
        ["pawsey0003", "grant", "Australian Research Council"],
        ["pawsey0003", "publication", "10.5555/demo.reef.2025"],
        ["pawsey0003", "software", "https://github.com/example/reefsim"],
    ]


MONEY_CHECK = """
import json
from datetime import timedelta
from decimal import Decimal
from django.db.models import Max, Min, Sum
from django.utils import timezone
from accounting.costs.coststats import cost_statistics
from accounting.costs.services import cost_model_of, cost_model_versions, cost_table_get
from accounting.models import Cluster, Job
from portal.demo import DEMO_CLUSTER, HISTORY_DAYS
cluster = Cluster.objects.get(name=DEMO_CLUSTER)
since = timezone.now() - timedelta(days=HISTORY_DAYS)
jobs = Job.objects.filter(cluster=cluster, end__gte=since).exclude(
    charge_state=Job.ChargeState.PENDING).exclude(nodelist="")
span = jobs.aggregate(first=Min("start"), last=Max("end"), stored=Sum("cost"))
window = (span["last"] - span["first"]).total_seconds()
model = cost_model_of(cost_model_versions(cluster=cluster)[0])
stats = cost_statistics(cost_table_get(
    model=model, cluster=cluster, start=since, end=span["last"] + timedelta(seconds=1)))
sums = {column.key: column_stats.sum for column, column_stats in zip(
    stats.columns, stats.statistics, strict=True)}
sets = {}
for node_set in model.node_sets:
    money = sum(sums[f"rate:{node_set.name}:{rate.name}"] for rate in node_set.rates
                if rate.kind == "time")
    bound = node_set.time_unit_cost * node_set.node_count * int(window)
    sets[node_set.name] = [str(money), str(Decimal(bound.numerator) / bound.denominator)]
print(json.dumps({"nodes_are": model.nodes_are, "jobs": stats.job_count, "sets": sets,
                  "stored": str(span["stored"]), "recomputed": str(sums["total"])}))
"""


def test_the_demo_jobs_never_cost_more_than_the_machine(demo):
    """Issue 29, item 1: over the demo's history the time rates the jobs of each node set pay
    add up to at most the set's rates x its nodes x the window (the jobs share nodes and pay
    their share), and the costs the import stored are the ones coststats computes again."""
    checked = _manage(["shell", "-c", MONEY_CHECK], demo[0])
    assert checked.returncode == 0, checked.stderr[-2000:]
    figures = json.loads(checked.stdout.strip().splitlines()[-1])
    assert figures["nodes_are"] == "shared"
    assert figures["jobs"] > 2000
    for name, (money, bound) in figures["sets"].items():
        assert 0 < Decimal(money) <= Decimal(bound), (name, figures)
    # Stored to 6 places per job, recomputed exactly: they differ by rounding at most.
    rounding = Decimal("0.0000005") * figures["jobs"]
    assert abs(Decimal(figures["stored"]) - Decimal(figures["recomputed"])) <= rounding, figures

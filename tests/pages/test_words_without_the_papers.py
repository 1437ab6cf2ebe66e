"""No page needs the papers to be understood (issue 31, item 3): the words of the papers
("canonical units", "core-equivalent", "K_prof", "Tables II-IV", "Volovich et al.", ...) and
raw Slurm states wait in a ``<details class="how">`` fold, and the page says the same in plain
words. Chart titles and axis titles count as page text (they are in the figure JSON)."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.db.models import F
from django.urls import reverse

from accounting.clusters.efficiency import Held, JobUsage, Request, waste_of
from accounting.models import Job, Partition
from accounting.utilisation.overhead import overhead_run_compute
from tests.pages.conftest import client_for

pytestmark = pytest.mark.django_db

# The papers' words and Slurm's raw spellings; each has plain words on the page.
JARGON = re.compile(
    r"Slurm billing|\bTables? (?:I|II|III|IV)\b|SM/peak|as corrected|K_prof|[Cc]anonical[- ]unit"
    r"|core-equivalent|Volovich|PeCoH|\beqs? \d|\bequations? \d|\b[Ss]ection \d|Figure \d"
    r"|\b(?:RUNNING|COMPLETED|FAILED|CANCELLED|TIMEOUT)\b"
)
FOLD = re.compile(r'<details class="how">.*?</details>', re.S)
SCRIPTS = re.compile(r'<script(?! type="application/json").*?</script>', re.S)
TAGS = re.compile(r"<[^>]+>")


def visible(html: str) -> str:
    """What a reader sees without opening the folds, chart titles included."""
    return TAGS.sub(" ", SCRIPTS.sub(" ", FOLD.sub(" ", html)))


def running_job(site) -> Job:
    """A job of pawsey0003 still running, as sacct reports it mid-run."""
    job = Job.objects.filter(project=site.project, charge_state="charged").order_by("pk").last()
    assert job is not None
    Job.objects.filter(pk=job.pk).update(
        state="RUNNING", state_raw="RUNNING", exit_code="1:0", end=None, charge_state="pending",
        pending_service_units=Decimal("12.5"),
    )  # fmt: skip
    return job


def pages_by_role(site) -> dict[str, dict[str, str]]:
    code = site.project.code
    gpu = Partition.objects.get(cluster=site.cluster, name="gpu")
    member = {
        "dashboard": "/",
        "project": reverse("allocations:project-detail", args=[code]),
        "jobs": reverse("accounting:project-jobs", args=[code]),
        "job": reverse("accounting:job-detail", args=[site.job.pk]),
        "running job": reverse("accounting:job-detail", args=[running_job(site).pk]),
        "efficiency": reverse("accounting:project-efficiency", args=[code]),
        "energy": reverse("accounting:project-energy", args=[code]),
        "partitions": reverse("accounting:partition-list"),
        "quote": reverse("accounting:quote") + f"?partition={gpu.pk}&nodes=1&hours=3",
        "explorer": reverse("accounting:cost-ratio"),
    }
    staff = {
        **member,
        "utilisation": reverse("accounting:utilisation"),
        "overhead": reverse("accounting:overhead"),
        "efficiency top": reverse("accounting:efficiency-top"),
        "priorities": reverse("allocations:priorities"),
        "cost models": reverse("accounting:cost-models", args=[site.cluster.name]),
        "cost distribution": reverse("accounting:cost-distribution"),
        "grid intensity": reverse("accounting:grid-intensity", args=[site.cluster.name]),
        "enforcement": reverse("allocations:enforcement-list"),
    }
    committee = {
        "rounds": reverse("allocations:round-list"),
        "round": reverse("allocations:round-detail", args=[site.round.pk]),
        "request": reverse("allocations:request-detail", args=[site.request.pk]),
    }
    return {"member": member, "pi": member, "committee": committee, "chair": committee,
            "staff": staff}  # fmt: skip


def test_no_page_of_the_main_roles_shows_the_papers_words_outside_a_fold(site):
    job = site.job
    start = job.start.replace(hour=0, minute=0, second=0, microsecond=0)
    run = overhead_run_compute(cluster=site.cluster, start=start, end=job.end, step="hour")
    found = {}
    for role, pages in pages_by_role(site).items():
        client = client_for(site.users[role])
        for name, url in pages.items():
            if name == "overhead":
                url = f"{url}?run={run.pk}"
            response = client.get(url)
            assert response.status_code == 200, (role, name)
            words = sorted(set(JARGON.findall(visible(response.content.decode()))))
            if words:
                found[f"{role}: {name}"] = words
    assert found == {}


def test_a_running_job_reads_running_without_an_exit_code(site):
    job = running_job(site)
    page = client_for(site.users["member"]).get(reverse("accounting:job-detail", args=[job.pk]))
    text = visible(page.content.decode())
    assert "RUNNING" not in text
    assert "exit" not in text
    assert re.search(r"on \S+ · running\b", text)


def test_a_job_state_reads_as_words_with_the_exit_code_only_when_it_failed():
    assert Job(state="RUNNING", exit_code="1:0").state_words == "running"
    assert Job(state="COMPLETED", exit_code="0:0", end=None).state_words == "completed"
    assert Job(state="FAILED", exit_code="2:0").state_words == "failed (exit code 2)"
    assert Job(state="OUT_OF_MEMORY", exit_code="0:125").state_words == "out of memory"
    assert Job(state="TIMEOUT", exit_code="0:15").state_words == "timed out"
    assert Job(state="NODE_FAIL", exit_code="").state_words == "node failure"


def test_unused_cores_beside_nothing_left_on_the_table_name_the_gpus_as_what_set_the_charge():
    from accounting.clusters import charging

    gpu_node = charging.PartitionSpec(
        name="gpu", sockets=1, cores_per_socket=64, memory_mb=256_000, gpus=8,
        cpu_tdp_watts=Decimal(280), gpu_tdp_watts=Decimal(560),
    )  # fmt: skip
    held = Held(nnodes=1, cpus=64, memory_mb=Decimal(256_000), gpus=8, elapsed_seconds=3600,
                timelimit_minutes=60)  # fmt: skip
    usage = JobUsage(cpu_seconds=Decimal(31.8 * 3600), memory_peak_mb=Decimal(200_000),
                     gpu_utilisation=Decimal(100))  # fmt: skip
    waste = waste_of(gpu_node, held, usage, Request(32, Decimal(256_000), 8), dominant="gpus")
    assert waste.words == "asked for 64 cores, used 31.8"
    assert waste.resource == "cores"
    assert waste.set_the_charge == "the GPUs set the charge, not the cores: they cost nothing more"


def test_the_job_page_says_the_gpus_set_the_charge_beside_unused_cores(site):
    """A GPU job that held a whole node and used half its cores: nothing is left on the table,
    and the page says why instead of a bare "asked for 64 cores, used 31.8"."""
    gpu = Partition.objects.get(cluster=site.cluster, name="gpu")
    job = Job.objects.filter(partition=gpu, charge_state="charged").order_by("pk").first()
    assert job is not None
    assert job.partition_version is not None
    version = job.partition_version
    elapsed = 3600
    Job.objects.filter(pk=job.pk).update(
        project=site.project, nnodes=1, cpus=version.cores_per_node, gpus=version.gpus,
        memory_mb=Decimal(version.memory_mb) / 2, elapsed_seconds=elapsed,
        cpu_seconds_used=Decimal(elapsed * version.cores_per_node) * Decimal("0.497"),
        memory_peak_mb=Decimal(1024), gpu_utilisation=Decimal(100), dominant_resource="gpus",
        right_sized_service_units=F("service_units"),
    )  # fmt: skip
    page = client_for(site.users["member"]).get(reverse("accounting:job-detail", args=[job.pk]))
    text = " ".join(visible(page.content.decode()).split())
    cores = version.cores_per_node
    used = f"{cores * 0.497:.1f}"
    assert (
        f"0.00 SU: the job asked for {cores} cores, used {used}; "
        "the GPUs set the charge, not the cores: they cost nothing more"
    ) in text

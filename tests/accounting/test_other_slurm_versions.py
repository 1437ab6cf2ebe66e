"""Real sacct output of other Slurm versions, published by other open-source projects for their
own tests (tests/data/sacct_versions/PROVENANCE.md says where each file comes from and under
which licence). Each is imported through the importer's real entry point; every line must land
in its bucket, and every charge must equal the formula computed here from the file's own
columns, independently of the importer's parser.

The hardware of those clusters is not published with the files: the partitions below are
modelled (cores and memory at least what the largest job used), which is all the formula
needs to be checked.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounting.clusters.services import cluster_apply
from accounting.clusters.specs import cluster_definition_parse
from accounting.ledger.pipeline import BUCKETS, ImportSummary, jobs_import
from accounting.ledger.sources import sacct_stream_import
from accounting.models import Cluster, Job, QuarantinedRecord

DATA = Path(__file__).resolve().parents[1] / "data" / "sacct_versions"
XDMOD_COLUMNS = (
    "jobid,jobidraw,cluster,partition,account,group,gid,user,uid,submit,eligible,start,end,"
    "elapsed,exitcode,state,nnodes,ncpus,reqcpus,reqmem,reqgres,reqtres,timelimit,nodelist,"
    "jobname"
)
SU = Decimal("0.000001")

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Node:
    cores: int
    memory_mb: int
    gpus: int = 0


def _cluster(name: str, slurm_name: str, partitions: dict[str, Node]) -> Cluster:
    definition = cluster_definition_parse(
        {
            "name": name,
            "slurm_cluster_name": slurm_name,
            "partitions": [
                {
                    "name": partition,
                    "nodelist": f"{partition}[001-100]",
                    "sockets": 2,
                    "cores_per_socket": node.cores // 2,
                    "memory_mb": node.memory_mb,
                    "gpus": node.gpus,
                    "cpu_tdp_watts": 150,
                    **({"gpu_tdp_watts": 300} if node.gpus else {}),
                }
                for partition, node in partitions.items()
            ],
        }
    )
    cluster_apply(definition=definition)
    return Cluster.objects.get(name=name)


def _seconds(elapsed: str) -> int:
    days, _, clock = elapsed.rpartition("-")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


def _memory_mb(req_mem: str, *, cpus: int, nodes: int) -> Decimal:
    """ReqMem of Slurm before 21.08, per node ("n") or per CPU ("c"), as the job's total."""
    number, unit, per = req_mem[:-2], req_mem[-2], req_mem[-1]
    scale = {"K": Decimal(1) / 1024, "M": Decimal(1), "G": Decimal(1024)}
    value = Decimal(number) * scale[unit]
    if value >= 2**31:  # the MEM_PER_CPU flag bit that some 16.05 builds printed
        value, per = value - 2**31, "c"
    return value * (nodes if per == "n" else cpus)


def _expected_su(
    *, weight: Decimal, node: Node, nodes: int, cpus: int, memory_mb: Decimal, gpus: int,
    seconds: int,
) -> Decimal:  # fmt: skip
    """Eq. 3 of DESIGN.md with the job split evenly over its nodes."""
    shares = [Decimal(cpus) / nodes / node.cores, memory_mb / nodes / node.memory_mb]
    if node.gpus:
        shares.append(Decimal(gpus) / nodes / node.gpus)
    return (weight * Decimal(seconds) / 3600 * nodes * max(shares)).quantize(SU)


def _adds_up(summary: ImportSummary) -> bool:
    return sum(getattr(summary, name) for name in BUCKETS) == summary.lines


def _weights(cluster: Cluster) -> dict[str, Decimal]:
    return {
        partition.name: partition.versions.get().weight for partition in cluster.partitions.all()
    }


# --------------------------------------------------------------------------------------
# Open XDMoD's reference data: Slurm ~16.05, --noheader, ReqMem per node, no AllocTRES

XDMOD_NODES = {
    "black": Node(cores=12, memory_mb=48_000),
    "crumpet": Node(cores=12, memory_mb=48_000),
    "focaccia": Node(cores=12, memory_mb=128_000, gpus=2),
}


def test_open_xdmod_reference_data_of_slurm_16_05_is_charged_line_for_line() -> None:
    cluster = _cluster("ccr", "phillips", XDMOD_NODES)
    path = DATA / "xdmod_phillips_2016-12_noheader.psv"

    with path.open("rb") as stream:
        summary = sacct_stream_import(
            stream, cluster=cluster, source="xdmod", columns=XDMOD_COLUMNS,
            create_projects=True,
        )[1]  # fmt: skip

    assert summary.lines == 4285
    assert _adds_up(summary)
    assert summary.quarantined == 0, list(QuarantinedRecord.objects.values_list("reason"))
    assert summary.charged == 4285
    weights = _weights(cluster)
    jobs = {job.job_id_raw: job for job in Job.objects.all()}
    for line in path.read_text().splitlines():
        row = dict(zip(XDMOD_COLUMNS.split(","), line.split("|"), strict=True))
        cpus, nodes = int(row["ncpus"]), int(row["nnodes"])
        job = jobs[row["jobidraw"]]
        expected = _expected_su(
            weight=weights[row["partition"]], node=XDMOD_NODES[row["partition"]], nodes=nodes,
            cpus=cpus, memory_mb=_memory_mb(row["reqmem"], cpus=cpus, nodes=nodes),
            gpus=int(row["reqgres"].rpartition(":")[2] or 0), seconds=_seconds(row["elapsed"]),
        )  # fmt: skip
        assert job.service_units == expected, row
        assert job.warnings == [
            "no AllocTRES column: charged from NCPUS, ReqMem and the GPUs requested"
        ]


def test_the_flag_bit_of_old_per_cpu_requests_is_read_as_3000_mb_per_cpu() -> None:
    _cluster("ccr", "phillips", XDMOD_NODES)
    line = next(
        line
        for line in (DATA / "xdmod_phillips_2016-12_noheader.psv").read_text().splitlines()
        if "|2147486648Mn|" in line
    )
    cluster = Cluster.objects.get(name="ccr")

    jobs_import(cluster=cluster, lines=[line], source="t", columns=XDMOD_COLUMNS,
                create_projects=True)  # fmt: skip

    job = Job.objects.get()
    assert job.memory_mb == 3000 * job.cpus


# --------------------------------------------------------------------------------------
# slurm2sql's Aalto data: Slurm 18.08/19.05, --delimiter=';|;', KiB ReqMem per node and CPU

AALTO_NODES = {
    "jupyter-long": Node(cores=24, memory_mb=128_000),
    "interactive": Node(cores=24, memory_mb=128_000),
}


def test_slurm2sql_data_with_a_three_character_delimiter_is_charged() -> None:
    cluster = _cluster("triton", "triton", AALTO_NODES)
    path = DATA / "slurm2sql_aalto_2019_reqmem-Kn-Kc.txt"

    with path.open("rb") as stream:
        summary = sacct_stream_import(
            stream, cluster=cluster, source="aalto", create_projects=True
        )[1]

    assert (summary.lines, summary.steps_skipped, summary.charged) == (5, 3, 2)
    assert _adds_up(summary)
    weights = _weights(cluster)
    lines = path.read_text().splitlines()
    names = lines[0].split(";|;")
    for line in lines[1:]:
        row = dict(zip(names, line.split(";|;"), strict=True))
        if "." in row["JobID"]:
            continue
        cpus, nodes = int(row["NCPUS"]), int(row["NNodes"])
        expected = _expected_su(
            weight=weights[row["Partition"]], node=AALTO_NODES[row["Partition"]], nodes=nodes,
            cpus=cpus, memory_mb=_memory_mb(row["ReqMem"], cpus=cpus, nodes=nodes), gpus=0,
            seconds=_seconds(row["Elapsed"]),
        )  # fmt: skip
        job = Job.objects.get(job_id_raw=row["JobIDRaw"])
        assert job.service_units == expected
        assert job.state_raw == row["State"]


# --------------------------------------------------------------------------------------
# Dumps that cannot be charged say why, and change nothing


@pytest.mark.parametrize(
    ("name", "arguments", "missing"),
    [
        ("pytokio_nersc-edison_2017-03.psv", [], "JobID, User, Submit, NNodes"),
        (
            "jobinfo_peregrine_2021-07_noheader_snowman.txt",
            ["--columns", "JobID,JobName,User,Partition,NodeList,NNodes,ncpus,NTasks,State,"
             "Submit,start,end,timelimit,elapsed,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,"
             "TRESUsageInTot,TRESUsageOutTot,MaxDiskWrite,MaxDiskRead,MaxRSSNode,"
             "MaxDiskWriteNode,MaxDiskReadNode,Comment", "--delimiter", "\u2603"],
            "JobIDRaw, Account",
        ),
    ],
)  # fmt: skip
def test_a_dump_without_the_columns_a_charge_needs_names_them(
    name: str, arguments: list[str], missing: str
) -> None:
    _cluster("other", "other", {"work": Node(cores=128, memory_mb=245_000)})

    with pytest.raises(CommandError, match=f"lacks required columns: {missing}"):
        call_command("import_sacct", str(DATA / name), "--cluster", "other", *arguments)
    assert not Job.objects.exists()


def test_hb_jobinfo_of_slurm_23_reads_every_line_before_it_misses_the_account() -> None:
    # Hábrók's dump has AllocTRES with typed GPUs but no Account: the header says so.
    _cluster("habrok", "habrok", {"gpu": Node(cores=64, memory_mb=500_000, gpus=4)})
    columns = (
        "JobID,JobName,User,Partition,NodeList,NNodes,NCPUs,NTasks,State,Submit,Start,End,"
        "Timelimit,Elapsed,TotalCPU,CPUTime,UserCPU,SystemCPU,ReqMem,MaxRSS,MaxVMSize,ReqTRES,"
        "AllocTRES,TRESUsageInMax,TRESUsageInTot,TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,"
        "MaxRSSNode,MaxRSSTask,MaxVMSizeNode,MaxVMSizeTask,MaxDiskReadNode,MaxDiskReadTask,"
        "MaxDiskWriteNode,MaxDiskWriteTask,Comment"
    )

    with pytest.raises(CommandError, match="JobIDRaw, Account"):
        call_command(
            "import_sacct", str(DATA / "hbjobinfo_habrok_2023-24_noheader_snowman.txt"),
            "--cluster", "habrok", "--columns", columns, "--delimiter", "\u2603",
        )  # fmt: skip


# --------------------------------------------------------------------------------------
# Slurm-web's recorded slurmrestd answers: data_parser v0.0.40 to v0.0.43 (Slurm 23.11-25.05)

HPC_NODES = {
    name: Node(cores=64, memory_mb=256_000) for name in ("standard", "batch", "ia", "normal")
}


@pytest.mark.parametrize(
    ("name", "cpus", "memory_mb", "seconds", "bucket"),
    [
        ("slurmweb_slurmrestd-23.11.10_v0.0.40_job-completed.json", 1, 512, 1, "charged"),
        ("slurmweb_slurmrestd-24.05.3_v0.0.41_job-completed.json", 1, 512, 1, "charged"),
        ("slurmweb_slurmrestd-24.11.5_v0.0.42_job-completed.json", 32, 16384, 61, "charged"),
        ("slurmweb_slurmrestd-24.11.5_v0.0.42_job-gpus-multi-nodes.json", 2, 1024, 1, "pending"),
        ("slurmweb_slurmrestd-25.05.4_v0.0.43_job-completed.json", 16, 8192, 60, "charged"),
    ],
)
def test_json_of_each_data_parser_version_is_charged(
    name: str, cpus: int, memory_mb: int, seconds: int, bucket: str
) -> None:
    cluster = _cluster("hpc", "hpc", HPC_NODES)
    out = io.StringIO()

    call_command(
        "import_sacct", str(DATA / name), "--cluster", "hpc", "--create-projects", "--json",
        stdout=out,
    )  # fmt: skip

    summary: dict[str, Any] = __import__("json").loads(out.getvalue())
    assert summary[bucket] == 1
    assert summary["steps_skipped"] == 1
    assert summary["quarantined"] == 0
    job = Job.objects.get()
    assert (job.cpus, job.memory_mb, job.elapsed_seconds) == (cpus, memory_mb, seconds)
    su = job.service_units if bucket == "charged" else job.pending_service_units
    node = HPC_NODES[job.partition.name]
    assert su == _expected_su(
        weight=_weights(cluster)[job.partition.name], node=node, nodes=job.nnodes, cpus=cpus,
        memory_mb=Decimal(memory_mb), gpus=0, seconds=seconds,
    )  # fmt: skip

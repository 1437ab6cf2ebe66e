"""Make the job-efficiency data of this directory from the real Slurm testbed.

Submits jobs whose usage is designed (cores burnt, memory touched, run time against the time
limit), waits until sacct has their complete records, and writes:

- ``sacct_usage.psv``: ``sacct --parsable2 --duplicates`` with header and job steps (no ``-X``);
- ``sacct_usage.json``: ``sacct --json`` of the same jobs;
- ``manifest.json``: each job's designed usage and the efficiencies measured from the dump.

Run it with the testbed running and its environment evaluated (README.md of this directory)::

    eval "$(scripts/slurm-testbed env)"
    .venv/bin/python tests/data/efficiency/make_data.py

The jobs run this same file as their payload (``burn``, ``mem`` and ``sleep`` sub-commands), so
the whole recipe is here. The machine has 2 real cores: at most two jobs run at once, and never
two jobs that burn CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIELDS = (
    "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Start,End,"
    "Elapsed,ElapsedRaw,NNodes,NCPUS,NodeList,ReqTRES,AllocTRES,ReqMem,ConsumedEnergyRaw,"
    "TimelimitRaw,TotalCPU,MaxRSS,TRESUsageInTot,TRESUsageInMax,TRESUsageInAve,NTasks"
)
ACCTG_FREQ = "task=1"
MIB = 1024 * 1024
PAGE = 4096


# ---------------------------------------------------------------- payloads (run inside jobs)


def burn(procs: int, seconds: float) -> None:
    """Keep ``procs`` processes busy for ``seconds`` of wall-clock time."""
    end = time.monotonic() + seconds
    children = []
    for _ in range(procs - 1):
        pid = os.fork()
        if pid == 0:
            _spin(end)
            os._exit(0)
        children.append(pid)
    _spin(end)
    for pid in children:
        os.waitpid(pid, 0)


def _spin(end: float) -> None:
    n = 0
    while time.monotonic() < end:
        n += 1


def mem(mib_list: list[int], seconds: float) -> None:
    """Touch ``mib`` MiB (every page written) and hold it; a list is indexed by SLURM_PROCID."""
    rank = int(os.environ.get("SLURM_PROCID", "0"))
    mib = mib_list[rank % len(mib_list)]
    buf = bytearray(mib * MIB)  # allocated in this process, after any fork
    for i in range(0, len(buf), PAGE):
        buf[i] = 1
    time.sleep(seconds)
    del buf


# ---------------------------------------------------------------- the jobs


@dataclass
class Job:
    name: str
    what: str
    sbatch: list[str]  # options besides name, account, output, acctg-freq
    script: str  # the batch script's body (after #!/bin/sh)
    cores_held: int
    cores_burnt: float  # over the job's whole run
    mem_held_mib: int
    mem_touched_mib: int  # the most any one step holds (all its tasks together)
    time_limit_min: int
    intended_run_s: float
    steps: list[str] = field(default_factory=list)
    expect_state: str = "COMPLETED"
    gpus: int = 0
    job_id: str = ""
    load: list[float] = field(default_factory=list)


def _me(*args: object) -> str:
    return " ".join(
        shlex.quote(str(a)) for a in (sys.executable, str(Path(__file__).resolve()), *args)
    )


def _srun(*args: object, tasks: int = 1) -> str:
    return f"srun --acctg-freq={ACCTG_FREQ} -n{tasks} -c1 " + _me(*args)


JOBS = [
    Job(
        name="eff-timeout",
        what="sleeps 120 s under a 1-minute time limit: killed by Slurm (TIMEOUT)",
        sbatch=["-c1", "--mem=1G", "--time=1"],
        script=_me("sleep", 120),
        cores_held=1,
        cores_burnt=0,
        mem_held_mib=1024,
        mem_touched_mib=0,
        time_limit_min=1,
        intended_run_s=120,
        steps=["batch: sleep 120 (killed at the limit)"],
        expect_state="TIMEOUT",
    ),
    Job(
        name="eff-cpu-1of4",
        what="holds 4 cores, one process burns one core for 40 s",
        sbatch=["-c4", "--mem=2G", "--time=5"],
        script=_me("burn", 1, 40),
        cores_held=4,
        cores_burnt=1,
        mem_held_mib=2048,
        mem_touched_mib=0,
        time_limit_min=5,
        intended_run_s=40,
        steps=["batch: burn 1 core 40 s"],
    ),
    Job(
        name="eff-cpu-2of2",
        what="holds 2 cores, two processes burn both for 40 s",
        sbatch=["-c2", "--mem=2G", "--time=5"],
        script=_me("burn", 2, 40),
        cores_held=2,
        cores_burnt=2,
        mem_held_mib=2048,
        mem_touched_mib=0,
        time_limit_min=5,
        intended_run_s=40,
        steps=["batch: burn 2 cores 40 s (fork)"],
    ),
    Job(
        name="eff-mem-512of4096",
        what="touches 512 MiB (every page) and holds it 20 s, 4 GiB held",
        sbatch=["-c1", "--mem=4G", "--time=5"],
        script=_me("mem", 512, 20),
        cores_held=1,
        cores_burnt=0,
        mem_held_mib=4096,
        mem_touched_mib=512,
        time_limit_min=5,
        intended_run_s=20,
        steps=["batch: touch 512 MiB, hold 20 s"],
    ),
    Job(
        name="eff-mem-1024of4096",
        what="touches 1 GiB (every page) and holds it 20 s, 4 GiB held",
        sbatch=["-c1", "--mem=4G", "--time=5"],
        script=_me("mem", 1024, 20),
        cores_held=1,
        cores_burnt=0,
        mem_held_mib=4096,
        mem_touched_mib=1024,
        time_limit_min=5,
        intended_run_s=20,
        steps=["batch: touch 1024 MiB, hold 20 s"],
    ),
    Job(
        name="eff-sleep-short",
        what="holds 2 cores, sleeps 30 s under a 10-minute limit: ~0 % CPU, ~5 % of walltime",
        sbatch=["-c2", "--mem=1G", "--time=10"],
        script=_me("sleep", 30),
        cores_held=2,
        cores_burnt=0,
        mem_held_mib=1024,
        mem_touched_mib=0,
        time_limit_min=10,
        intended_run_s=30,
        steps=["batch: sleep 30"],
    ),
    Job(
        name="eff-steps",
        what=(
            "3 srun steps on 2 cores / 4 GiB: .0 burns 1 core 20 s; .1 touches 1 GiB for 15 s;"
            " .2 is 2 tasks touching 256 and 512 MiB for 15 s"
        ),
        sbatch=["-n2", "-c1", "--mem=4G", "--time=5"],
        script="\n".join(
            [
                _srun("burn", 1, 20),
                _srun("mem", 1024, 15),
                _srun("mem", "256,512", 15, tasks=2),
            ]
        ),
        cores_held=2,
        cores_burnt=20 / 50,
        mem_held_mib=4096,
        mem_touched_mib=1024,
        time_limit_min=5,
        intended_run_s=50,
        steps=[
            "0: 1 task burns 1 core 20 s",
            "1: 1 task touches 1024 MiB, holds 15 s",
            "2: 2 tasks touch 256 and 512 MiB (768 MiB together), hold 15 s",
            "batch: the shell running srun",
        ],
    ),
    Job(
        name="eff-gpu-1",
        what="gpu partition, 1 GPU and 1 core; burns the core 20 s; GPU use is not measured",
        sbatch=["-p", "gpu", "--gres=gpu:1", "-c1", "--mem=2G", "--time=5"],
        script=_me("burn", 1, 20),
        cores_held=1,
        cores_burnt=1,
        mem_held_mib=2048,
        mem_touched_mib=0,
        time_limit_min=5,
        intended_run_s=20,
        steps=["batch: burn 1 core 20 s"],
        gpus=1,
    ),
]
for _job in JOBS:  # the partition's default time limit must not hide a job's own
    assert any(o.startswith("--time=") for o in _job.sbatch), _job.name


# ---------------------------------------------------------------- driving Slurm


def run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def submit(job: Job, outdir: Path) -> str:
    script = outdir / f"{job.name}.sh"
    script.write_text(f"#!/bin/sh\n{job.script}\n")
    out = run(
        "sbatch",
        "--parsable",
        f"--job-name={job.name}",
        "--account=root",
        f"--acctg-freq={ACCTG_FREQ}",
        f"--output={outdir}/%x-%j.out",
        *job.sbatch,
        str(script),
    )
    return out.strip().split(";")[0]


def running(ids: list[str]) -> set[str]:
    if not ids:
        return set()
    out = run("squeue", "-h", "-o", "%i", "-j", ",".join(ids))
    return set(out.split())


def complete(ids: list[str]) -> bool:
    """Every line (allocation and steps) has ended and the allocation lines name a partition."""
    out = run(
        "sacct",
        "--parsable2",
        "--noheader",
        "--duplicates",
        "-j",
        ",".join(ids),
        "--format=JobIDRaw,Partition,State,End",
    )
    lines = [line.split("|") for line in out.splitlines() if line]
    allocs = {f[0] for f in lines if "." not in f[0]}
    if allocs != set(ids):
        return False
    for jobid, partition, state, end in lines:
        if end in ("", "Unknown") or state in ("PENDING", "RUNNING"):
            return False
        if "." not in jobid and not partition:
            return False
    return True


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def schedule(outdir: Path) -> None:
    """Submit JOBS in order, at most 2 at once and never two jobs that burn CPU together.

    The machine has 2 cores and other work may share them: each job notes the 1-minute load
    average seen while it ran (its own processes included).
    """
    queue = list(JOBS)
    live: list[Job] = []
    while queue or live:
        still = running([j.job_id for j in live])
        for job in [j for j in live if j.job_id not in still]:
            print(f"  {job.name} ({job.job_id}) ended", flush=True)
        live = [j for j in live if j.job_id in still]
        for job in live:
            job.load.append(load1())
        for job in list(queue):
            if len(live) >= 2:
                break
            if job.cores_burnt and any(j.cores_burnt for j in live):
                continue
            job.job_id = submit(job, outdir)
            print(f"  {job.name} submitted as {job.job_id}", flush=True)
            live.append(job)
            queue.remove(job)
        time.sleep(2)


# ---------------------------------------------------------------- measuring from the dump


def seconds(text: str) -> float:
    """sacct's [D-][HH:]MM:SS[.mmm] (TotalCPU, Elapsed) in seconds."""
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [float(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    h, m, s = parts
    return days * 86400 + h * 3600 + m * 60 + s


def tres(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def size_mib(text: str) -> float:
    """A size like 1048576K, 4G or 1234 (bytes) in MiB."""
    units = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}
    if text and text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text) / MIB


def measure(rows: list[dict[str, str]], job: Job) -> dict[str, Any]:
    alloc = next(r for r in rows if r["JobIDRaw"] == job.job_id)
    steps = [r for r in rows if r["JobIDRaw"].startswith(job.job_id + ".")]
    elapsed = int(alloc["ElapsedRaw"])
    ncpus = int(alloc["NCPUS"])
    total_cpu = seconds(alloc["TotalCPU"])
    steps_cpu = sum(seconds(s["TotalCPU"]) for s in steps)
    mem_held = size_mib(tres(alloc["AllocTRES"])["mem"])
    step_mem = {
        s["JobID"]: round(size_mib(tres(s["TRESUsageInTot"]).get("mem", "0")), 1) for s in steps
    }
    step_maxrss = {s["JobID"]: round(size_mib(s["MaxRSS"] or "0"), 1) for s in steps}
    step_cpu = {s["JobID"]: round(seconds(s["TotalCPU"]), 3) for s in steps}
    peak = max(step_mem.values(), default=0.0)
    limit_s = int(alloc["TimelimitRaw"]) * 60
    return {
        "job_id": job.job_id,
        "state": alloc["State"],
        "elapsed_s": elapsed,
        "ncpus": ncpus,
        "total_cpu_s": round(total_cpu, 3),
        "total_cpu_s_sum_of_steps": round(steps_cpu, 3),
        "steps_total_cpu_s": step_cpu,
        "mem_held_mib": mem_held,
        "steps_tres_usage_in_tot_mem_mib": step_mem,
        "steps_maxrss_mib": step_maxrss,
        "peak_step_mem_mib": peak,
        "cpu_eff": round(total_cpu / (elapsed * ncpus), 4) if elapsed else None,
        "mem_eff": round(peak / mem_held, 4),
        "walltime_accuracy": round(elapsed / limit_s, 4),
        "load1_while_running": [min(job.load), max(job.load)] if job.load else None,
    }


def designed(job: Job) -> dict[str, Any]:
    return {
        "what": job.what,
        "sbatch": [*job.sbatch, f"--acctg-freq={ACCTG_FREQ}"],
        "cores_held": job.cores_held,
        "cores_burnt": job.cores_burnt,
        "mem_held_mib": job.mem_held_mib,
        "mem_touched_mib": job.mem_touched_mib,
        "time_limit_min": job.time_limit_min,
        "intended_run_s": job.intended_run_s,
        "gpus": job.gpus,
        "gpu_eff": "not measured (no NVML on the testbed)" if job.gpus else None,
        "steps": job.steps,
        "expected_state": job.expect_state,
        "cpu_eff": round(job.cores_burnt / job.cores_held, 4),
        "mem_eff": round(job.mem_touched_mib / job.mem_held_mib, 4),
        "walltime_accuracy": (
            1.0
            if job.expect_state == "TIMEOUT"
            else round(job.intended_run_s / (job.time_limit_min * 60), 4)
        ),
    }


# ---------------------------------------------------------------- main


def generate() -> None:
    if "SLURM_CONF" not in os.environ:
        sys.exit('SLURM_CONF is not set: eval "$(scripts/slurm-testbed env)" first')
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eff-data-") as tmp:
        outdir = Path(tmp)
        schedule(outdir)
        ids = [j.job_id for j in JOBS]
        while not complete(ids):
            time.sleep(2)
        time.sleep(3)  # sacct can lag the instant a job ends (docs/development.md)
        for job in JOBS:
            log = (outdir / f"{job.name}-{job.job_id}.out").read_text()
            if log.strip():
                print(f"  {job.name} output: {log.strip()[:300]}")
    psv = run("sacct", "--parsable2", "--duplicates", "-j", ",".join(ids), f"--format={FIELDS}")
    (HERE / "sacct_usage.psv").write_text(psv)
    js = run("sacct", "--json", "--duplicates", "-j", ",".join(ids))
    (HERE / "sacct_usage.json").write_text(js)

    header, *lines = psv.splitlines()
    rows = [dict(zip(header.split("|"), line.split("|"), strict=True)) for line in lines]
    manifest: dict[str, Any] = {
        "made_with": "tests/data/efficiency/make_data.py",
        "slurm_version": run("sacct", "--version").strip(),
        "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "acctg_freq": ACCTG_FREQ,
        "machine": f"{os.cpu_count()} cores; nodes claim 128 cores and 245000 MB",
        "formulas": {
            "cpu_eff": "TotalCPU seconds (allocation line) / (ElapsedRaw x NCPUS)",
            "mem_eff": "max over steps of TRESUsageInTot mem / AllocTRES mem",
            "walltime_accuracy": "ElapsedRaw / (TimelimitRaw x 60)",
        },
        "jobs": {
            job.name: {"designed": designed(job), "measured": measure(rows, job)} for job in JOBS
        },
    }
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {HERE} in {time.monotonic() - t0:.0f} s")
    for name, entry in manifest["jobs"].items():
        d, m = entry["designed"], entry["measured"]
        print(
            f"  {name:20} {m['state']:10} cpu {d['cpu_eff']:.3f}/{m['cpu_eff']:.3f}"
            f"  mem {d['mem_eff']:.3f}/{m['mem_eff']:.3f}"
            f"  wall {d['walltime_accuracy']:.3f}/{m['walltime_accuracy']:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd")
    p = sub.add_parser("burn", help="payload: burn PROCS cores for SECONDS")
    p.add_argument("procs", type=int)
    p.add_argument("seconds", type=float)
    p = sub.add_parser("mem", help="payload: touch MIB[,MIB...] (by SLURM_PROCID), hold SECONDS")
    p.add_argument("mib")
    p.add_argument("seconds", type=float)
    p = sub.add_parser("sleep", help="payload: sleep SECONDS")
    p.add_argument("seconds", type=float)
    args = parser.parse_args()
    if args.cmd == "burn":
        burn(args.procs, args.seconds)
    elif args.cmd == "mem":
        mem([int(x) for x in args.mib.split(",")], args.seconds)
    elif args.cmd == "sleep":
        time.sleep(args.seconds)
    else:
        generate()


if __name__ == "__main__":
    main()

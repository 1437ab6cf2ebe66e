"""Job efficiency, and the SU a job would have cost had it asked for what it used. Pure module.

Slurm records what a job used beside what it held: ``TotalCPU`` (CPU time of all its steps, on
the allocation's line), and per step the peak memory of its tasks (``TRESUsageInTot`` mem, the
sum over tasks of each one's peak; ``MaxRSS`` where that is missing) and, where the GPU plugin
measures them, ``gres/gpuutil`` and ``gres/gpumem``. :class:`JobUsage` holds what one job used;
:func:`job_efficiency` compares it with what the job held:

- CPU efficiency = CPU time / (elapsed x cores held);
- memory efficiency = peak memory / memory held;
- GPU efficiency = the GPUs' mean utilisation, where measured;
- walltime accuracy = elapsed / time limit;

and :func:`right_sized_request` is the request a user could have made for the same work: whole
cores per node for the CPU time used, memory rounded up to whole core-equivalents (eq 9: a
core's share of the node's memory), whole GPUs for the utilisation measured. Priced by the
charging engine, it is never more than what the job held (each resource is capped at what was
held, and the max-fraction charge grows with each resource), and it is the same request for a
job that used all it held. Nothing measured, nothing claimed: a resource without a measurement
is right-sized to what was held, and a job without ``TotalCPU`` has no efficiency at all.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from typing import Final, NamedTuple

from accounting.clusters import charging
from kit import numbers

RATIO_QUANTUM: Final = Decimal("0.0001")
_ZERO: Final = Decimal(0)
_ONE: Final = Decimal(1)
_HUNDRED: Final = Decimal(100)


class JobUsage(NamedTuple):
    """What a job used, as Slurm recorded it; None where Slurm recorded nothing.

    ``cpu_seconds`` is TotalCPU; ``memory_peak_mb`` and ``gpu_memory_peak_mb`` MiB, the largest
    of the job's steps; ``gpu_utilisation`` percent of the GPUs held (0-100), the largest of
    the steps' means. (A named tuple: one is made for every step line of an import.)"""

    cpu_seconds: Decimal | None = None
    memory_peak_mb: Decimal | None = None
    gpu_utilisation: Decimal | None = None
    gpu_memory_peak_mb: Decimal | None = None
    # How memory_peak_mb was measured (MEMORY_SUMMED, MEMORY_TIMES_TASKS, MEMORY_ONE_TASK);
    # None when it was not.
    memory_basis: str | None = None

    def merged(self, other: JobUsage | None) -> JobUsage:
        """Both records of one job together (an allocation line and its steps, or two steps):
        the larger of each measurement. Merging is idempotent and order-free, so a step read
        twice, or before its job, changes nothing."""
        if other is None:
            return self
        return JobUsage(
            cpu_seconds=_larger(self.cpu_seconds, other.cpu_seconds),
            memory_peak_mb=_larger(self.memory_peak_mb, other.memory_peak_mb),
            gpu_utilisation=_larger(self.gpu_utilisation, other.gpu_utilisation),
            gpu_memory_peak_mb=_larger(self.gpu_memory_peak_mb, other.gpu_memory_peak_mb),
            memory_basis=_basis_of_larger(self, other),
        )

    def plus_step(self, step: JobUsage) -> JobUsage:
        """This total of a job's steps with one more step: CPU time adds up, peaks are the
        larger. (The allocation's own TotalCPU, the sum Slurm made, wins over this sum when
        both are there: see :meth:`merged`.)"""
        cpu = self.cpu_seconds
        if step.cpu_seconds is not None:
            cpu = step.cpu_seconds if cpu is None else cpu + step.cpu_seconds
        return JobUsage(
            cpu_seconds=cpu,
            memory_peak_mb=_larger(self.memory_peak_mb, step.memory_peak_mb),
            gpu_utilisation=_larger(self.gpu_utilisation, step.gpu_utilisation),
            gpu_memory_peak_mb=_larger(self.gpu_memory_peak_mb, step.gpu_memory_peak_mb),
            memory_basis=_basis_of_larger(self, step),
        )

    @property
    def measured(self) -> bool:
        """Does the job have usage data at all? (TotalCPU: every Slurm records it.)"""
        return self.cpu_seconds is not None


# What a step's memory peak is: the sum over its tasks of each one's peak (TRESUsageInTot),
# one task's peak times the step's tasks (MaxRSS x NTasks), or one task's peak alone (MaxRSS
# without NTasks: the step may have used up to NTasks times more).
MEMORY_SUMMED = "sum over tasks"
MEMORY_TIMES_TASKS = "one task's peak x NTasks"
MEMORY_ONE_TASK = "one task's peak"


def _basis_of_larger(a: JobUsage, b: JobUsage) -> str | None:
    if b.memory_peak_mb is None:
        return a.memory_basis
    if a.memory_peak_mb is None or b.memory_peak_mb > a.memory_peak_mb:
        return b.memory_basis
    return a.memory_basis


def _larger(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


class Held(NamedTuple):
    """What a job held: its sacct allocation (totals over its nodes) and time. (Named tuples
    here: one of each is made for every job of an import, and a frozen dataclass costs a
    ``object.__setattr__`` per field.)"""

    nnodes: int
    cpus: int
    memory_mb: Decimal
    gpus: int
    elapsed_seconds: int
    timelimit_minutes: int | None = None


class Efficiency(NamedTuple):
    """Ratios of used to held, 0 to 1 (rounded to :data:`RATIO_QUANTUM`); None: not measured.
    CPU and memory are capped at 1: Slurm's sampling and system time can count a little more
    than was held, and a job cannot use more than all of it."""

    cpu: Decimal | None
    memory: Decimal | None
    gpu: Decimal | None
    walltime: Decimal | None


def _ratio(used: Decimal, held: Decimal) -> Decimal:
    return min(used / held, _ONE).quantize(RATIO_QUANTUM)


def job_efficiency(held: Held, usage: JobUsage) -> Efficiency:
    """How much of what it held the job used. Without usage data (or with no elapsed time)
    every ratio is None, walltime accuracy included: such jobs are left out of every
    average."""
    if not usage.measured or held.elapsed_seconds <= 0:
        return Efficiency(cpu=None, memory=None, gpu=None, walltime=None)
    assert usage.cpu_seconds is not None
    elapsed = Decimal(held.elapsed_seconds)
    cpu = _ratio(usage.cpu_seconds, elapsed * held.cpus) if held.cpus else None
    memory = (
        _ratio(usage.memory_peak_mb, held.memory_mb)
        if usage.memory_peak_mb is not None and held.memory_mb > 0
        else None
    )
    gpu = (
        _ratio(usage.gpu_utilisation, _HUNDRED)
        if usage.gpu_utilisation is not None and held.gpus
        else None
    )
    walltime = (
        _ratio(elapsed, Decimal(held.timelimit_minutes * 60)) if held.timelimit_minutes else None
    )
    return Efficiency(cpu=cpu, memory=memory, gpu=gpu, walltime=walltime)


class Request(NamedTuple):
    """A job's request in totals over its nodes (as sacct's AllocTRES gives them)."""

    cores: int
    memory_mb: Decimal
    gpus: int


def _per_node_up(total: Decimal, nnodes: int) -> int:
    """Whole units per node that hold ``total`` over ``nnodes`` nodes."""
    return int((total / nnodes).to_integral_value(rounding=ROUND_CEILING))


def right_sized_request(
    spec: charging.PartitionSpec, held: Held, usage: JobUsage
) -> Request | None:
    """What the job could have asked for: on each node, whole cores for its CPU time (at least
    one), memory in whole core-equivalents for its peak, whole GPUs for its utilisation; each
    capped at what it held. None without usage data."""
    if not usage.measured or held.elapsed_seconds <= 0 or held.nnodes < 1:
        return None
    assert usage.cpu_seconds is not None
    nodes = held.nnodes
    cores_used = usage.cpu_seconds / held.elapsed_seconds
    cores = min(max(_per_node_up(cores_used, nodes), 1) * nodes, held.cpus)
    memory = held.memory_mb
    if usage.memory_peak_mb is not None:
        per_core = spec.memory_per_core_mb
        equivalents = _per_node_up(usage.memory_peak_mb / per_core, nodes)
        memory = min(equivalents * per_core * nodes, held.memory_mb)
    gpus = held.gpus
    if usage.gpu_utilisation is not None and held.gpus:
        busy = Decimal(held.gpus) * usage.gpu_utilisation / _HUNDRED
        gpus = min(_per_node_up(busy, nodes) * nodes, held.gpus)
    return Request(cores=cores, memory_mb=memory, gpus=gpus)


def right_sized_service_units(
    spec: charging.PartitionSpec, held: Held, usage: JobUsage, *, service_units: Decimal
) -> Decimal | None:
    """The SU of the same job with :func:`right_sized_request`, priced by the engine; never
    more than the ``service_units`` booked (a refunded job's is 0). None without usage data.
    Raises what :func:`charging.charge` raises for a request the partition cannot hold."""
    request = right_sized_request(spec, held, usage)
    if request is None:
        return None
    if request == Request(held.cpus, held.memory_mb, held.gpus):
        return service_units  # it asked for what it used: no second pricing
    nodes = charging.split_evenly(
        nodes=held.nnodes, cores=request.cores, memory_mb=request.memory_mb, gpus=request.gpus
    )
    priced = charging.service_units(spec, nodes, elapsed_seconds=held.elapsed_seconds)
    return min(priced, service_units)


class Waste(NamedTuple):
    """The largest resource a job asked for beyond what it used: which (``cores``, ``memory``,
    ``gpus``), in words ("asked for 64 cores, used 3.9"), and, when another resource set the
    charge, that in words too ("the GPUs set the charge, not the cores: they cost nothing
    more"); empty strings when there is nothing to say."""

    resource: str = ""
    words: str = ""
    set_the_charge: str = ""


# The resources as a sentence names them (the keys are Job.dominant_resource's values).
RESOURCE_WORDS: Final = {"cores": "cores", "memory": "memory", "gpus": "GPUs"}


def waste_of(
    spec: charging.PartitionSpec,
    held: Held,
    usage: JobUsage,
    request: Request | None,
    *,
    dominant: str = "",
) -> Waste:
    """The resource asked for beyond what was used that is the largest share of a node.
    Memory counts only beyond the share that the right-sized cores bring with them (a job that
    asked for cores and got their memory by default over-asked cores, not memory). Ties go to
    GPUs, then cores. When ``dominant`` (the resource that set the charge) is another one,
    the unused part cost nothing more, and ``set_the_charge`` says so."""
    if request is None or not usage.measured or held.elapsed_seconds <= 0:
        return Waste()
    assert usage.cpu_seconds is not None
    gaps: list[tuple[Decimal, str, str]] = []
    if request.gpus < held.gpus and usage.gpu_utilisation is not None and spec.gpus:
        busy = held.gpus * usage.gpu_utilisation / _HUNDRED
        gaps.append(
            (
                Decimal(held.gpus - request.gpus) / spec.gpus,
                "gpus",
                f"asked for {numbers.plural(held.gpus, 'GPU')}, used {busy:.1f}",
            )
        )
    if request.cores < held.cpus:
        used = usage.cpu_seconds / held.elapsed_seconds
        gaps.append(
            (
                Decimal(held.cpus - request.cores) / spec.cores,
                "cores",
                f"asked for {held.cpus} cores, used {used:.1f}",
            )
        )
    with_the_cores = max(request.memory_mb, request.cores * spec.memory_per_core_mb)
    if usage.memory_peak_mb is not None and with_the_cores < held.memory_mb:
        gaps.append(
            (
                (held.memory_mb - with_the_cores) / spec.memory_mb,
                "memory",
                f"asked for {_gib(held.memory_mb)} of memory, used at most "
                f"{_gib(usage.memory_peak_mb)}",
            )
        )
    if not gaps:
        return Waste()
    largest = max(gap for gap, _, _ in gaps)
    resource, words = next((name, text) for gap, name, text in gaps if gap == largest)
    set_the_charge = ""
    if dominant in RESOURCE_WORDS and dominant != resource:
        set_the_charge = (
            f"the {RESOURCE_WORDS[dominant]} set the charge, not the {RESOURCE_WORDS[resource]}:"
            " they cost nothing more"
        )
    return Waste(resource, words, set_the_charge)


def waste_named(
    spec: charging.PartitionSpec, held: Held, usage: JobUsage, request: Request | None
) -> str:
    """:func:`waste_of` in words only ("asked for 64 cores, used 3.9"); "" when the job asked
    for what it used."""
    return waste_of(spec, held, usage, request).words


def _gib(memory_mb: Decimal) -> str:
    return f"{memory_mb / charging.MIB_PER_GIB:,.1f} GiB"

"""Quotes for planned jobs: what a request would cost before it runs. Pure module.

A quote names nodes, hours and per-node cores, GPUs and memory; whatever is left out takes the
value Slurm would give on a shared node: a whole node when nothing is named, the GPUs' share of
cores for a GPU request, the cores' share of memory (M / C per core, eq 8).

The job page's "could have cost less" hint is a quote too: :func:`cheaper_request` names the
request (the dominating resource cut to its share) and prices it with :func:`quote_compute`, with
the same two shares, so the hint and ``quote`` cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_DOWN, Context, Decimal
from typing import Any, Final

from accounting.clusters import charging
from kit.errors import ApplicationError

# Shares that do not terminate (M / C = 7111.1... MiB) are rounded down at 28 digits, as
# charging.split_evenly rounds a job's shares, so a share never lands a hair above a
# core-equivalent boundary (eq 9 would round that up to one more core-equivalent).
_SHARE_CONTEXT: Final = Context(prec=28, rounding=ROUND_DOWN)
_SECONDS_PER_HOUR: Final = Decimal(charging.SECONDS_PER_HOUR)


class QuoteError(ApplicationError):
    """A quote request that cannot be priced; the message says which value is wrong."""


@dataclass(frozen=True)
class QuoteRequest:
    nodes: int
    hours: Decimal
    cores_per_node: Decimal | None = None
    gpus_per_node: int | None = None
    memory_per_node_mb: Decimal | None = None
    model: str = "energy"


def gpus_share_of_cores(spec: charging.PartitionSpec, gpus_per_node: int) -> Decimal:
    """The cores that come with ``gpus_per_node`` GPUs: ``ceil(g * C / G)``, whole cores, as
    Slurm hands them out (8 per GCD on Setonix; 5 for one GPU of 8 on a 36-core node)."""
    quotient, remainder = divmod(Decimal(gpus_per_node) * spec.cores, spec.gpus)  # exact
    return quotient + 1 if remainder else quotient


def memory_share_mb(
    spec: charging.PartitionSpec, *, cores_per_node: Decimal, gpus_per_node: int = 0
) -> Decimal:
    """The memory that comes with a request's cores, exactly: ``c * M / C`` MiB (eq 8), and on a
    GPU node the GPUs' ``g * M / G`` when that is larger. Charged, it is ``ceil(c)`` core-
    equivalents (eq 9), never one more: for whole cores, the most memory that costs no more
    than the cores."""
    share = _SHARE_CONTEXT.divide(
        _SHARE_CONTEXT.multiply(cores_per_node, spec.memory_mb), spec.cores
    )
    if gpus_per_node and spec.gpus:
        gpus_share = _SHARE_CONTEXT.divide(
            _SHARE_CONTEXT.multiply(Decimal(gpus_per_node), spec.memory_mb), spec.gpus
        )
        share = max(share, gpus_share)
    return share


def hours_of(elapsed_seconds: int) -> Decimal:
    """Seconds as the hours of a :class:`QuoteRequest` that :func:`quote_compute` turns back into
    exactly ``elapsed_seconds`` (rounded down, so its ceiling is not one second more)."""
    return _SHARE_CONTEXT.divide(Decimal(elapsed_seconds), _SECONDS_PER_HOUR)


def quote_usage(
    spec: charging.PartitionSpec, request: QuoteRequest
) -> tuple[charging.NodeUsage, ...]:
    """The per-node usage a request stands for, with Slurm-like defaults filled in."""
    if request.nodes < 1:
        raise QuoteError(f"nodes must be at least 1, got {request.nodes}")
    cores, gpus, memory = request.cores_per_node, request.gpus_per_node, request.memory_per_node_mb
    if cores is None and gpus is None and memory is None:
        cores, gpus, memory = Decimal(spec.cores), spec.gpus, Decimal(spec.memory_mb)
    if gpus is None:
        gpus = 0
    if cores is None:
        # A GPU request brings the GPUs' share of the node's cores.
        cores = gpus_share_of_cores(spec, gpus) if gpus and spec.gpus else Decimal(1)
    if memory is None:
        memory = memory_share_mb(spec, cores_per_node=Decimal(cores))
    usage = charging.NodeUsage(cores=cores, memory_mb=memory, gpus=gpus)
    return (usage,) * request.nodes


def quote_compute(spec: charging.PartitionSpec, request: QuoteRequest) -> charging.Charge:
    """Price a planned job with the engine (eq 1 for the energy model)."""
    if request.hours <= 0:
        raise QuoteError(f"hours must be positive, got {request.hours}")
    seconds = int((request.hours * 3600).to_integral_value(ROUND_CEILING))
    return charging.charge(
        spec, quote_usage(spec, request), elapsed_seconds=seconds, model=request.model
    )


@dataclass(frozen=True)
class CheaperRequest:
    """A job that ran, asked for again with only its dominating resource's share, and priced."""

    request: QuoteRequest  # per node, as ``quote`` takes it
    resource: str  # what was cut to its share: "memory" or "cores"
    service_units: Decimal
    saving: Decimal
    percent: Decimal  # the saving, percent of the charge, to one place


def cheaper_request(
    spec: charging.PartitionSpec,
    *,
    nodes: int,
    cores: int | Decimal,
    gpus: int,
    memory_mb: int | Decimal,
    elapsed_seconds: int,
    service_units: Decimal,
    dominant_resource: str,
) -> CheaperRequest | None:
    """The same job (sacct's totals over ``nodes``) with a cheaper request, priced by
    :func:`quote_compute` with the energy model; None when no share rule applies or it would
    not save.

    When memory dominated, the request keeps its cores and GPUs and asks for their share of
    memory (:func:`memory_share_mb`: exactly ``c * M / C`` per node, the GPUs' ``g * M / G`` when
    larger). On a GPU partition, when cores dominated beyond the GPUs' share, it asks for that
    share (:func:`gpus_share_of_cores`: ``ceil(g * C / G)`` per node, what ``quote`` gives a GPU
    request) and no more memory than those cores' share. Per-node values are the job's totals
    split as the engine splits them (:func:`charging.split_evenly`); GPUs must split whole.
    """
    if nodes < 1 or elapsed_seconds <= 0 or service_units <= 0 or gpus % nodes:
        # A request names whole GPUs per node: a job Slurm packed unevenly (3 GPUs on 2 nodes)
        # has no request of the same shape.
        return None
    try:
        (held, *_) = charging.split_evenly(nodes=nodes, cores=cores, memory_mb=memory_mb)
    except charging.ChargeError:
        return None
    held_cores, held_gpus = Decimal(held.cores), gpus // nodes
    if dominant_resource == "memory":
        resource = "memory"
        request_cores = held_cores
        memory = memory_share_mb(spec, cores_per_node=held_cores, gpus_per_node=held_gpus)
    elif dominant_resource == "cores" and spec.is_gpu and held_gpus:
        resource = "cores"
        request_cores = gpus_share_of_cores(spec, held_gpus)
        if request_cores >= held_cores:
            return None
        memory = min(
            Decimal(held.memory_mb),
            memory_share_mb(spec, cores_per_node=request_cores, gpus_per_node=held_gpus),
        )
    else:
        return None
    request = QuoteRequest(
        nodes=nodes,
        hours=hours_of(elapsed_seconds),
        cores_per_node=request_cores,
        gpus_per_node=held_gpus,
        memory_per_node_mb=memory,
    )
    try:
        alternative = quote_compute(spec, request)
    except (QuoteError, charging.ChargeError, charging.SpecError):
        return None
    saving = service_units - alternative.service_units
    if saving <= 0:
        return None
    return CheaperRequest(
        request=request,
        resource=resource,
        service_units=alternative.service_units,
        saving=saving,
        percent=(saving * 100 / service_units).quantize(Decimal("0.1")),
    )


def charge_as_dict(charge: charging.Charge) -> dict[str, Any]:
    """The machine-readable form of a charge (``quote --json``, the API): decimals as strings."""
    return {
        "model": charge.model,
        "service_units": str(charge.service_units),
        "weight": str(charge.weight),
        "hours": str(charge.hours),
        "dominant_resource": charge.dominant_resource,
        "energy_wh": str(charge.energy_wh),
        "nodes": [
            {
                "cores": str(node.cores),
                "memory": str(node.memory),
                "gpus": str(node.gpus),
                **{name: str(value) for name, value in sorted(node.node_local.items())},
            }
            for node in charge.nodes
        ],
    }


def _number(value: Decimal) -> str:
    """A decimal without trailing zeros, for sentences."""
    text = format(value.normalize(), "f")
    return text


def weight_explanation(spec: charging.PartitionSpec) -> str:
    """Why a partition's weight is what it is, in one line (shown beside every charge)."""
    derived = charging.energy_weight(spec)
    if spec.is_gpu:
        why = (
            f"GPU node: ({spec.gpus} x {_number(spec.gpu_tdp_watts)} W GPU) / "
            f"({spec.sockets} x {_number(spec.cpu_tdp_watts)} W CPU) x {spec.cores} cores "
            f"= {_number(derived)} SU per node-hour"
        )
    else:
        why = f"CPU partition: w = C = {spec.cores} cores = {_number(derived)} SU per node-hour"
    if spec.weight_override is not None:
        return f"override {_number(spec.weight_override)} SU per node-hour (derived: {why})"
    return why


def quote_payload(
    *,
    cluster_name: str,
    partition_name: str,
    version_number: int,
    request: QuoteRequest,
    charge: charging.Charge,
) -> dict[str, Any]:
    """The quote contract: what ``quote --json`` prints and ``POST /api/v1/quote/`` returns."""
    return {
        "cluster": cluster_name,
        "partition": partition_name,
        "partition_version": version_number,
        **charge_as_dict(charge),
        "nodes_requested": request.nodes,
    }

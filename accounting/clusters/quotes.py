"""Quotes for planned jobs: what a request would cost before it runs. Pure module.

A quote names nodes, hours and per-node cores, GPUs and memory; whatever is left out takes the
value Slurm would give on a shared node: a whole node when nothing is named, the GPUs' share of
cores for a GPU request, the cores' share of memory (M / C per core, eq 8).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from accounting.clusters import charging
from kit.errors import ApplicationError


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
        if gpus and spec.gpus:
            # A GPU request brings the GPUs' share of the node's cores (8 per GCD on Setonix).
            cores = (Decimal(gpus) * spec.cores / spec.gpus).to_integral_value(ROUND_CEILING)
        else:
            cores = Decimal(1)
    if memory is None:
        # Slurm's default: DefMemPerCPU = floor(M / C) MB per core. Whole MB, so the default
        # never lands a hair above a core-equivalent boundary (eq 9 would round that up).
        memory = Decimal(spec.memory_mb // spec.cores) * Decimal(cores)
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

"""The hardware of a partition's nodes, described once. Pure module.

Every place that names a partition's hardware reads this registry instead of listing the
fields again: the spec-file reader (``specs.py``), the API's spec serializer, the admin form,
the copy of a spec into a rate version (``services.py``) and the rate version's spec for the
charging engine (``PartitionVersion.spec``). Adding a hardware column is one entry here, the
model field and its migration (docs/cluster-specs.md). A further node-local resource such as
NVMe needs no entry at all: it is data, a capacity in the spec's ``node_local`` map (IV-E).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal


@dataclass(frozen=True, slots=True)
class HardwareField:
    """One per-node hardware figure of a partition."""

    name: str
    kind: Literal["int", "decimal"]
    help: str
    minimum: int | Decimal
    maximum: int | Decimal | None = None
    required: bool = True
    default: int | Decimal | None = None  # when a spec leaves it out (None: absent, not zero)


_MAX_WATTS = Decimal(100_000)

HARDWARE: tuple[HardwareField, ...] = (
    HardwareField("sockets", "int", "CPU sockets per node", 1, 16),
    HardwareField("cores_per_socket", "int", "cores per socket", 1, 4096),
    HardwareField("memory_mb", "int", "memory per node in MiB (Slurm MB)", 1, 2**40),
    HardwareField("gpus", "int", "GPUs per node", 0, 1024, required=False, default=0),
    HardwareField("cpu_tdp_watts", "decimal", "TDP per CPU socket, W", Decimal(1), _MAX_WATTS),
    HardwareField(
        "gpu_tdp_watts",
        "decimal",
        "TDP per GPU device, W (required with GPUs)",
        Decimal(1),
        _MAX_WATTS,
        required=False,
        default=Decimal(0),
    ),
    HardwareField(
        "gpu_streaming_multiprocessors",
        "int",
        "streaming multiprocessors per GPU (SM model)",
        0,
        10**6,
        required=False,
        default=0,
    ),
    HardwareField(
        "cpu_peak_flops",
        "decimal",
        "vendor peak FLOP/s per CPU socket",
        Decimal(1),
        required=False,
    ),
    HardwareField(
        "gpu_peak_flops",
        "decimal",
        "vendor peak FLOP/s per GPU device",
        Decimal(1),
        required=False,
    ),
)

HARDWARE_NAMES: tuple[str, ...] = tuple(field.name for field in HARDWARE)
HARDWARE_BY_NAME: dict[str, HardwareField] = {field.name: field for field in HARDWARE}

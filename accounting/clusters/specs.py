"""Cluster spec files: the JSON format staff keep in version control (examples/clusters/).

Pure module: it reads and validates a document and returns dataclasses; it never touches the
database. Every error names the file, the partition and the field, so a bad edit is found at once.

Format (one file per cluster)::

    {"name": "setonix", "description": "...", "timezone": "Australia/Perth",
     "partitions": [{"name": "work", "nodelist": "nid[001000-002591]",
                     "sockets": 2, "cores_per_socket": 64, "memory_mb": 245000, "gpus": 0,
                     "cpu_tdp_watts": 280, "cpu_peak": {"n_stream": 1, "n_unit": 16,
                     "frequency_hz": 2.45e9}}, ...]}

Optional per cluster: ``slurm_cluster_name``, ``grid_intensity_g_per_kwh`` (g CO2e per kWh, the
constant under any uploaded series; left as it is when the file does not give it).
Optional per partition: ``description``, ``gpu_tdp_watts``, ``gpu_streaming_multiprocessors``,
``cpu_peak_flops`` / ``gpu_peak_flops`` (vendor peak per device), ``gpu_peak`` (``n_cuda``,
``n_tensor``, ``matrix_order``, ``frequency_hz``), ``node_local`` (capacity per node of further
resources, e.g. ``{"nvme_gb": 3500}``), ``weight_override`` with ``weight_override_reason``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import hostlist

from accounting.clusters.charging import PartitionSpec, SpecError
from accounting.clusters.hardware import HARDWARE, HARDWARE_NAMES, HardwareField
from kit.errors import ApplicationError


class SpecFileError(ApplicationError):
    """A cluster spec document that cannot be applied; the message says where and why."""


@dataclass(frozen=True)
class CpuPeak:
    """Parameters of eq 3 (per socket): P_cpu = n_core * n_stream * n_unit * F_cpu."""

    n_stream: int
    n_unit: int
    frequency_hz: Decimal


@dataclass(frozen=True)
class GpuPeak:
    """Parameters of eq 7 (per device): P_gpu = (n_cuda + n_tensor * r^2 (2r - 1)) * F_gpu."""

    n_cuda: int
    n_tensor: int
    matrix_order: int
    frequency_hz: Decimal


@dataclass(frozen=True)
class PartitionDefinition:
    """Everything a spec file says about one partition."""

    name: str
    nodelist: str
    node_count: int
    charging: PartitionSpec
    description: str = ""
    cpu_peak: CpuPeak | None = None
    gpu_peak: GpuPeak | None = None
    weight_override_reason: str = ""


@dataclass(frozen=True)
class ClusterDefinition:
    """A whole spec file."""

    name: str
    timezone: str
    description: str = ""
    partitions: tuple[PartitionDefinition, ...] = field(default_factory=tuple)
    # Slurm's ClusterName when it is not the portal's name ("" = the same).
    slurm_cluster_name: str = ""
    # Grams of CO2e per kWh of the cluster's grid; None: the file leaves it to the admin.
    grid_intensity_g_per_kwh: Decimal | None = None


_CLUSTER_KEYS = {
    "name", "description", "timezone", "partitions", "slurm_cluster_name",
    "grid_intensity_g_per_kwh",
}  # fmt: skip
_MAX_G_PER_KWH = Decimal(100_000)
_PARTITION_KEYS = {
    "name",
    "description",
    "nodelist",
    *HARDWARE_NAMES,
    "cpu_peak",
    "gpu_peak",
    "node_local",
    "weight_override",
    "weight_override_reason",
}


class _Reader:
    """Reads typed fields of one JSON object, naming the place of any error."""

    def __init__(self, where: str, data: Any, allowed: set[str]) -> None:
        if not isinstance(data, dict):
            raise SpecFileError(f"{where}: expected an object")
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise SpecFileError(f"{where}: unknown field {unknown[0]!r}")
        self.where = where
        self.data = data

    def error(self, name: str, message: str) -> SpecFileError:
        return SpecFileError(f"{self.where}: field {name!r}: {message}")

    def text(self, name: str, default: str | None = None) -> str:
        value = self.data.get(name, default)
        if value is None:
            raise self.error(name, "is required")
        if not isinstance(value, str) or (default is None and not value.strip()):
            raise self.error(name, "must be a non-empty string")
        return value.strip()

    def integer(self, name: str, default: int | None = None, *, minimum: int = 0) -> int:
        value = self.data.get(name, default)
        if value is None:
            raise self.error(name, "is required")
        # json.loads reads NaN and Infinity, which int() cannot take.
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole:
            raise self.error(name, f"must be a whole number, got {value!r}")
        if value < minimum:
            raise self.error(name, f"must be at least {minimum}, got {value!r}")
        return int(value)

    def decimal(
        self, name: str, *, required: bool = False, positive: bool = True
    ) -> Decimal | None:
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.error(name, "is required")
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise self.error(name, f"must be a number, got {value!r}")
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            raise self.error(name, f"must be a number, got {value!r}") from None
        if not number.is_finite() or (positive and number <= 0) or number < 0:
            raise self.error(name, f"must be a positive number, got {value!r}")
        return number


def _cpu_peak(reader: _Reader) -> CpuPeak | None:
    data = reader.data.get("cpu_peak")
    if data is None:
        return None
    sub = _Reader(f"{reader.where}: cpu_peak", data, {"n_stream", "n_unit", "frequency_hz"})
    frequency = sub.decimal("frequency_hz", required=True)
    assert frequency is not None
    return CpuPeak(
        n_stream=sub.integer("n_stream", minimum=1),
        n_unit=sub.integer("n_unit", minimum=1),
        frequency_hz=frequency,
    )


def _gpu_peak(reader: _Reader) -> GpuPeak | None:
    data = reader.data.get("gpu_peak")
    if data is None:
        return None
    keys = {"n_cuda", "n_tensor", "matrix_order", "frequency_hz"}
    sub = _Reader(f"{reader.where}: gpu_peak", data, keys)
    frequency = sub.decimal("frequency_hz", required=True)
    assert frequency is not None
    return GpuPeak(
        n_cuda=sub.integer("n_cuda", minimum=0),
        n_tensor=sub.integer("n_tensor", 0, minimum=0),
        matrix_order=sub.integer("matrix_order", 0, minimum=0),
        frequency_hz=frequency,
    )


def _node_local(reader: _Reader) -> dict[str, Decimal]:
    data = reader.data.get("node_local", {})
    if not isinstance(data, dict):
        raise reader.error("node_local", "must be an object of resource name to capacity")
    sub = _Reader(f"{reader.where}: node_local", data, set(data))
    return {name: sub.decimal(name, required=True) or Decimal(0) for name in sorted(data)}


def _hardware(reader: _Reader, field: HardwareField) -> Any:
    """One figure of the hardware registry, read as its entry says (``hardware.py``)."""
    if field.kind == "int":
        default = None if field.default is None else int(field.default)
        return reader.integer(field.name, default, minimum=int(field.minimum))
    value = reader.decimal(field.name, required=field.required)
    return field.default if value is None else value


def _partition(where: str, data: Any) -> PartitionDefinition:
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and name.strip():
        where = f"{where}: partition {name.strip()!r}"
    reader = _Reader(where, data, _PARTITION_KEYS)
    name = reader.text("name")
    nodelist = reader.text("nodelist")
    try:
        node_count = len(hostlist.expand_hostlist(nodelist))
    except hostlist.BadHostlist as error:
        raise reader.error("nodelist", f"is not a Slurm hostlist ({error})") from None
    hardware = {field.name: _hardware(reader, field) for field in HARDWARE}
    if hardware["gpus"] > 0 and "gpu_tdp_watts" not in reader.data:
        raise reader.error("gpu_tdp_watts", "is required")
    if hardware["gpus"] == 0 and "gpu_tdp_watts" in reader.data:
        raise reader.error("gpu_tdp_watts", "is given but the partition has no GPUs")
    override = reader.decimal("weight_override")
    reason = reader.text("weight_override_reason", "")
    if override is not None and not reason:
        raise reader.error("weight_override_reason", "is required with weight_override")
    spec = PartitionSpec(
        name=name,
        **hardware,
        node_local=_node_local(reader),
        weight_override=override,
    )
    try:
        spec.validate()
    except SpecError as error:
        raise SpecFileError(f"{where}: {error}") from None
    return PartitionDefinition(
        name=name,
        nodelist=nodelist,
        node_count=node_count,
        charging=spec,
        description=reader.text("description", ""),
        cpu_peak=_cpu_peak(reader),
        gpu_peak=_gpu_peak(reader),
        weight_override_reason=reason,
    )


def cluster_definition_parse(data: Any, *, source: str = "<spec>") -> ClusterDefinition:
    """Validate a decoded spec document; raise ``SpecFileError`` naming ``source``."""
    reader = _Reader(source, data, _CLUSTER_KEYS)
    name = reader.text("name")
    timezone = reader.text("timezone", "UTC")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise reader.error("timezone", f"unknown time zone {timezone!r}") from None
    raw_partitions = data.get("partitions")
    if not isinstance(raw_partitions, list) or not raw_partitions:
        raise reader.error("partitions", "must be a non-empty list")
    partitions = tuple(
        _partition(f"{source}: partitions[{index}]", item)
        for index, item in enumerate(raw_partitions)
    )
    seen: set[str] = set()
    for partition in partitions:
        if partition.name in seen:
            raise SpecFileError(f"{source}: partition {partition.name!r} is defined twice")
        seen.add(partition.name)
    slurm_cluster_name = reader.text("slurm_cluster_name", name)
    intensity = reader.decimal("grid_intensity_g_per_kwh", positive=False)
    if intensity is not None and (
        intensity > _MAX_G_PER_KWH or intensity != intensity.quantize(Decimal("0.001"))
    ):
        raise reader.error(
            "grid_intensity_g_per_kwh",
            f"must be at most {_MAX_G_PER_KWH:,} g/kWh with 3 decimal places, got {intensity}",
        )
    return ClusterDefinition(
        name=name,
        timezone=timezone,
        description=reader.text("description", ""),
        partitions=partitions,
        slurm_cluster_name="" if slurm_cluster_name == name else slurm_cluster_name,
        grid_intensity_g_per_kwh=intensity,
    )


def cluster_definition_load(path: Path) -> ClusterDefinition:
    """Read and validate a spec file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecFileError(f"{path}: cannot be read ({error.strerror})") from None
    return cluster_definition_parse(spec_document_decode(text, source=str(path)), source=str(path))


def spec_document_decode(text: str, *, source: str = "<spec>") -> Any:
    """A spec document's JSON text decoded (not yet validated: ``cluster_definition_parse``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecFileError(
            f"{source}: line {error.lineno}: not valid JSON ({error.msg})"
        ) from None

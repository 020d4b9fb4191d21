"""Hardware catalogue schema: :class:`GpuSpec` (one file per GPU), :class:`LinkSpec` (one per link).

A hardware file records what a datasheet or a public measurement says, never a fitted fudge factor
(kernel efficiencies live in the calibration table). YAML keys equal field names; quantities accept
unit strings (``"989.4 TFLOPS"``, ``"80 GiB"``, ``"3.35 TB/s"``, ``"400 Gb/s"``, ``"2 us"``) and are
stored as SI floats: FLOP/s, bytes, bytes/s, seconds. Every non-null fact carries an entry in
``sources`` (field name -> URL or document name); a fact without a source is a validation error, so
nothing enters the catalogue unexplained. Unknown values are ``null`` with a line in ``notes``.

Conventions:

* ``bf16_flops_per_s`` / ``fp8_flops_per_s`` are **dense** tensor-core peaks. NVIDIA datasheets
  print the 2:4-sparse figure with an asterisk; dense = sparse / 2.
* Bandwidths are **per GPU (or per port), per direction**. A "900 GB/s NVLink" datasheet figure is
  bidirectional, i.e. 450 GB/s here.
* ``memory_bytes`` is what the part exposes; HBM parts marketed as "80GB" are 80 GiB parts.
* ``sm_count`` counts the enabled streaming multiprocessors (AMD: compute units) of the product, not
  of the full die (H100 SXM5: 132 of GH100's 144); the tiled attention cost model spreads CTAs over
  them. Optional (null = unknown).
* ``tdp_w``, ``sm_count`` and ``price`` may be left out of a GPU of your own (what pricing needs is the peaks,
  memory and links); each missing one is a warning line (:meth:`GpuSpec.missing_fact_warnings`).
"""

import math
import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)

from pdplan.specs.base import FrozenModel
from pdplan.units import parse_flops_per_s, parse_rate_bytes_per_s, parse_size_bytes, parse_time_s

GPU_FACT_FIELDS: tuple[str, ...] = (
    "bf16_flops_per_s",
    "fp8_flops_per_s",
    "memory_bytes",
    "memory_bytes_per_s",
    "scale_up_bytes_per_s",
    "pcie_gen",
    "tdp_w",
    "gpus_per_node",
    "price",
    "sm_count",
)
"""GpuSpec fields that are facts: each non-null one needs a ``sources`` entry."""

LINK_FACT_FIELDS: tuple[str, ...] = ("line_rate_bytes_per_s", "per_message_latency_s", "efficiency")
"""LinkSpec fields that are facts: each needs a ``sources`` entry."""

_ID_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"
_WATTS = re.compile(r"^\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*W?\s*$")


def _positive(value: float) -> float:
    """Reject zero, negative and non-finite quantities, naming the allowed range."""
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"must be a finite number > 0 (allowed range: 0 < value < inf), got {value!r}")
    return value


def _fraction(value: float) -> float:
    """An efficiency: a fraction of line rate in (0, 1]."""
    if not math.isfinite(value) or not 0.0 < value <= 1.0:
        raise ValueError(f"must be a fraction in the range 0 < value <= 1, got {value!r}")
    return value


def _parse_watts(value: object) -> object:
    """Accept ``700``, ``700.0`` or ``"700 W"``; leave anything else for pydantic to reject."""
    if isinstance(value, str):
        match = _WATTS.match(value)
        if match is None:
            raise ValueError(f"cannot read {value!r}; expected a power like 700 or '700 W'")
        return float(match["num"])
    return value


def _not_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    return value


FlopsPerS = Annotated[float, BeforeValidator(parse_flops_per_s), AfterValidator(_positive)]
Bytes = Annotated[float, BeforeValidator(parse_size_bytes), AfterValidator(_positive)]
BytesPerS = Annotated[float, BeforeValidator(parse_rate_bytes_per_s), AfterValidator(_positive)]
Seconds = Annotated[float, BeforeValidator(parse_time_s), AfterValidator(_positive)]
Watts = Annotated[float, BeforeValidator(_parse_watts), BeforeValidator(_not_bool), AfterValidator(_positive)]
UsdPerHour = Annotated[float, BeforeValidator(_not_bool), AfterValidator(_positive)]
Fraction = Annotated[float, BeforeValidator(_not_bool), AfterValidator(_fraction)]
CatalogueId = Annotated[str, Field(pattern=_ID_PATTERN, min_length=1, max_length=64)]


def _check_sources(sources: dict[str, str], facts: dict[str, object], allowed: tuple[str, ...]) -> None:
    """Every non-null fact has a non-blank source; every source key names a fact field."""
    unknown = sorted(set(sources) - set(allowed))
    if unknown:
        raise ValueError(f"sources: unknown key(s) {unknown}; allowed keys are the fact fields {list(allowed)}")
    missing = [field for field in allowed if facts[field] is not None and not sources.get(field, "").strip()]
    if missing:
        raise ValueError(
            f"sources: no source given for fact field(s) {missing}; every non-null fact needs "
            "a 'sources: {field: URL or document}' entry"
        )


class PriceRange(FrozenModel):
    """Approximate on-demand rental price per GPU-hour, in US dollars, as a low-high range."""

    low_usd_per_gpu_hour: UsdPerHour
    high_usd_per_gpu_hour: UsdPerHour

    @model_validator(mode="after")
    def _ordered(self) -> "PriceRange":
        if self.low_usd_per_gpu_hour > self.high_usd_per_gpu_hour:
            raise ValueError(
                f"low_usd_per_gpu_hour ({self.low_usd_per_gpu_hour}) must be <= "
                f"high_usd_per_gpu_hour ({self.high_usd_per_gpu_hour})"
            )
        return self

    @property
    def typical_usd_per_gpu_hour(self) -> float:
        """Midpoint of the range: ``PriceRange(1.9, 5.0).typical_usd_per_gpu_hour == 3.45``."""
        return 0.5 * (self.low_usd_per_gpu_hour + self.high_usd_per_gpu_hour)

    @property
    def typical(self) -> float:
        """Shorthand for :attr:`typical_usd_per_gpu_hour` (USD per GPU-hour)."""
        return self.typical_usd_per_gpu_hour


MIN_GPU_MEMORY_BYTES = 4 * 2**30
MAX_GPU_MEMORY_BYTES = 4 * 2**40
"""Plausibility bounds on one accelerator's memory (issue #26: a GPU with 1 byte is bad input, not a plan): the
smallest accelerators used for LLM serving carry 16 GB (T4) and the largest announced 288 GB (B300) to 1 TB-class
parts; 4 GiB and 4 TiB leave a wide margin each side."""


class GpuSpec(FrozenModel):
    """One accelerator as its datasheet describes it; all quantities SI after validation."""

    schema_version: Literal[1]
    name: CatalogueId
    display_name: Annotated[str, Field(min_length=1)]
    vendor: Literal["nvidia", "amd"]
    architecture: Literal["ampere", "ada", "hopper", "blackwell", "cdna3"]
    bf16_flops_per_s: FlopsPerS
    fp8_flops_per_s: FlopsPerS | None
    memory_bytes: Bytes
    memory_bytes_per_s: BytesPerS
    scale_up_fabric: Literal["nvlink3", "nvlink4", "nvlink5", "infinity-fabric", "pcie"]
    scale_up_bytes_per_s: BytesPerS
    pcie_gen: Annotated[int, Field(strict=True, ge=1, le=7)]
    tdp_w: Watts | None = None
    gpus_per_node: Annotated[int, Field(strict=True, ge=1)]
    price: PriceRange | None = None
    sm_count: Annotated[int, Field(strict=True, ge=1, le=4096)] | None = None
    sources: dict[str, str]
    notes: list[str] = Field(default_factory=list)

    @field_validator("name", mode="before")
    @classmethod
    def _lowercase_name(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _plausible_memory(self) -> "GpuSpec":
        if not MIN_GPU_MEMORY_BYTES <= self.memory_bytes <= MAX_GPU_MEMORY_BYTES:
            raise ValueError(
                f"memory_bytes {self.memory_bytes:.4g} is outside the plausible 4 GiB to 4 TiB of one accelerator"
            )
        return self

    @model_validator(mode="after")
    def _sourced(self) -> "GpuSpec":
        facts = {field: getattr(self, field) for field in GPU_FACT_FIELDS}
        _check_sources(self.sources, facts, GPU_FACT_FIELDS)
        return self

    def missing_fact_warnings(self) -> list[str]:
        """One line per optional fact this file leaves out (``tdp_w``, ``sm_count``, ``price``) and what it costs."""
        effects = {
            "tdp_w": "no power figure in the catalogue listing",
            "sm_count": "the tiled attention model takes its kernel table's SM count",
            "price": "cost objectives and $/h figures are not available (--price NAME=USD sets one)",
        }
        return [
            f"GPU {self.name} gives no {field}: {effect}"
            for field, effect in effects.items()
            if getattr(self, field) is None
        ]


class LinkSpec(FrozenModel):
    """One transport (NVLink, PCIe, RDMA NIC, TCP NIC) as a KV-transfer or collective link."""

    schema_version: Literal[1]
    name: CatalogueId
    display_name: Annotated[str, Field(min_length=1)]
    kind: Literal["nvlink", "pcie", "rdma", "tcp"]
    scope: Literal["intra-node", "inter-node", "cross-datacenter"]
    line_rate_bytes_per_s: BytesPerS
    per_message_latency_s: Seconds
    efficiency: Fraction
    sources: dict[str, str]
    notes: list[str] = Field(default_factory=list)

    @field_validator("name", mode="before")
    @classmethod
    def _lowercase_name(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @property
    def achievable_bytes_per_s(self) -> float:
        """Large-transfer throughput: line rate x efficiency (bytes/s, one direction)."""
        return self.line_rate_bytes_per_s * self.efficiency

    @model_validator(mode="after")
    def _sourced(self) -> "LinkSpec":
        facts = {field: getattr(self, field) for field in LINK_FACT_FIELDS}
        _check_sources(self.sources, facts, LINK_FACT_FIELDS)
        return self

"""Storage-tier catalogue schema: :class:`StorageSpec`, one file per KV-cache tier below the GPU's HBM.

A storage file describes where evicted or offloaded KV blocks can live and how fast they come back: host DRAM
behind PCIe, local NVMe SSDs (a RAID of n drives), or a remote pool over a storage NIC (3FS, Mooncake Store). Like
the GPU and link files (:mod:`pdplan.specs.hardware`) it records what a datasheet or a public measurement says,
every non-null fact with an entry in ``sources``; quantities accept unit strings (``"2 TiB"``, ``"50 GB/s"``,
``"100 us"``) and are stored in SI units. Unknown values are ``null`` with a line in ``notes``.

Conventions:

* ``capacity_bytes`` and ``read_bytes_per_s`` are **per node** (the medium's own limit: DRAM channels, the sum of the
  SSDs, the storage NIC); a remote pool's capacity is set by its deployment and may be ``null``.
* ``gpu_path_bytes_per_s`` is what one GPU can pull from the tier, one direction (PCIe host-to-device DMA, or the
  GPU's share of the storage path); the slower of it and the medium's share bounds a load
  (:class:`pdplan.cache.tiers.CacheTier`).
* ``price`` is in US dollars per GiB-hour of capacity; where it is derived from a purchase price, the amortisation
  period is an assumption and the note says so.
"""

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from pdplan.specs.base import FrozenModel
from pdplan.specs.hardware import Bytes, BytesPerS, CatalogueId, Seconds, _check_sources, _not_bool

STORAGE_FACT_FIELDS: tuple[str, ...] = (
    "capacity_bytes",
    "capacity_options_bytes",
    "read_bytes_per_s",
    "write_bytes_per_s",
    "gpu_path_bytes_per_s",
    "latency_s",
    "drives",
    "drive_read_bytes_per_s",
    "drive_read_iops",
    "price_usd_per_gib_hour",
)
"""StorageSpec fields that are facts: each non-null one needs a ``sources`` entry."""


def _positive_number(value: float) -> float:
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"must be a finite number > 0 (allowed range: 0 < value < inf), got {value!r}")
    return value


PositiveNumber = Annotated[float, BeforeValidator(_not_bool), AfterValidator(_positive_number)]


class StorageSpec(FrozenModel):
    """One storage tier for KV blocks; all quantities SI after validation."""

    schema_version: Literal[1]
    name: CatalogueId
    display_name: Annotated[str, Field(min_length=1)]
    kind: Literal["host-dram", "local-ssd", "remote-pool"]
    capacity_bytes: Bytes | None
    capacity_options_bytes: list[Bytes] = Field(default_factory=list)
    read_bytes_per_s: BytesPerS
    write_bytes_per_s: BytesPerS | None = None
    gpu_path: Annotated[str, Field(min_length=1)]
    """What carries a read into one GPU (e.g. ``PCIe Gen5 x16 host-to-device DMA``)."""
    gpu_path_bytes_per_s: BytesPerS
    latency_s: Seconds | None
    drives: Annotated[int, Field(strict=True, ge=1)] | None = None
    drive_read_bytes_per_s: BytesPerS | None = None
    drive_read_iops: PositiveNumber | None = None
    price_usd_per_gib_hour: PositiveNumber | None = None
    sources: dict[str, str]
    notes: list[str] = Field(default_factory=list)

    @field_validator("name", mode="before")
    @classmethod
    def _lowercase_name(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _consistent(self) -> "StorageSpec":
        if self.kind != "remote-pool" and self.capacity_bytes is None:
            raise ValueError(f"capacity_bytes: required for a {self.kind} tier (only a remote pool may leave it null)")
        if self.kind == "local-ssd" and self.drives is None:
            raise ValueError("drives: required for a local-ssd tier (the number of drives in the RAID)")
        if self.drives is not None and self.drive_read_bytes_per_s is not None:
            aggregate = self.drives * self.drive_read_bytes_per_s
            if self.read_bytes_per_s > aggregate * (1 + 1e-9):
                raise ValueError(
                    f"read_bytes_per_s ({self.read_bytes_per_s:.4g}) exceeds drives x drive_read_bytes_per_s "
                    f"({aggregate:.4g})"
                )
        facts = {field: getattr(self, field) for field in STORAGE_FACT_FIELDS}
        facts["capacity_options_bytes"] = self.capacity_options_bytes or None
        _check_sources(self.sources, facts, STORAGE_FACT_FIELDS)
        return self

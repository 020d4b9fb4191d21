"""A sweep's grid file (``pdplan sweep GRID.yaml``, docs/sweep.md §2): a base scenario and the points to run on it.

One frozen model at the boundary, :class:`SweepSpec`: a ``base`` scenario (a path relative to the grid file, an inline
mapping, or none for the bundled default), named SLO tiers, and either a ``grid:`` (the cartesian product of its
dimensions) or a ``list:`` of points. A point (:class:`SweepPoint`) overrides at most one value per dimension:
``model``, ``gpu`` (the GPU types searched, both roles), ``workload``, ``engine``, ``slo`` (a tier's name),
``rate`` (the forecast, req/s) or ``gpus`` (a GPU budget).

Expansion order (docs/sweep.md §2): the dimensions in :data:`DIMENSIONS` order, the last varying fastest, each in the
order the file lists its values; a list keeps its own order. :meth:`SweepPoint.point_id` is a stable hash of the
point's overrides (not of its position), so a rerun of an edited grid still finds the points it already ran.
"""

import hashlib
import itertools
import json
import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from pdplan.specs.base import FrozenModel
from pdplan.units import parse_time_s

MAX_SWEEP_POINTS = 100_000
"""Points of one sweep. The expanded points, the set of finished point ids and the final table are held in memory:
about 1 kB per row and at most 50 rows per point (``top``), so the ceiling bounds the CSV built at the end to a few
GB in the worst case and about 100 MB at the default ``top``; at the measured 1–2 points/s per core (docs/sweep.md
§5) it is also a day of a 2-core machine, beyond which a sweep should be split into several files."""

MAX_TOP = 50
"""Plans per point (``top``), the same ceiling as ``pdplan optimize --top``."""

DIMENSIONS = ("model", "gpu", "workload", "engine", "slo", "gpus", "rate")
"""The grid's dimensions in expansion order (the last varies fastest)."""

Name = Annotated[str, Field(min_length=1, max_length=4096)]
GpuList = Annotated[tuple[Name, ...], Field(min_length=1, max_length=64)]
"""The GPU types one point searches (both roles), or deploys (``evaluate``: one)."""


class SloTier(FrozenModel):
    """A named SLO set: TTFT and TPOT thresholds (unit strings or seconds), and optionally the percentile and the
    target attainment (absent: the base scenario's)."""

    ttft: str | float
    tpot: str | float
    percentile: Annotated[float, Field(gt=0.0, lt=100.0)] | None = None
    attainment: Annotated[float, Field(gt=0.0, le=1.0)] | None = None

    @field_validator("ttft", "tpot")
    @classmethod
    def _positive_time(cls, value: str | float) -> str | float:
        seconds = parse_time_s(value)
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"must be a finite time > 0, got {value!r}")
        return value

    def seconds(self) -> tuple[float, float]:
        """(TTFT, TPOT) thresholds in seconds."""
        return parse_time_s(self.ttft), parse_time_s(self.tpot)


def _gpu_list(value: object) -> object:
    """A GPU list; a bare name is a list of one."""
    return [value] if isinstance(value, str) else value


class SweepPoint(FrozenModel):
    """One scenario of a sweep: the base scenario with these values replaced (None keeps the base's)."""

    model: Name | None = None
    gpu: GpuList | None = None
    workload: Name | None = None
    engine: Name | None = None
    slo: Name | None = None
    gpus: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    rate: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] | None = None

    @field_validator("gpu", mode="before")
    @classmethod
    def _one_gpu_is_a_list(cls, value: object) -> object:
        return _gpu_list(value)

    @model_validator(mode="after")
    def _rate_or_budget(self) -> "SweepPoint":
        if self.rate is not None and self.gpus is not None:
            raise ValueError("give rate (a forecast to meet) or gpus (a budget), not both")
        return self

    def overrides(self) -> dict[str, Any]:
        """The values this point sets, as JSON-ready data (the GPU list as a list)."""
        data = self.model_dump(exclude_none=True)
        if "gpu" in data:
            data["gpu"] = list(data["gpu"])
        return data

    def point_id(self) -> str:
        """A stable hash of :meth:`overrides` (12 hex digits of SHA-256 over the canonical JSON: sorted keys, no
        spaces), independent of the point's position and of the order its keys were written in."""
        canonical = json.dumps(self.overrides(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


Values = Annotated[list[Any], Field(min_length=1)]


class SweepGrid(FrozenModel):
    """The dimensions whose cartesian product is taken; each a non-empty list of values (``gpu``: a list of GPU
    lists). ``rate`` and ``gpus`` exclude each other: a plan meets a forecast or fits a budget."""

    model: list[Name] | None = Field(default=None, min_length=1)
    gpu: list[GpuList] | None = Field(default=None, min_length=1)
    workload: list[Name] | None = Field(default=None, min_length=1)
    engine: list[Name] | None = Field(default=None, min_length=1)
    slo: list[Name] | None = Field(default=None, min_length=1)
    gpus: list[Annotated[int, Field(ge=1, le=1_000_000)]] | None = Field(default=None, min_length=1)
    rate: list[Annotated[float, Field(gt=0.0, allow_inf_nan=False)]] | None = Field(default=None, min_length=1)

    @field_validator("gpu", mode="before")
    @classmethod
    def _one_gpu_is_a_list(cls, value: object) -> object:
        return [_gpu_list(v) for v in value] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _shape(self) -> "SweepGrid":
        if self.rate is not None and self.gpus is not None:
            raise ValueError("give rate (forecasts to meet) or gpus (budgets), not both")
        if not any(getattr(self, d) for d in DIMENSIONS):
            raise ValueError(f"a grid needs at least one dimension ({', '.join(DIMENSIONS)})")
        for dim in DIMENSIONS:
            values = getattr(self, dim) or []
            if len(set(values)) != len(values):
                raise ValueError(f"{dim}: a value is listed twice")
        return self

    def size(self) -> int:
        """Points in the product (computed without expanding it)."""
        return math.prod(len(getattr(self, d)) for d in DIMENSIONS if getattr(self, d))

    def expand(self) -> list[SweepPoint]:
        """The product, in :data:`DIMENSIONS` order with the last dimension varying fastest."""
        dims = [d for d in DIMENSIONS if getattr(self, d)]
        combos = itertools.product(*(getattr(self, d) for d in dims))
        return [SweepPoint.model_validate(dict(zip(dims, combo, strict=True))) for combo in combos]


class SweepSpec(FrozenModel):
    """A grid file: the base scenario, the optimiser's objective and plans per point, SLO tiers, and the points."""

    schema_version: Literal[1] = 1
    description: str = ""
    base: Name | dict[str, Any] | None = None
    """The scenario every point starts from: a path relative to the grid file, an inline scenario mapping, or None
    for the bundled default scenario."""
    objective: Literal["gpus", "cost", "tokens-per-dollar"] | None = None
    """``optimize``'s objective (None: the base scenario's, as ``pdplan optimize``)."""
    top: Annotated[int, Field(ge=1, le=MAX_TOP)] = 5
    """Plans per point, one table row each (``optimize``; ``evaluate`` has one)."""
    slo_tiers: dict[Name, SloTier] = Field(default_factory=dict)
    grid: SweepGrid | None = None
    points: list[SweepPoint] | None = Field(default=None, alias="list", min_length=1)

    @model_validator(mode="after")
    def _shape(self) -> "SweepSpec":
        if (self.grid is None) == (self.points is None):
            raise ValueError("give either grid: (dimensions to combine) or list: (points), not both or neither")
        size = self.grid.size() if self.grid is not None else len(self.points or [])
        if size > MAX_SWEEP_POINTS:
            raise ValueError(f"{size:,} points; at most {MAX_SWEEP_POINTS:,} per sweep (pdplan.specs.sweep)")
        tiers = self.grid.slo if self.grid is not None else [p.slo for p in self.points or []]
        for name in tiers or []:
            if name is not None and name not in self.slo_tiers:
                known = ", ".join(sorted(self.slo_tiers)) or "none defined"
                raise ValueError(f"slo tier {name!r} is not in slo_tiers (defined: {known})")
        return self

    def expand(self) -> list[SweepPoint]:
        """The points in sweep order; a point listed twice is refused (its id would be run once)."""
        points = self.grid.expand() if self.grid is not None else list(self.points or [])
        seen: dict[str, int] = {}
        for i, point in enumerate(points):
            first = seen.setdefault(point.point_id(), i)
            if first != i:
                raise ValueError(f"list item {i} repeats item {first} ({point.overrides()})")
        return points

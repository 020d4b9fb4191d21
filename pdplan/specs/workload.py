"""Workload specs: token-length distributions and the workload file schema (docs/architecture.md §4).

A workload is either two independent length distributions (``input_tokens``, ``output_tokens``;
the laws and their conventions are in :mod:`pdplan.specs.length_laws`) or one trace CSV giving
both lengths per request.

* ``trace``: a CSV with header ``input_tokens,output_tokens[,arrival_s]``; a relative ``file`` is
  resolved against the folder of the YAML that names it (pass ``context={"base_dir": folder}`` to
  validation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pdplan.specs.base import FrozenModel
from pdplan.specs.length_laws import FixedDist, HistogramDist, LognormalDist, NormalDist, ParametricDist, UniformDist


class TraceDist(FrozenModel):
    """A CSV trace (``input_tokens,output_tokens[,arrival_s]``); gives both lengths jointly."""

    dist: Literal["trace"] = "trace"
    file: Path

    @field_validator("file")
    @classmethod
    def _resolve(cls, value: Path, info: ValidationInfo) -> Path:
        base = (info.context or {}).get("base_dir")
        if not value.is_absolute() and base is not None:
            value = Path(base) / value
        return value


LengthDist = Annotated[
    FixedDist | UniformDist | NormalDist | LognormalDist | HistogramDist | TraceDist,
    Field(discriminator="dist"),
]
DIST_KINDS = ("fixed", "uniform", "normal", "lognormal", "histogram", "trace")


class WorkloadSpec(FrozenModel):
    """A workload: independent input/output length laws, or one trace; Poisson or trace arrivals."""

    name: str | None = None
    description: str = ""
    source: str = Field(default="", description="citation for the numbers")
    is_fit: bool = Field(default=False, description="parameters fitted, not published")
    fit_note: str = ""
    input_tokens: LengthDist | None = None
    output_tokens: LengthDist | None = None
    trace: TraceDist | None = None
    arrival: Literal["poisson", "trace"] = "poisson"
    schema_version: Literal[1] = 1

    @model_validator(mode="before")
    @classmethod
    def _trace_as_dist(cls, data: Any) -> Any:
        """Accept ``input_tokens: {dist: trace, file: F}`` (the §4 form) and ``trace: F`` (the README's) as
        ``trace: {file: F}``."""
        if not isinstance(data, dict):
            return data
        if isinstance(data.get("trace"), str | Path):
            data = {**data, "trace": {"file": data["trace"]}}
        inp, out = data.get("input_tokens"), data.get("output_tokens")
        if isinstance(inp, dict) and inp.get("dist") == "trace":
            if "trace" in data:
                raise ValueError("give the trace once: trace: or input_tokens: {dist: trace}")
            if out is not None and out != inp:
                raise ValueError("a trace gives both lengths; omit output_tokens")
            data = {k: v for k, v in data.items() if k not in ("input_tokens", "output_tokens")}
            data["trace"] = inp
        return data

    @model_validator(mode="after")
    def _shape(self) -> WorkloadSpec:
        if isinstance(self.output_tokens, TraceDist):
            raise ValueError("output_tokens: a trace gives both lengths; use trace: {file: ...}")
        if self.trace is not None and (self.input_tokens or self.output_tokens):
            raise ValueError("give either trace or input_tokens + output_tokens, not both")
        if self.trace is None:
            missing = [f for f in ("input_tokens", "output_tokens") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"missing {' and '.join(missing)} (or a trace: {{file: ...}})")
        if self.arrival == "trace" and self.trace is None:
            raise ValueError("arrival: trace needs a trace file with an arrival_s column")
        if self.is_fit and not self.fit_note.strip():
            raise ValueError("is_fit: true needs a fit_note saying what was fitted to what")
        return self

    def parametric(self) -> tuple[ParametricDist, ParametricDist] | None:
        """(input, output) laws for a distribution workload; None for a trace workload."""
        inp, out = self.input_tokens, self.output_tokens
        if self.trace is not None or inp is None or out is None:
            return None
        assert not isinstance(inp, TraceDist)
        assert not isinstance(out, TraceDist)
        return inp, out


def allowed_fields(loc: tuple[str | int, ...]) -> list[str]:
    """Field names allowed at a pydantic error location (for 'unknown field' messages)."""
    kinds: dict[str, type[BaseModel]] = {
        "fixed": FixedDist,
        "uniform": UniformDist,
        "normal": NormalDist,
        "lognormal": LognormalDist,
        "histogram": HistogramDist,
        "trace": TraceDist,
    }
    model: type[BaseModel] = WorkloadSpec
    if len(loc) >= 3 and loc[0] in ("input_tokens", "output_tokens"):
        model = kinds.get(str(loc[1]), WorkloadSpec)
    elif len(loc) >= 2 and loc[0] == "trace":
        model = TraceDist
    return list(model.model_fields)

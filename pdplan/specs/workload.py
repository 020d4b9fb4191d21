"""Workload specs: token-length distributions and the workload file schema (docs/architecture.md §4).

A workload is one of: two independent length distributions (``input_tokens``, ``output_tokens``;
the laws and their conventions are in :mod:`pdplan.specs.length_laws`), one trace giving both
lengths per request, multi-turn ``sessions`` or a ``shared_prefix`` workload (both in
:mod:`pdplan.specs.reuse`, docs/reuse_workloads.md §1, §2). ``arrival`` is the arrival process
(:mod:`pdplan.specs.arrivals`, docs/reuse_workloads.md §4).

* ``trace``: a CSV with header ``input_tokens,output_tokens[,arrival_s]``, or a Mooncake JSONL trace
  (``format: mooncake``, with its ``block_tokens``; docs/reuse_workloads.md §3). The format follows
  the file's suffix (``.jsonl`` is Mooncake's JSONL, anything else the CSV); a ``format`` that
  disagrees with it is an error. A relative ``file`` is resolved against the folder of the YAML
  that names it (pass ``context={"base_dir": folder}`` to validation).
"""

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pdplan.specs.arrivals import ArrivalField, ArrivalProcess, arrival_process, normalise_arrival
from pdplan.specs.base import FrozenModel
from pdplan.specs.length_laws import FixedDist, HistogramDist, LognormalDist, NormalDist, ParametricDist, UniformDist
from pdplan.specs.reuse import SessionsSpec, SharedPrefixSpec, reuse_allowed_fields

TraceFormat = Literal["csv", "mooncake"]


def trace_format_of(file: str | Path) -> TraceFormat:
    """The trace format a file name implies: ``.jsonl`` is Mooncake's JSONL, anything else the CSV."""
    return "mooncake" if Path(file).suffix.lower() == ".jsonl" else "csv"


class TraceDist(FrozenModel):
    """A trace giving both lengths jointly: a CSV (``input_tokens,output_tokens[,arrival_s]``) or a Mooncake
    JSONL trace with block hashes of ``block_tokens`` tokens."""

    dist: Literal["trace"] = "trace"
    file: Path
    format: TraceFormat | None = None
    block_tokens: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _format(self) -> "TraceDist":
        implied = trace_format_of(self.file)
        if self.format is not None and self.format != implied:
            raise ValueError(
                f"format {self.format} does not match the file name {self.file.name!r}: a .jsonl file is a "
                "Mooncake trace, any other a CSV"
            )
        object.__setattr__(self, "format", implied)
        if implied == "csv" and self.block_tokens is not None:
            raise ValueError("block_tokens applies to a Mooncake trace (format: mooncake) only")
        if implied == "mooncake" and self.block_tokens is None:
            raise ValueError("a Mooncake trace needs block_tokens (the workload loader fills Mooncake's published 512)")
        return self

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
    sessions: SessionsSpec | None = None
    shared_prefix: SharedPrefixSpec | None = None
    arrival: ArrivalField = "poisson"
    schema_version: Literal[1] = 1

    @field_validator("arrival", mode="before")
    @classmethod
    def _arrival_form(cls, value: Any) -> Any:
        return normalise_arrival(value)

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
    def _shape(self) -> "WorkloadSpec":
        if isinstance(self.output_tokens, TraceDist):
            raise ValueError("output_tokens: a trace gives both lengths; use trace: {file: ...}")
        given = [name for name in ("trace", "sessions", "shared_prefix") if getattr(self, name) is not None]
        if given and (self.input_tokens or self.output_tokens):
            raise ValueError(f"give either {given[0]} or input_tokens + output_tokens, not both")
        if len(given) > 1:
            raise ValueError(f"give one of trace, sessions or shared_prefix, not {' and '.join(given)}")
        if not given:
            missing = [f for f in ("input_tokens", "output_tokens") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"missing {' and '.join(missing)} (or a trace, sessions or shared_prefix block)")
        if self.arrival == "trace" and self.trace is None:
            raise ValueError("arrival: trace needs a trace file with an arrival_s column")
        if self.is_fit and not self.fit_note.strip():
            raise ValueError("is_fit: true needs a fit_note saying what was fitted to what")
        return self

    def arrival_process(self) -> ArrivalProcess:
        """The arrival process with its squared coefficient of variation ``ca2`` (None for a trace's own times)."""
        return arrival_process(self.arrival)

    def parametric(self) -> tuple[ParametricDist, ParametricDist] | None:
        """(input, output) laws for a distribution workload; None for a trace workload.

        A ``sessions`` or ``shared_prefix`` workload gives its per-request marginals: the prompt law on whole
        tokens (a ``histogram`` law, :mod:`pdplan.specs.token_pmf`) and the output law. Input and output are
        independent there too: a turn's output is drawn apart from its prompt, a question's from its prefix.
        """
        if self.sessions is not None:
            return self.sessions.prompt_law(), self.sessions.output_tokens
        if self.shared_prefix is not None:
            return self.shared_prefix.prompt_law(), self.shared_prefix.output_tokens
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
    nested = reuse_allowed_fields(loc)
    if nested is not None:
        return nested
    model: type[BaseModel] = WorkloadSpec
    if len(loc) >= 3 and loc[0] in ("input_tokens", "output_tokens"):
        model = kinds.get(str(loc[1]), WorkloadSpec)
    elif len(loc) >= 2 and loc[0] == "trace":
        model = TraceDist
    return list(model.model_fields)

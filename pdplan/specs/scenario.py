"""Scenario: one deployment question in YAML — model, hardware per role, link, workload, SLO.

YAML keys equal the field names (no merge magic; STYLE.md). Loaded by :func:`load_scenario`, which
turns every failure into one-line :class:`~pdplan.errors.SpecError` naming the file and the field.

Two deployment shapes (``mode``):

* ``disaggregated`` (xPyD): ``prefill: {gpu, tp, pp, count}`` and ``decode: {gpu, tp, pp, count}``,
  joined by ``link`` with ``granularity`` request | layer | chunk and ``routing`` of prompts over
  the prefill pool (random | round-robin | least-work).
* ``colocated``: ``colocated: {gpu, tp, pp, count, scheduler, chunk_tokens}`` — every instance does
  both phases, with ``prefill-first`` (vanilla vLLM) or ``chunked`` (Sarathi-Serve) batching.

``routing`` is the router's policy for both pools, as in vLLM's disaggregated proxy and SGLang's
mini load balancer (one policy picks the prefill and the decode instance): ``random``,
``round-robin`` (decode in prefill-completion order) or ``least-work`` (prefill: least unfinished
work; decode: fewest outstanding requests).

``prefill_max_batch_tokens`` (a positive integer; default none = one prompt at a time) turns on
batched prefill on each prefill instance of a disaggregated deployment, with this token budget
(vLLM's ``max_num_batched_tokens``): an idle instance takes the FCFS head requests whose prompt
tokens fit the budget (always at least one; a longer prompt runs alone) and all finish together
(:mod:`pdplan.queueing.batched`, :mod:`pdplan.serving.prefill_pool`). Colocated deployments
ignore it (their batching is ``scheduler``/``chunk_tokens``), so a search may swap modes freely.

``workload`` is an inline block (ARCHITECTURE §4), a bundled preset name (``chat``) or a path to a
workload YAML (relative to the scenario file). SLO times accept unit strings (``"250ms"``); inside
they are seconds. Engine settings left out (``max_num_seqs``, ``gpu_memory_utilization``,
``chunk_tokens``) come from ``pdplan/data/serving_defaults.yaml`` (with sources).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pdplan.errors import SpecError
from pdplan.specs.loading import first_error_line, read_yaml_mapping
from pdplan.specs.workload import WorkloadSpec
from pdplan.units import parse_time_s
from pdplan.validation import register_validator

Mode = Literal["disaggregated", "colocated"]
Granularity = Literal["request", "layer", "chunk"]
Routing = Literal["random", "round-robin", "least-work"]
Scheduler = Literal["prefill-first", "chunked"]
Dtype = Literal["bf16", "fp8"]
Convention = Literal["A", "B"]
PosInt = Annotated[int, Field(strict=True, ge=1)]
SCENARIO_KEYS = ("mode", "prefill", "decode", "colocated", "slo")
"""Top-level keys by which ``pdplan validate`` recognises a scenario file."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RoleSpec(_Frozen):
    """One instance type of a pool: GPU (name or path), tensor/pipeline parallelism, instances."""

    gpu: Annotated[str, Field(min_length=1)]
    tp: PosInt = 1
    pp: PosInt = 1
    count: PosInt = 1

    @property
    def gpus(self) -> int:
        """GPUs in the pool: ``tp·pp·count``."""
        return self.tp * self.pp * self.count


class ColocatedSpec(RoleSpec):
    """Colocated instances; ``chunk_tokens`` None → serving default ``prefill_chunk_tokens``."""

    scheduler: Scheduler = "chunked"
    chunk_tokens: PosInt | None = None


def _seconds(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("expected a time such as '2s' or '100ms', got a boolean")
    if isinstance(value, str):
        return parse_time_s(value)
    return value


Seconds = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]


class SloSpec(_Frozen):
    """TTFT/TPOT thresholds (s), the percentile they are read at, and the target attainment.

    Defaults: DistServe's (OSDI'24 §6) 90 % attainment convention; 2 s / 100 ms are placeholder
    chat-style thresholds (ARCHITECTURE §2 "default P90, 90 %"), meant to be set per scenario.
    """

    ttft: Seconds = 2.0
    tpot: Seconds = 0.1
    percentile: Annotated[float, Field(gt=0.0, lt=100.0)] = 90.0
    attainment: Annotated[float, Field(gt=0.0, le=1.0)] = 0.9

    @field_validator("ttft", "tpot", mode="before")
    @classmethod
    def _parse_time(cls, value: object) -> object:
        return _seconds(value)


class SearchSpace(_Frozen):
    """What ``pdplan optimize`` may choose; a field left out keeps the scenario's own value.

    ``gpus`` is the GPU budget (maximise goodput per GPU within it); ``rate`` a target request rate (meet it at the
    fewest GPUs or the lowest $/h, per ``objective``). ``tp``/``pp`` are tried per role within one node;
    ``max_instances`` bounds x and y (and the colocated count); ``max_num_seqs`` lists decode batch caps.
    """

    prefill_gpus: list[str] | None = None
    decode_gpus: list[str] | None = None
    gpus: PosInt | None = None
    tp: list[PosInt] | None = None
    pp: list[PosInt] | None = None
    max_instances: PosInt | None = None
    granularities: list[Granularity] | None = None
    links: list[str] | None = None
    routing: list[Routing] | None = None
    max_num_seqs: list[PosInt] | None = None
    colocated_scheduler: Scheduler = "chunked"
    rate: Annotated[float, Field(gt=0.0)] | None = None
    objective: Literal["gpus", "cost", "tokens-per-dollar"] = "gpus"


class Scenario(_Frozen):
    """One deployment to evaluate (fields documented in the module docstring)."""

    schema_version: Literal[1] = 1
    name: str | None = None
    description: str = ""
    model: Annotated[str, Field(min_length=1)]
    mode: Mode = "disaggregated"
    prefill: RoleSpec | None = None
    decode: RoleSpec | None = None
    colocated: ColocatedSpec | None = None
    link: Annotated[str, Field(min_length=1)] = "ib-ndr"
    nics_per_instance: PosInt | None = None
    granularity: Granularity = "layer"
    routing: Routing = "least-work"
    workload: WorkloadSpec
    slo: SloSpec = SloSpec()
    ttft_convention: Convention = "A"
    dtype: Dtype = "bf16"
    kv_dtype: Dtype = "bf16"
    max_num_seqs: PosInt | None = None
    gpu_memory_utilization: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    chunk_tokens: PosInt | None = None
    prefill_max_batch_tokens: PosInt | None = None
    search: SearchSpace | None = None

    @field_validator("workload", mode="before")
    @classmethod
    def _resolve_workload(cls, value: object, info: Any) -> object:
        if isinstance(value, str):
            base = (info.context or {}).get("base_dir", Path.cwd())
            return resolve_workload(value, Path(base))
        return value

    @model_validator(mode="after")
    def _shape(self) -> Scenario:
        if self.mode == "disaggregated":
            if self.prefill is None or self.decode is None:
                raise ValueError("mode disaggregated needs both prefill: and decode: blocks")
            if self.colocated is not None:
                raise ValueError("mode disaggregated takes no colocated: block")
        else:
            if self.colocated is None:
                raise ValueError("mode colocated needs a colocated: block")
            if self.prefill is not None or self.decode is not None:
                raise ValueError("mode colocated takes no prefill:/decode: blocks")
        return self

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment."""
        if self.colocated is not None:
            return self.colocated.gpus
        assert self.prefill is not None
        assert self.decode is not None
        return self.prefill.gpus + self.decode.gpus


def resolve_workload(name_or_path: str, base_dir: Path) -> WorkloadSpec:
    """A preset name (``chat``) or a workload YAML path (relative to ``base_dir``)."""
    from pdplan.workload import list_presets, load_preset_workload, load_workload

    if name_or_path in list_presets():
        return load_preset_workload(name_or_path)
    path = Path(name_or_path)
    if not path.is_absolute():
        path = base_dir / path
    if path.suffix.lower() in (".yaml", ".yml") or path.exists():
        return load_workload(path)
    return load_preset_workload(name_or_path)  # unknown name → error with suggestions


def scenario_from_dict(data: dict[str, Any], *, source: str, base_dir: Path) -> Scenario:
    """Validate a scenario mapping; pydantic and workload errors become one-line SpecError."""
    try:
        return Scenario.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as err:
        field, message = first_error_line(err)
        top = field == "(top level)"
        raise SpecError(message, source=source, field=None if top else field) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    path = Path(path)
    return scenario_from_dict(read_yaml_mapping(path), source=str(path), base_dir=path.parent)


def revalidate(scenario: Scenario, update: dict[str, Any], *, source: str = "overrides") -> Scenario:
    """``scenario`` with ``update`` applied, validated again (CLI overrides; STYLE.md)."""
    data = scenario.model_dump()
    data.update(update)
    try:
        return Scenario.model_validate(data, context={"base_dir": Path.cwd()})
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(message, source=source, field=field) from None


_XPYD = re.compile(r"^\s*(\d+)\s*[pP]\s*(\d+)\s*[dD]\s*$")


def parse_xpyd(text: str) -> tuple[int, int]:
    """``"2P1D"`` → (2, 1); SpecError otherwise."""
    match = _XPYD.match(text)
    if match is None or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise SpecError(f"expected counts like 2P1D, got {text!r}", field="--xpyd")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class ScenarioOverrides:
    """CLI overrides shared by ``evaluate`` and ``optimize`` (ARCHITECTURE §4); None = keep."""

    model: str | None = None
    gpu: str | None = None
    prefill_gpu: str | None = None
    decode_gpu: str | None = None
    tp: int | None = None
    prefill_tp: int | None = None
    decode_tp: int | None = None
    xpyd: str | None = None
    colocated: int | None = None
    scheduler: str | None = None
    link: str | None = None
    granularity: str | None = None
    routing: str | None = None
    isl: int | None = None
    osl: int | None = None
    workload: str | None = None
    ttft_slo: str | None = None
    tpot_slo: str | None = None
    attainment: float | None = None
    dtype: str | None = None
    kv_dtype: str | None = None


def _role_dict(role: RoleSpec | None, fallback: RoleSpec | None) -> dict[str, Any]:
    base = role or fallback
    assert base is not None
    return {k: getattr(base, k) for k in ("gpu", "tp", "pp", "count")}


def _deployment_update(sc: Scenario, ov: ScenarioOverrides) -> dict[str, Any]:
    """New prefill/decode/colocated blocks after --xpyd / --colocated / --gpu / --tp flags."""
    if ov.xpyd is not None and ov.colocated is not None:
        raise SpecError("give either --xpyd or --colocated, not both", field="--xpyd")
    mode = "colocated" if ov.colocated is not None else ("disaggregated" if ov.xpyd is not None else sc.mode)
    if mode == "colocated":
        co = (
            sc.colocated.model_dump() if sc.colocated else {**_role_dict(sc.decode, sc.prefill), "scheduler": "chunked"}
        )
        if ov.colocated is not None:
            co["count"] = ov.colocated
        co.update({k: v for k, v in (("gpu", ov.gpu), ("tp", ov.tp), ("scheduler", ov.scheduler)) if v is not None})
        return {"mode": mode, "colocated": co, "prefill": None, "decode": None}
    pre = _role_dict(sc.prefill, sc.colocated)
    dec = _role_dict(sc.decode, sc.colocated)
    if ov.xpyd is not None:
        pre["count"], dec["count"] = parse_xpyd(ov.xpyd)
    for role, gpu, tp in ((pre, ov.prefill_gpu, ov.prefill_tp), (dec, ov.decode_gpu, ov.decode_tp)):
        role["gpu"] = gpu or ov.gpu or role["gpu"]
        role["tp"] = tp or ov.tp or role["tp"]
    return {"mode": mode, "prefill": pre, "decode": dec, "colocated": None}


def _workload_update(sc: Scenario, ov: ScenarioOverrides) -> dict[str, Any]:
    if ov.workload is not None:
        return {"workload": resolve_workload(ov.workload, Path.cwd())}
    if ov.isl is None and ov.osl is None:
        return {}
    data = sc.workload.model_dump(exclude_none=True)
    if "trace" in data and (ov.isl is None or ov.osl is None):
        raise SpecError("a trace workload needs both --isl and --osl to be replaced", field="--isl")
    data.pop("trace", None)
    if ov.isl is not None:
        data["input_tokens"] = {"dist": "fixed", "value": ov.isl}
    if ov.osl is not None:
        data["output_tokens"] = {"dist": "fixed", "value": ov.osl}
    data["arrival"] = "poisson"
    return {"workload": data}


def apply_overrides(scenario: Scenario, ov: ScenarioOverrides) -> Scenario:
    """``scenario`` with CLI overrides applied and validated again (one-line SpecError)."""
    update: dict[str, Any] = _deployment_update(scenario, ov)
    update.update(_workload_update(scenario, ov))
    for key, value in (
        ("model", ov.model),
        ("link", ov.link),
        ("granularity", ov.granularity),
        ("routing", ov.routing),
        ("dtype", ov.dtype),
        ("kv_dtype", ov.kv_dtype),
    ):
        if value is not None:
            update[key] = value
    slo = scenario.slo.model_dump()
    slo_items: tuple[tuple[str, object], ...] = (
        ("ttft", ov.ttft_slo),
        ("tpot", ov.tpot_slo),
        ("attainment", ov.attainment),
    )
    for key, item in slo_items:
        if item is not None:
            slo[key] = item
    update["slo"] = slo
    if ov.scheduler is not None and update.get("mode") != "colocated":
        raise SpecError("--scheduler applies to colocated deployments (--colocated N)", field="--scheduler")
    return revalidate(scenario, update)


def _validate_file(path: Path) -> object:
    return load_scenario(path)


register_validator("scenario", SCENARIO_KEYS, _validate_file)

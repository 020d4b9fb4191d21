"""Scenario files: read a scenario YAML, resolve its workload (preset name or file), apply CLI overrides.

:func:`load_scenario` turns every failure into one-line :class:`~pdplan.errors.SpecError` naming the file and the
field; the schema itself is :class:`pdplan.specs.scenario.Scenario` (no file I/O there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.io.files import read_yaml_mapping
from pdplan.io.workloads import list_presets, load_preset_workload, load_workload
from pdplan.specs.base import first_error_line
from pdplan.specs.scenario import RoleSpec, Scenario
from pdplan.specs.workload import WorkloadSpec

SCENARIO_KEYS = ("mode", "prefill", "decode", "colocated", "slo")
"""Top-level keys by which ``pdplan validate`` recognises a scenario file."""


def resolve_workload(name_or_path: str, base_dir: Path) -> WorkloadSpec:
    """A preset name (``chat``) or a workload YAML path (relative to ``base_dir``)."""
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
        return Scenario.model_validate(data, context={"base_dir": base_dir, "resolve_workload": resolve_workload})
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
        return Scenario.model_validate(data, context={"base_dir": Path.cwd(), "resolve_workload": resolve_workload})
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

"""CLI overrides shared by ``evaluate``, ``simulate`` and ``optimize`` (ARCHITECTURE §4), applied to a scenario and
validated again."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError
from pdplan.io.scenario import resolve_workload, revalidate
from pdplan.specs.scenario import RoleSpec, Scenario

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

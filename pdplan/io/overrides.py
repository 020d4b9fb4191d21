"""The command line's overrides (:class:`~pdplan.specs.command_line.ScenarioOverrides`, docs/architecture.md §4)
applied to a
scenario and validated again: the deployment (``--xpyd``, ``--colocated``, ``--gpu``, ``--tp``...), the workload
(``--isl``/``--osl`` or ``--workload``), the SLO and the dtypes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pdplan.errors import SpecError
from pdplan.io.scenario import resolve_workload, revalidate
from pdplan.specs.command_line import PRFAAS_FIELDS, ScenarioOverrides, flag
from pdplan.specs.degrees import parse_degree
from pdplan.specs.scenario import RoleSpec, Scenario

__all__ = ["ScenarioOverrides", "apply_overrides", "parse_xpyd"]

_XPYD = re.compile(r"^\s*(\d+)\s*[pP]\s*(\d+)\s*[dD]\s*$")


def parse_xpyd(text: str) -> tuple[int, int]:
    """``"2P1D"`` → (2, 1); SpecError otherwise."""
    match = _XPYD.match(text)
    if match is None or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise SpecError(f"expected counts like 2P1D, got {text!r}", field=flag("xpyd"))
    return int(match.group(1)), int(match.group(2))


def check_one_mode(ov: ScenarioOverrides) -> None:
    """``--xpyd`` and ``--colocated`` choose different modes: at most one of them."""
    if ov.xpyd is not None and ov.colocated is not None:
        raise SpecError(f"give either {flag('xpyd')} or {flag('colocated')}, not both", field=flag("xpyd"))


def _role_dict(role: RoleSpec | None, fallback: RoleSpec | None) -> dict[str, Any]:
    base = role or fallback
    assert base is not None
    return {k: getattr(base, k) for k in ("gpu", "tp", "pp", "count", "dp", "ep", "expert_gather")}


def _deployment_update(sc: Scenario, ov: ScenarioOverrides) -> dict[str, Any]:
    """New prefill/decode/colocated blocks after --xpyd / --colocated / --gpu / --tp flags."""
    check_one_mode(ov)
    mode = "colocated" if ov.colocated is not None else ("disaggregated" if ov.xpyd is not None else sc.mode)
    if mode == "colocated":
        co = (
            sc.colocated.model_dump() if sc.colocated else {**_role_dict(sc.decode, sc.prefill), "scheduler": "chunked"}
        )
        if ov.colocated is not None:
            co["count"] = ov.colocated
        co.update(
            {
                k: v
                for k, v in (("gpu", ov.gpu), ("tp", ov.tp), ("pp", ov.pp), ("scheduler", ov.scheduler))
                if v is not None
            }
        )
        co.update(_parallel_update(ov.ep, ov.dp))
        return {"mode": mode, "colocated": co, "prefill": None, "decode": None}
    pre = _role_dict(sc.prefill, sc.colocated)
    dec = _role_dict(sc.decode, sc.colocated)
    if ov.xpyd is not None:
        pre["count"], dec["count"] = parse_xpyd(ov.xpyd)
    for role, gpu, tp in ((pre, ov.prefill_gpu, ov.prefill_tp), (dec, ov.decode_gpu, ov.decode_tp)):
        role["gpu"] = gpu or ov.gpu or role["gpu"]
        role["tp"] = tp or ov.tp or role["tp"]
        role["pp"] = ov.pp or role["pp"]
    pre.update(_parallel_update(ov.prefill_ep or ov.ep, ov.prefill_dp or ov.dp, "prefill_"))
    dec.update(_parallel_update(ov.decode_ep or ov.ep, ov.decode_dp or ov.dp, "decode_"))
    return {"mode": mode, "prefill": pre, "decode": dec, "colocated": None}


def _parallel_update(ep: str | None, dp: str | None, prefix: str = "") -> dict[str, int]:
    """``ep``/``dp`` of one role from ``--ep``/``--dp`` (or the role's own flag); one value each."""
    out: dict[str, int] = {}
    for key, text in (("ep", ep), ("dp", dp)):
        if text is not None:
            out[key] = parse_degree(text, flag(f"{prefix}{key}") if prefix else flag(key))
    return out


def _workload_update(sc: Scenario, ov: ScenarioOverrides) -> dict[str, Any]:
    if ov.workload is not None:
        return {"workload": resolve_workload(ov.workload, Path.cwd())}
    if ov.isl is None and ov.osl is None:
        return {}
    data = sc.workload.model_dump(exclude_none=True)
    if "trace" in data and (ov.isl is None or ov.osl is None):
        raise SpecError(
            f"a trace workload needs both {flag('isl')} and {flag('osl')} to be replaced", field=flag("isl")
        )
    data.pop("trace", None)
    if ov.isl is not None:
        data["input_tokens"] = {"dist": "fixed", "value": ov.isl}
    if ov.osl is not None:
        data["output_tokens"] = {"dist": "fixed", "value": ov.osl}
    data["arrival"] = "poisson"
    data["name"] = _overridden_name(sc.workload.name, ov)
    return {"workload": data}


def _prfaas_update(sc: Scenario, ov: ScenarioOverrides) -> dict[str, Any]:
    """The ``prfaas:`` block after the ``--prfaas-*`` flags (``--prfaas-gpu`` creates one)."""
    values = {
        "gpu": ov.prfaas_gpu,
        "tp": ov.prfaas_tp,
        "count": ov.prfaas_instances,
        "link": ov.prfaas_link,
        "rtt": ov.prfaas_rtt,
        "threshold": ov.prfaas_threshold,
    }
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return {}
    if sc.prfaas is None and ov.prfaas_gpu is None:
        field = flag(next(f for f in PRFAAS_FIELDS if getattr(ov, f) is not None))
        raise SpecError(f"the scenario has no prfaas: block; give {flag('prfaas_gpu')} to add one", field=field)
    block = sc.prfaas.model_dump(exclude_none=True) if sc.prfaas is not None else {}
    return {"prfaas": {**block, **given}}


def _overridden_name(name: str | None, ov: ScenarioOverrides) -> str:
    """The workload's name with the fixed lengths that replaced its own: ``chat (isl=2048)``."""
    fixed = ", ".join(f"{key}={value}" for key, value in (("isl", ov.isl), ("osl", ov.osl)) if value is not None)
    return f"{name} ({fixed})" if name else fixed


def apply_overrides(scenario: Scenario, ov: ScenarioOverrides) -> Scenario:
    """``scenario`` with CLI overrides applied and validated again (one-line SpecError)."""
    update: dict[str, Any] = _deployment_update(scenario, ov)
    update.update(_workload_update(scenario, ov))
    update.update(_prfaas_update(scenario, ov))
    for key, value in (
        ("model", ov.model),
        ("link", ov.link),
        ("granularity", ov.granularity),
        ("routing", ov.routing),
        ("dtype", ov.dtype),
        ("kv_dtype", ov.kv_dtype),
        ("engine", ov.engine),
    ):
        if value is not None:
            update[key] = value
    slo = scenario.slo.model_dump()
    slo_items: tuple[tuple[str, object], ...] = (
        ("ttft", ov.ttft_slo),
        ("tpot", ov.tpot_slo),
        ("attainment", ov.attainment),
        ("percentile", ov.percentile),
    )
    for key, item in slo_items:
        if item is not None:
            slo[key] = item
    update["slo"] = slo
    if ov.max_instances is not None:
        raise SpecError(f"{flag('max_instances')} bounds optimize's search only", field=flag("max_instances"))
    if ov.scheduler is not None and update.get("mode") != "colocated":
        raise SpecError(
            f"{flag('scheduler')} applies to colocated deployments ({flag('colocated')} N)", field=flag("scheduler")
        )
    return revalidate(scenario, update)

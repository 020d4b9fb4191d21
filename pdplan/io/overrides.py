"""The command line's overrides (:class:`~pdplan.specs.command_line.ScenarioOverrides`, docs/architecture.md §4)
applied to a scenario and validated again — the one module that reads them:

* :func:`apply_overrides` (``evaluate``, ``simulate``; ``optimize`` for the non-deployment fields): the deployment
  (``--xpyd``, ``--colocated``, ``--gpu``, ``--tp``...), the workload (``--isl``/``--osl`` or ``--workload``), the SLO
  and the dtypes replace the scenario's;
* :func:`search_scenario` (``optimize``): the model, workload, SLO and dtypes replace the scenario's; the deployment
  values narrow its ``search:`` block (comma-separated lists allowed, :func:`with_search_overrides`) or fix the
  instance counts (``--xpyd``, ``--colocated``, :func:`instance_counts`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.io.scenario import resolve_workload, revalidate
from pdplan.specs.base import first_error_line
from pdplan.specs.ceilings import MAX_INSTANCES_PER_ROLE
from pdplan.specs.command_line import DEPLOYMENT_FIELDS, PRFAAS_FIELDS, ScenarioOverrides, flag
from pdplan.specs.degrees import parse_degree, parse_degrees
from pdplan.specs.scenario import RoleSpec, Scenario, SearchSpace

_XPYD = re.compile(r"^\s*(\d+)\s*[pP]\s*(\d+)\s*[dD]\s*$")


def parse_xpyd(text: str) -> tuple[int, int]:
    """``"2P1D"`` → (2, 1); SpecError otherwise."""
    match = _XPYD.match(text)
    if match is None or len(text) > 32 or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise SpecError(f"expected counts like 2P1D, got {text!r}", field=flag("xpyd"))
    counts = int(match.group(1)), int(match.group(2))
    if max(counts) > MAX_INSTANCES_PER_ROLE:
        raise SpecError(
            f"at most {MAX_INSTANCES_PER_ROLE} instances per role (pdplan.specs.ceilings), got {text!r}",
            field=flag("xpyd"),
        )
    return counts


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
        if ov.isl is not None or ov.osl is not None:
            given = flag("isl") if ov.isl is not None else flag("osl")
            raise SpecError(
                f"give either {flag('workload')} or {given}, not both (a workload file has its own lengths)",
                field=given,
            )
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
    update.update(_engine_update(ov))
    if ov.max_instances is not None:
        raise SpecError(f"{flag('max_instances')} bounds optimize's search only", field=flag("max_instances"))
    if ov.scheduler is not None and update.get("mode") != "colocated":
        raise SpecError(
            f"{flag('scheduler')} applies to colocated deployments ({flag('colocated')} N)", field=flag("scheduler")
        )
    return revalidate(scenario, update)


def _engine_update(ov: ScenarioOverrides) -> dict[str, Any]:
    """Scenario keys set by the engine flags, named as vLLM names them: ``--max-num-seqs`` → ``max_num_seqs`` (one
    value here; ``optimize`` searches a list, :func:`_search_update`), ``--max-num-batched-tokens`` → the step's token
    budget, which vLLM applies to both batching paths pdplan models: ``chunk_tokens`` (a colocated instance's
    chunked prefill) and ``prefill_max_batch_tokens`` (the prompts a prefill instance batches),
    ``--max-model-len`` → ``max_model_len``, ``--gpu-memory-utilization`` → ``gpu_memory_utilization``."""
    update: dict[str, Any] = {}
    if ov.max_num_seqs is not None:
        update["max_num_seqs"] = parse_degree(ov.max_num_seqs, flag("max_num_seqs"))
    if ov.max_num_batched_tokens is not None:
        update["chunk_tokens"] = ov.max_num_batched_tokens
        update["prefill_max_batch_tokens"] = ov.max_num_batched_tokens
    if ov.max_model_len is not None:
        update["max_model_len"] = ov.max_model_len
    if ov.gpu_memory_utilization is not None:
        update["gpu_memory_utilization"] = ov.gpu_memory_utilization
    return update


# --- optimize: the deployment values narrow the search --------------------------------------------------


def _names(text: str | None) -> list[str] | None:
    """``"h100-sxm,l40s"`` → ``["h100-sxm", "l40s"]``; None stays None."""
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise SpecError(f"expected one or more comma-separated names, got {text!r}")
    return names


def _search_update(ov: ScenarioOverrides) -> dict[str, object]:
    """``search:`` fields set by --gpu/--prefill-gpu/--decode-gpu, --tp/--prefill-tp/--decode-tp, --link,
    --granularity, --routing and --max-num-seqs (the batch caps searched)."""
    update: dict[str, object] = {}
    prefill = _names(ov.prefill_gpu) or _names(ov.gpu)
    decode = _names(ov.decode_gpu) or _names(ov.gpu)
    if prefill:
        update["prefill_gpus"] = prefill
    if decode:
        update["decode_gpus"] = decode
    # --tp narrows both roles; --prefill-tp / --decode-tp narrow their own role only (issue #12 item 5: they used
    # to join one TP set searched for both roles)
    for key, degree in (("tp", ov.tp), ("prefill_tp", ov.prefill_tp), ("decode_tp", ov.decode_tp), ("pp", ov.pp)):
        if degree is not None:
            update[key] = [degree]
    if ov.max_instances is not None:
        update["max_instances"] = ov.max_instances
    if ov.max_num_seqs is not None:
        update["max_num_seqs"] = parse_degrees(ov.max_num_seqs, flag("max_num_seqs"))
    for key in ("ep", "prefill_ep", "decode_ep", "dp", "prefill_dp", "decode_dp"):
        text = getattr(ov, key)
        if text is not None:
            update[key] = parse_degrees(text, flag(key))
    for key, value in (("links", ov.link), ("granularities", ov.granularity), ("routing", ov.routing)):
        names = _names(value)
        if names:
            update[key] = names
    return update


def _narrowed(scenario: Scenario, update: Mapping[str, object]) -> Scenario:
    """``scenario`` whose ``search:`` block takes ``update``, validated again (one-line SpecError)."""
    if not update:
        return scenario
    s = scenario.search or SearchSpace()
    try:
        search = SearchSpace.model_validate({**s.model_dump(), **update})
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(message, source="command line", field=f"search.{field}") from None
    return scenario.model_copy(update={"search": search})


def with_search_overrides(scenario: Scenario, ov: ScenarioOverrides) -> Scenario:
    """``scenario`` whose ``search:`` block is narrowed by the CLI (``--gpu`` both roles, ``--tp`` one degree...).

    The roles, TP, links, granularities and routing are validated first, ``--scheduler`` (the colocated baseline's
    batching) after them, so a bad value in each reports the first one alone.
    """
    narrowed = _narrowed(scenario, _search_update(ov))
    scheduler = {} if ov.scheduler is None else {"colocated_scheduler": ov.scheduler}
    return _narrowed(narrowed, scheduler)


def instance_counts(ov: ScenarioOverrides) -> tuple[tuple[int, int] | None, int | None]:
    """``(x, y)`` from ``--xpyd`` and ``N`` from ``--colocated`` (None: search them); at most one is given."""
    check_one_mode(ov)
    return (parse_xpyd(ov.xpyd) if ov.xpyd is not None else None), ov.colocated


def search_scenario(scenario: Scenario, ov: ScenarioOverrides) -> Scenario:
    """The scenario ``optimize`` searches: ``scenario`` with the model, workload, SLO and dtype overrides applied,
    and its ``search:`` block narrowed by the deployment ones (:func:`with_search_overrides`)."""
    return with_search_overrides(apply_overrides(scenario, ov.without(DEPLOYMENT_FIELDS)), ov)
